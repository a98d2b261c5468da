package geopg_test

import (
	"context"
	"testing"

	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/geo/geopg"
	"github.com/busbar-io/busbar/geo/geotest"
	"github.com/busbar-io/busbar/internal/pgtest"
)

// newStore returns a Store on a fresh table of the test PostgreSQL,
// dropped when the test ends.
func newStore(t *testing.T) *geopg.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	st, err := geopg.New(pool, &geopg.Options{Table: pgtest.Table(t, pool, "geo_test_")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSuite runs the shared journal suite on PostgreSQL.
func TestSuite(t *testing.T) {
	geotest.Run(t, func(t *testing.T) geo.Journal { return newStore(t) })
}

func TestNewRejectsBadTableName(t *testing.T) {
	if _, err := geopg.New(pgtest.Pool(t), &geopg.Options{Table: "x; DROP TABLE y"}); err == nil {
		t.Fatal("New accepted a table name with SQL in it")
	}
}
