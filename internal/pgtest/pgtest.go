// Package pgtest connects tests to the PostgreSQL that scripts/postgres.sh
// starts: it reads BUSBAR_TEST_POSTGRES_DSN, skips the test without it
// (fails it when BUSBAR_REQUIRE_POSTGRES=1, as in CI), and hands out fresh
// tables dropped when the test ends. It owns no schema: callers create
// their tables.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool returns a pool on the test database, closed when the test ends.
func Pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("BUSBAR_REQUIRE_POSTGRES") == "1" {
			t.Fatal("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
		}
		t.Skip("BUSBAR_TEST_POSTGRES_DSN is not set (start one with scripts/postgres.sh)")
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Table returns a fresh table name starting with prefix, dropped (if it
// was created) when the test ends.
func Table(t *testing.T, pool *pgxpool.Pool, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
	})
	return table
}
