package consistenttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresDSN returns the test PostgreSQL's connection string from
// BUSBAR_TEST_POSTGRES_DSN (scripts/postgres.sh starts one and prints it).
// Without one it skips the test, or fails it when BUSBAR_REQUIRE_POSTGRES=1.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return pgtest.DSN(t)
}

// PostgresStore returns a consistentpg.Store of the test PostgreSQL on
// fresh tables (o.Table is replaced by a random name), dropped when the test
// ends, and its pool.
func PostgresStore(t testing.TB, o consistentpg.Options) (*consistentpg.Store, *pgxpool.Pool) {
	t.Helper()
	p, err := pgxpool.New(context.Background(), PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
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
	return st, p
}
