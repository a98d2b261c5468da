package consistentpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/consistent/consistenttest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/jackc/pgx/v5"
)

func newStore(t testing.TB, o consistentpg.Options) *consistentpg.Store {
	st, _ := consistenttest.PostgresStore(t, o)
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

// TestPrune: streams that receive no more messages are cleaned up by Prune
// and PruneEvery, by age, keeping each stream's newest version and its base.
func TestPrune(t *testing.T) {
	epoch := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(epoch)
	st, pool := consistenttest.PostgresStore(t, consistentpg.Options{Retention: consistent.Retention{MaxVersions: 100, MaxAge: time.Hour}, Clock: clk})
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
	// The periodic pruner, on the fake clock: after two hours, it has
	// removed versions 1-3 of both streams.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- st.PruneEvery(runCtx, 2*time.Hour, func(err error) { t.Error(err) }) }()
	rows := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{st.Table()}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	poll.Until(t, 0, "the pruner to arm its timer", func() bool { return clk.Pending() > 0 })
	clk.Advance(2 * time.Hour)
	poll.Until(t, 0, "the pruner to remove 6 versions", func() bool { return rows() == 4 })
	stop()
	if err := <-done; err != context.Canceled {
		t.Fatalf("PruneEvery returned %v", err)
	}
	if n, err := st.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune after the pruner removed %d, %v", n, err)
	}
	for _, id := range []string{"a", "b"} {
		ld, err := st.Load(ctx, consistent.Key{ID: id}, id+"4")
		if err != nil || ld.Latest.Number != 5 || ld.Match == nil || ld.Match.Number != 4 || ld.Base != nil {
			t.Fatalf("after Prune, %s: %+v, %v", id, ld, err)
		}
	}
}
