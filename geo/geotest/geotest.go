// Package geotest is the one test suite every geo.Journal implementation
// passes. It owns no journal of its own and touches nothing but the
// journal it is given.
package geotest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/geo"
)

// Run runs the suite; newJournal returns an empty journal for each subtest.
func Run(t *testing.T, newJournal func(t *testing.T) geo.Journal) {
	t.Run("CreateAndGet", func(t *testing.T) { testCreateAndGet(t, newJournal(t)) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, newJournal(t)) })
	t.Run("Renew", func(t *testing.T) { testRenew(t, newJournal(t)) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, newJournal(t)) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrent(t, newJournal(t)) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// lease is a time every store keeps exactly (whole microseconds, UTC).
var lease = time.Date(2026, 11, 27, 5, 0, 0, 123456000, time.UTC)

func record(session string, pos int64) geo.Record {
	return geo.Record{Key: geo.Key{Session: session, Position: pos}, Status: geo.Working, Next: 7,
		Owner: "east#01", LeaseUntil: lease, MessageID: "msg-ünï", Reason: ""}
}

func same(t *testing.T, what string, got, want geo.Record) {
	t.Helper()
	if !got.LeaseUntil.Equal(want.LeaseUntil) {
		t.Fatalf("%s: lease %v, want %v", what, got.LeaseUntil, want.LeaseUntil)
	}
	got.LeaseUntil, want.LeaseUntil = time.Time{}, time.Time{}
	if got != want {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testCreateAndGet(t *testing.T, j geo.Journal) {
	if _, err := j.Get(ctx(t), geo.Key{Session: "s", Position: 1}); !errors.Is(err, geo.ErrNotFound) {
		t.Fatalf("Get of a missing record: %v, want ErrNotFound", err)
	}
	want := record("s", 1)
	got, err := j.Create(ctx(t), want)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = 1
	same(t, "Create", got, want)
	read, err := j.Get(ctx(t), want.Key)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Get", read, want)
	other := record("s", 1)
	other.Owner = "west#02"
	if _, err := j.Create(ctx(t), other); !errors.Is(err, geo.ErrConflict) {
		t.Fatalf("Create of an existing key: %v, want ErrConflict", err)
	}
	if read, _ := j.Get(ctx(t), want.Key); read.Owner != "east#01" {
		t.Fatalf("a conflicting Create changed the record: %+v", read)
	}
	// Positions and sessions are distinct keys.
	if _, err := j.Create(ctx(t), record("s", 0)); err != nil {
		t.Fatalf("Create of position 0 of the same session: %v", err)
	}
	if _, err := j.Create(ctx(t), record("s2", 1)); err != nil {
		t.Fatalf("Create of another session: %v", err)
	}
}

func testReplace(t *testing.T, j geo.Journal) {
	r, err := j.Create(ctx(t), record("s", 0))
	if err != nil {
		t.Fatal(err)
	}
	next := r
	next.Status, next.Next, next.Owner, next.Reason, next.LeaseUntil = geo.Failed, 8, "west#02", "Broken", lease.Add(time.Second)
	got, err := j.Replace(ctx(t), next)
	if err != nil {
		t.Fatal(err)
	}
	want := next
	want.Version = 2
	same(t, "Replace", got, want)
	read, _ := j.Get(ctx(t), r.Key)
	same(t, "Get after Replace", read, want)
	stale := next // version 1
	stale.Owner = "late"
	if _, err := j.Replace(ctx(t), stale); !errors.Is(err, geo.ErrConflict) {
		t.Fatalf("Replace with a stale version: %v, want ErrConflict", err)
	}
	read, _ = j.Get(ctx(t), r.Key)
	same(t, "Get after a stale Replace", read, want)
	missing := record("none", 3)
	missing.Version = 1
	if _, err := j.Replace(ctx(t), missing); !errors.Is(err, geo.ErrConflict) && !errors.Is(err, geo.ErrNotFound) {
		t.Fatalf("Replace of a missing record: %v, want ErrConflict or ErrNotFound", err)
	}
}

func testRenew(t *testing.T, j geo.Journal) {
	r, err := j.Create(ctx(t), record("s", 2))
	if err != nil {
		t.Fatal(err)
	}
	r.LeaseUntil = lease.Add(time.Minute)
	if err := j.Renew(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	read, _ := j.Get(ctx(t), r.Key)
	same(t, "Get after Renew", read, r) // version unchanged
	wrongOwner := r
	wrongOwner.Owner, wrongOwner.LeaseUntil = "west#02", lease.Add(time.Hour)
	if err := j.Renew(ctx(t), wrongOwner); !errors.Is(err, geo.ErrConflict) {
		t.Fatalf("Renew by another owner: %v, want ErrConflict", err)
	}
	if _, err := j.Replace(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	if err := j.Renew(ctx(t), r); !errors.Is(err, geo.ErrConflict) {
		t.Fatalf("Renew of a replaced version: %v, want ErrConflict", err)
	}
	read, _ = j.Get(ctx(t), r.Key)
	if !read.LeaseUntil.Equal(lease.Add(time.Minute)) {
		t.Fatalf("a refused Renew moved the lease to %v", read.LeaseUntil)
	}
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification within 10s after %s", what)
	}
}

func testWatch(t *testing.T, j geo.Journal) {
	ch, stop, err := j.Watch(ctx(t), "watched")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	r, err := j.Create(ctx(t), record("watched", 1))
	if err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "Create")
	// Drain what a (re)connection may have added, then expect the next.
	for len(ch) > 0 {
		<-ch
	}
	r.Status = geo.Completed
	if _, err := j.Replace(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "Replace")
	// A second watcher of the same session is signalled too, and stopping
	// one leaves the other.
	ch2, stop2, err := j.Watch(ctx(t), "watched")
	if err != nil {
		t.Fatal(err)
	}
	stop2()
	_ = ch2
	if _, err := j.Create(ctx(t), record("watched", 2)); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "a Create after another watcher stopped")
}

func testConcurrent(t *testing.T, j geo.Journal) {
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, replaced := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := record("race", 1)
			r.Owner = string(rune('a' + i))
			if _, err := j.Create(ctx(t), r); err == nil {
				mu.Lock()
				created++
				mu.Unlock()
			} else if !errors.Is(err, geo.ErrConflict) {
				t.Errorf("Create: %v", err)
			}
		}()
	}
	wg.Wait()
	if created != 1 {
		t.Fatalf("%d concurrent Creates of one key succeeded, want 1", created)
	}
	base, err := j.Get(ctx(t), geo.Key{Session: "race", Position: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := base
			r.Owner = string(rune('A' + i))
			if _, err := j.Replace(ctx(t), r); err == nil {
				mu.Lock()
				replaced++
				mu.Unlock()
			} else if !errors.Is(err, geo.ErrConflict) {
				t.Errorf("Replace: %v", err)
			}
		}()
	}
	wg.Wait()
	if replaced != 1 {
		t.Fatalf("%d concurrent Replaces of one version succeeded, want 1", replaced)
	}
	if got, _ := j.Get(ctx(t), base.Key); got.Version != 2 {
		t.Fatalf("version %d after one Replace, want 2", got.Version)
	}
}
