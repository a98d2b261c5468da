package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	busbarconfig "github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/consistent/consistenttest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestShootingRange plays the example against an in-process broker that
// declares Config.json and the test PostgreSQL: every shot, duplicates
// included, counts once and has exactly one result.
func TestShootingRange(t *testing.T) {
	dsn := consistenttest.PostgresDSN(t)
	f, err := busbarconfig.Load("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := busbartest.Start(t, busbartest.WithConfig(f))
	table := "shooting_range_test_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	t.Cleanup(func() {
		if pool, err := pgxpool.New(context.Background(), dsn); err == nil {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_outbox")
			pool.Close()
		}
	})
	var out bytes.Buffer
	cfg := config{connStr: srv.ConnectionString(), postgres: dsn, table: table, games: 3, shots: 12, maxAttempts: 5, resendEvery: 3, wait: 3 * time.Minute,
		onError: func(err error) { t.Log(err) }}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "sent 36 shots (12 of them twice) to 3 games") ||
		!strings.Contains(out.String(), "every shot counted once and has exactly one result") ||
		strings.Count(out.String(), "; 12 versions; ") != 3 {
		t.Fatalf("output:\n%s", out.String())
	}
}
