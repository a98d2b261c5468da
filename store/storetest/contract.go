package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
)

// The parts of the contract a shared backend needs: contexts, conditions
// (fencing) and change notification.

func testCancelledContext(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "k", "v")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b store.Batch
	b.Set([]byte("k"), []byte("changed"))
	b.Set([]byte("new"), []byte("x"))
	if err := s.Commit(ctx, &b); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context: %v, want context.Canceled", err)
	}
	wantValue(t, s, "k", "v")
	wantMissing(t, s, "new")
	if _, err := s.Get(ctx, []byte("k")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.GetMany(ctx, [][]byte{[]byte("k")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetMany with a cancelled context: %v, want context.Canceled", err)
	}
	called := false
	err := s.Scan(ctx, nil, nil, func(_, _ []byte) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("Scan with a cancelled context: err %v, fn called %v; want context.Canceled, not called", err, called)
	}
}

func testConditions(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	set(t, s, "lease/e1", "epoch-1")

	// The condition holds: the batch applies.
	var b store.Batch
	b.Require([]byte("lease/e1"), []byte("epoch-1"))
	b.Set([]byte("data/e1/a"), []byte("1"))
	commit(t, s, &b)
	wantValue(t, s, "data/e1/a", "1")

	// Another node takes the lease: the old owner's fenced batch is refused
	// whole.
	set(t, s, "lease/e1", "epoch-2")
	b = store.Batch{}
	b.Require([]byte("lease/e1"), []byte("epoch-1"))
	b.Set([]byte("data/e1/a"), []byte("stale"))
	b.Set([]byte("data/e1/b"), []byte("stale"))
	if err := s.Commit(ctx, &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("Commit fenced by a superseded epoch: %v, want ErrConditionFailed", err)
	}
	wantValue(t, s, "data/e1/a", "1")
	wantMissing(t, s, "data/e1/b")

	// A nil value requires absence: create-if-absent.
	b = store.Batch{}
	b.Require([]byte("lease/e2"), nil)
	b.Set([]byte("lease/e2"), []byte("epoch-1"))
	commit(t, s, &b)
	b = store.Batch{}
	b.Require([]byte("lease/e2"), nil)
	b.Set([]byte("lease/e2"), []byte("epoch-9"))
	if err := s.Commit(ctx, &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("create-if-absent of an existing key: %v, want ErrConditionFailed", err)
	}
	wantValue(t, s, "lease/e2", "epoch-1")

	// An empty value is not absence.
	set(t, s, "empty", "")
	b = store.Batch{}
	b.Require([]byte("empty"), nil)
	b.Set([]byte("x"), []byte("1"))
	if err := s.Commit(ctx, &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("absence required of a key holding an empty value: %v, want ErrConditionFailed", err)
	}
	b = store.Batch{}
	b.Require([]byte("empty"), []byte{})
	b.Set([]byte("x"), []byte("1"))
	commit(t, s, &b)
	wantValue(t, s, "x", "1")

	// A batch of conditions alone reports whether they hold.
	b = store.Batch{}
	b.Require([]byte("lease/e1"), []byte("epoch-2"))
	commit(t, s, &b)
	b = store.Batch{}
	b.Require([]byte("lease/e1"), []byte("epoch-1"))
	if err := s.Commit(ctx, &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("conditions-only batch that fails: %v, want ErrConditionFailed", err)
	}
}

// testConditionsRace has many writers compare-and-swap one counter at once:
// with group commit, a condition must see the batches grouped before it.
// Exactly one writer wins each value, so the counter ends at the number of
// successful commits and no value is skipped or won twice.
func testConditionsRace(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	set(t, s, "ctr", fmt.Sprint(0))
	const writers, rounds = 16, 40
	var mu sync.Mutex
	won := map[int]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				v, err := s.Get(ctx, []byte("ctr"))
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				var n int
				fmt.Sscan(string(v), &n)
				var b store.Batch
				b.Require([]byte("ctr"), v)
				b.Set([]byte("ctr"), []byte(fmt.Sprint(n+1)))
				b.Set([]byte(fmt.Sprintf("won/%06d", n+1)), []byte(fmt.Sprint(w)))
				err = s.Commit(ctx, &b)
				if errors.Is(err, store.ErrConditionFailed) {
					continue
				}
				if err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				mu.Lock()
				won[n+1]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	v, _ := s.Get(ctx, []byte("ctr"))
	var final int
	fmt.Sscan(string(v), &final)
	if final != len(won) {
		t.Fatalf("counter is %d after %d successful compare-and-swaps", final, len(won))
	}
	for i := 1; i <= final; i++ {
		if won[i] != 1 {
			t.Fatalf("value %d was won %d times, want exactly once", i, won[i])
		}
	}
	if n := len(scan(t, s, []byte("won/"), []byte("won0"))); n != final {
		t.Fatalf("%d winner records for %d wins", n, final)
	}
}

func testWatch(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	stop := s.Watch([]byte("meta/"), func(k []byte) {
		mu.Lock()
		got = append(got, string(k))
		mu.Unlock()
	})
	defer stop()
	set(t, s, "meta/a", "1", "data/x", "2")
	var b store.Batch
	b.Delete([]byte("meta/b"))
	b.Set([]byte("meta/c"), []byte("3"))
	commit(t, s, &b)
	b = store.Batch{}
	b.DeleteRange([]byte("a"), []byte("meta/m")) // overlaps the prefix from its start
	commit(t, s, &b)
	b = store.Batch{}
	b.Require([]byte("meta/a"), []byte("no such value"))
	b.Set([]byte("meta/refused"), []byte("x"))
	if err := s.Commit(ctx, &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("Commit: %v, want ErrConditionFailed", err)
	}
	set(t, s, "meta/z", "last")
	want := []string{"meta/a", "meta/b", "meta/c", "meta/", "meta/z"}
	snapshot := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	poll.Until(t, 10*time.Second, "watch notifications", func() bool { return len(snapshot()) >= len(want) })
	if g := snapshot(); !slices.Equal(g, want) {
		t.Fatalf("watched keys %q, want %q (in commit order; refused batches and other prefixes not reported)", g, want)
	}
	// A stopped watch hears nothing more: a second watch, still running,
	// hears the next change, and by then the stopped one would have been
	// handed it too (both are notified from the same commit).
	stop()
	var other atomic.Bool
	stop2 := s.Watch([]byte("meta/"), func(k []byte) {
		if string(k) == "meta/after-stop" {
			other.Store(true)
		}
	})
	defer stop2()
	set(t, s, "meta/after-stop", "x")
	poll.Until(t, 10*time.Second, "the running watch to hear the change", other.Load)
	stop() // idempotent
	if g := snapshot(); len(g) != len(want) {
		t.Fatalf("notified after stop: %q", g)
	}
}
