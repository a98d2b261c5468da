// Package pgtest finds the PostgreSQL that tests may use. scripts/test.sh
// starts a throwaway server (scripts/postgres.sh) and exports its DSN in
// BUSBAR_TEST_POSTGRES_DSN; BUSBAR_REQUIRE_POSTGRES=1 turns a missing server
// into a failure instead of a skip, so CI cannot pass by skipping. It also
// hands out pools and fresh tables dropped when the test ends; it owns no
// schema.
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

// Environment variables read by DSN.
const (
	EnvDSN     = "BUSBAR_TEST_POSTGRES_DSN"
	EnvRequire = "BUSBAR_REQUIRE_POSTGRES"
)

// TB is the part of testing.TB that DSN needs.
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// DSN returns the test server's connection string, or skips the test (fails
// it when BUSBAR_REQUIRE_POSTGRES is set).
func DSN(t TB) string {
	t.Helper()
	d := os.Getenv(EnvDSN)
	if d == "" {
		if os.Getenv(EnvRequire) != "" {
			t.Fatal(EnvRequire + " is set but " + EnvDSN + " is empty: start scripts/postgres.sh")
		}
		t.Skip("no PostgreSQL: eval \"$(scripts/postgres.sh start)\" sets " + EnvDSN)
	}
	return d
}

// Pool returns a pool on the test database (see DSN), closed when the test
// ends.
func Pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Table returns a fresh table name starting with prefix, dropped (if it
// was created) when the test ends. Callers create their tables.
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
