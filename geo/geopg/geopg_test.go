package geopg_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// TestPrune: done message records before the cutoff go, except each
// session's newest done one, and the session's floor moves past them;
// records not done, newer ones and other sessions stay.
func TestPrune(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	add := func(session string, pos int64, status geo.Status) {
		if _, err := st.Create(ctx, geo.Record{Key: geo.Key{Session: session, Position: pos}, Status: status, Owner: "east#1"}); err != nil {
			t.Fatal(err)
		}
	}
	for p := int64(1); p <= 4; p++ {
		add("a", p, geo.Completed)
	}
	add("a", 5, geo.Working)
	add("b", 1, geo.Failed)
	add("b", 2, geo.Completed)
	if n, err := st.Prune(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("Prune before everything: %d, %v; want 0", n, err)
	}
	n, err := st.Prune(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 4 {
		t.Fatalf("Prune: %d, %v; want 4 (a/1-3, b/1)", n, err)
	}
	for _, k := range []geo.Key{{Session: "a", Position: 1}, {Session: "a", Position: 3}, {Session: "b", Position: 1}} {
		if _, err := st.Get(ctx, k); !errors.Is(err, geo.ErrNotFound) {
			t.Errorf("%v after Prune: %v, want ErrNotFound", k, err)
		}
	}
	for _, k := range []geo.Key{{Session: "a", Position: 4}, {Session: "a", Position: 5}, {Session: "b", Position: 2}} {
		if _, err := st.Get(ctx, k); err != nil {
			t.Errorf("%v after Prune: %v", k, err)
		}
	}
	for session, next := range map[string]int64{"a": 4, "b": 2} {
		f, err := st.Get(ctx, geo.Key{Session: session})
		if err != nil || f.Next != next {
			t.Errorf("floor of %s: %+v, %v; want Next %d", session, f, err, next)
		}
	}
	// Again: nothing more to remove, the floors stay.
	if n, err := st.Prune(ctx, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second Prune: %d, %v; want 0", n, err)
	}
	if f, _ := st.Get(ctx, geo.Key{Session: "a"}); f.Next != 4 {
		t.Errorf("floor of a after a second Prune: %d", f.Next)
	}
}
