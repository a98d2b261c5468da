package consistentpg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/consistent/consistenttest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool connects to the test PostgreSQL, or skips the test without one
// (fails, with BUSBAR_REQUIRE_POSTGRES=1).
func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("BUSBAR_REQUIRE_POSTGRES") == "1" {
			t.Fatal("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
		}
		t.Skip("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
	}
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newStore returns a Store on fresh tables, dropped when the test ends.
func newStore(t testing.TB, o consistentpg.Options) *consistentpg.Store {
	t.Helper()
	p := pool(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	o.Table = "consistent_test_" + hex.EncodeToString(b)
	st, err := consistentpg.New(p, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = p.Exec(context.Background(), "DROP TABLE "+pgx.Identifier{o.Table}.Sanitize()+", "+pgx.Identifier{o.Table + "_outbox"}.Sanitize())
	})
	return st
}

func TestStoreSuite(t *testing.T) {
	consistenttest.Run(t, func(t *testing.T, r consistent.Retention) consistenttest.Harness {
		return consistenttest.Harness{
			Store: newStore(t, consistentpg.Options{Retention: r}),
			Key:   func(id string) consistent.Key { return consistent.Key{ID: id} },
		}
	})
}

// TestPrune: streams that receive no more messages are cleaned up by Prune,
// by age, keeping each stream's newest version and its base.
func TestPrune(t *testing.T) {
	epoch := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(epoch)
	st := newStore(t, consistentpg.Options{Retention: consistent.Retention{MaxVersions: 100, MaxAge: time.Hour}, Clock: clk})
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		for n := int64(1); n <= 5; n++ {
			v := consistent.Version{Number: n, MessageID: id + string(rune('0'+n)), Context: []byte(`{}`), State: []byte(`{}`),
				Stored: epoch.Add(time.Duration(n) * time.Minute)}
			if err := st.Append(ctx, consistent.Key{ID: id}, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := st.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune within the window removed %d, %v", n, err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := st.Prune(ctx); err != nil || n != 6 {
		t.Fatalf("Prune after the window removed %d, %v; want 6 (versions 1-3 of both streams)", n, err)
	}
	for _, id := range []string{"a", "b"} {
		ld, err := st.Load(ctx, consistent.Key{ID: id}, id+"4")
		if err != nil || ld.Latest.Number != 5 || ld.Match == nil || ld.Match.Number != 4 || ld.Base != nil {
			t.Fatalf("after Prune, %s: %+v, %v", id, ld, err)
		}
	}
}
