package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/storetest"
)

// dsn returns the test database, or skips.
func dsn(t *testing.T) string { return pgtest.DSN(t) }

var tables atomic.Int64

// freshTable names a table no other test uses.
func freshTable() string {
	return fmt.Sprintf("kv_test_%d_%d", os.Getpid(), tables.Add(1))
}

func open(t *testing.T, table string, announce ...string) *Store {
	t.Helper()
	var a [][]byte
	for _, p := range announce {
		a = append(a, []byte(p))
	}
	s, err := Open(context.Background(), dsn(t), Options{Table: table, Announce: a})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	dsn(t)
	tableOf := map[store.Store]string{}
	var mu sync.Mutex
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			name := freshTable()
			s := open(t, name)
			mu.Lock()
			tableOf[s] = name
			mu.Unlock()
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			name := tableOf[s]
			mu.Unlock()
			r := open(t, name)
			mu.Lock()
			tableOf[r] = name
			mu.Unlock()
			return r
		},
		Durable: true,
	})
}

// Two stores on one table are two broker nodes: a node that lost its lease
// (the epoch moved on) can no longer write, whichever node it is.
func TestFencingAcrossWriters(t *testing.T) {
	table := freshTable()
	a, b := open(t, table), open(t, table)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	set := func(s *Store, cond []byte, k, v string) error {
		var bt store.Batch
		bt.Require([]byte("lease/q"), cond)
		bt.Set([]byte(k), []byte(v))
		if k != "lease/q" {
			bt.Set([]byte("lease/q"), cond)
		}
		return s.Commit(ctx, &bt)
	}
	// a creates the lease; b's create-if-absent fails.
	if err := set(a, nil, "lease/q", "a:1"); err != nil {
		t.Fatal(err)
	}
	if err := set(b, nil, "lease/q", "b:1"); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("second create of the lease: %v, want ErrConditionFailed", err)
	}
	if err := set(a, []byte("a:1"), "msg/1", "from a"); err != nil {
		t.Fatal(err)
	}
	// b takes the lease over (epoch 2); a's next write is refused.
	var take store.Batch
	take.Require([]byte("lease/q"), []byte("a:1"))
	take.Set([]byte("lease/q"), []byte("b:2"))
	if err := b.Commit(ctx, &take); err != nil {
		t.Fatal(err)
	}
	if err := set(a, []byte("a:1"), "msg/2", "stale"); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("write by the deposed owner: %v, want ErrConditionFailed", err)
	}
	if _, err := b.Get(ctx, []byte("msg/2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deposed owner's write is visible: %v", err)
	}
}

// Sixteen writers in two processes race to take one lease: exactly one
// wins each epoch.
func TestConditionsAcrossWritersUnderContention(t *testing.T) {
	table := freshTable()
	nodes := []*Store{open(t, table), open(t, table)}
	defer nodes[0].Close()
	defer nodes[1].Close()
	ctx := context.Background()
	var wins atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			s := nodes[w%2]
			for range 10 {
				cur, err := s.Get(ctx, []byte("lease"))
				if errors.Is(err, store.ErrNotFound) {
					cur = nil
				} else if err != nil {
					t.Error(err)
					return
				}
				var b store.Batch
				b.Require([]byte("lease"), cur)
				b.Set([]byte("lease"), []byte(fmt.Sprintf("%s/%d", cur, w)))
				err = s.Commit(ctx, &b)
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, store.ErrConditionFailed) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	v, err := nodes[0].Get(ctx, []byte("lease"))
	if err != nil {
		t.Fatal(err)
	}
	// Each win appended one "/w" to the value it saw: the value records
	// every successful compare-and-swap, so none was lost or doubled.
	if n := int64(len(slices.DeleteFunc([]byte(v), func(c byte) bool { return c != '/' }))); n != wins.Load() {
		t.Fatalf("value %q records %d swaps, %d commits succeeded", v, n, wins.Load())
	}
}

// A change to announced metadata reaches the other node's watch; keys
// outside the announced prefixes stay local.
func TestWatchHearsOtherWriters(t *testing.T) {
	table := freshTable()
	a, b := open(t, table, "meta/"), open(t, table, "meta/")
	defer a.Close()
	defer b.Close()
	snapshot := watchKeys(t, b, "meta/")
	var bt store.Batch
	bt.Set([]byte("meta/queue/orders"), []byte("v1"))
	bt.Set([]byte("data/orders/1"), []byte("m"))
	if err := a.Commit(context.Background(), &bt); err != nil {
		t.Fatal(err)
	}
	bt = store.Batch{}
	bt.Delete([]byte("meta/queue/orders"))
	if err := a.Commit(context.Background(), &bt); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the other node's changes", func() bool { return len(snapshot()) >= 2 })
	if g := snapshot(); len(g) != 2 || string(g[0]) != "meta/queue/orders" || string(g[1]) != "meta/queue/orders" {
		t.Fatalf("watched %q", g)
	}
}

// watchKeys watches prefix of s until the test ends; snapshot returns the
// keys reported so far.
func watchKeys(t *testing.T, s *Store, prefix string) (snapshot func() [][]byte) {
	var mu sync.Mutex
	var got [][]byte
	t.Cleanup(s.Watch([]byte(prefix), func(k []byte) {
		mu.Lock()
		got = append(got, k)
		mu.Unlock()
	}))
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// When the connection that listens for other writers' changes is lost,
// what they announce meanwhile is lost with it: once listening again, the
// store tells its watches (a nil key), then reports changes as before.
func TestWatchIsToldOfALostStream(t *testing.T) {
	table := freshTable()
	a, b := open(t, table, "meta/"), open(t, table, "meta/")
	defer a.Close()
	defer b.Close()
	snapshot := watchKeys(t, b, "meta/")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cut int
	err = conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
		`LISTEN "`+table+`_changes"`).Scan(&cut)
	if err != nil || cut != 2 {
		t.Fatalf("cutting the two stores' listeners: %d cut, %v", cut, err)
	}
	poll.Until(t, 10*time.Second, "the watch told of the lost stream", func() bool { return len(snapshot()) > 0 })
	var bt store.Batch
	bt.Set([]byte("meta/after"), []byte("v"))
	if err := a.Commit(ctx, &bt); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the change after the loss", func() bool { return len(snapshot()) > 1 })
	if g := snapshot(); len(g) != 2 || g[0] != nil || string(g[1]) != "meta/after" {
		t.Fatalf("watched %q, want nil (the loss) then meta/after", g)
	}
}

// A writer paused inside a group commit, holding the lock of a condition
// key (as a node stopped with SIGSTOP would), must not block another
// writer's commit on that key for longer than IdleInTransaction: a lease
// takeover is such a commit.
func TestPausedWriterDoesNotBlockOthers(t *testing.T) {
	table := freshTable()
	a, b := open(t, table), open(t, table)
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	key := []byte("lease/1")
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, a.q.lockCond, key); err != nil {
		t.Fatal(err)
	}
	// a's transaction now sits idle with the lock, as a paused node's would.
	var bt store.Batch
	bt.Require(key, nil)
	bt.Set(key, []byte("b"))
	done := make(chan error, 1)
	go func() { done <- b.Commit(ctx, &bt) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a commit behind a paused writer's lock: %v", err)
		}
	case <-time.After(20 * time.Second): // the deadline of a commit that waits for the paused writer forever
		t.Fatal("a commit waited 20 s behind a paused writer's lock")
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the paused writer's transaction is still open")
	}
}
