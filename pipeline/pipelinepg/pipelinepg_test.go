package pipelinepg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/busbar-io/busbar/pipeline/pipelinetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newStore connects to the test PostgreSQL and returns a Store on a fresh
// table, dropped when the test ends.
func newStore(t *testing.T) *pipelinepg.Store {
	t.Helper()
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("BUSBAR_REQUIRE_POSTGRES") == "1" {
			t.Fatal("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
		}
		t.Skip("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "failed_tasks_test_" + hex.EncodeToString(b)
	st := pipelinepg.New(pool, table)
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{table}.Sanitize()) })
	return st
}

// TestSuite runs the shared store suite on PostgreSQL.
func TestSuite(t *testing.T) {
	pipelinetest.Run(t, func(t *testing.T) pipeline.Store { return newStore(t) })
}
