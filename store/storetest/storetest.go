// Package storetest is the conformance suite every store.Store backend runs:
// the executable form of the contract written in package store. A backend's
// test calls Run with a Harness that opens and reopens it.
//
// The suite owns only test logic. It must not depend on any backend, and it
// asserts only what package store promises, so that every backend (memstore,
// pebble, later postgres) is held to the same behaviour.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/busbar-io/busbar/store"
)

// Harness tells the suite how to get stores of one backend.
type Harness struct {
	// Open returns a new, empty store. The suite closes it.
	Open func(t *testing.T) store.Store
	// Reopen returns a store over the data of s, which the suite has closed,
	// as a restarted process would open it. Nil skips the reopen tests.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Durable declares that Commit fsyncs: the suite then requires
	// Stats.Syncs to count at least one sync per group of commits and never
	// more syncs than commits. A non-durable backend must report no syncs.
	Durable bool
}

// Run runs the conformance suite against the backend h opens.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"SetGetDelete", testSetGetDelete},
		{"DeleteOnce", testDeleteOnce},
		{"SetJoined", testSetJoined},
		{"NotFound", testNotFound},
		{"EmptyValueVsMissing", testEmptyValue},
		{"GetMany", testGetMany},
		{"DeleteRange", testDeleteRange},
		{"ScanOrderAndBounds", testScanBounds},
		{"ScanManyKeys", testScanMany},
		{"ScanStopsOnError", testScanStop},
		{"ScanCallbackMayRead", testScanReentrant},
		{"ScanCallbackMayCommit", testScanCallbackCommits},
		{"BatchAppliesInOrder", testBatchOrder},
		{"InvalidBatchRejectedWhole", testInvalidBatch},
		{"EmptyBatch", testEmptyBatch},
		{"ValuesAreCopied", testValuesCopied},
		{"ConcurrentCommits", testConcurrentCommits},
		{"LargeValues", testLargeValues},
		{"Stats", testStats},
		{"RandomAgainstModel", testRandomModel},
		{"ReopenKeepsEverything", testReopen},
		{"ErrClosedAfterClose", testClosed},
		{"CancelledContextAppliesNothing", testCancelledContext},
		{"Conditions", testConditions},
		{"ConditionsUnderConcurrency", testConditionsRace},
		{"Watch", testWatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// open opens a store and makes sure it is closed when the test ends.
func open(t *testing.T, h Harness) store.Store {
	t.Helper()
	s := h.Open(t)
	t.Cleanup(func() { closeQuietly(s) })
	return s
}

// reopen closes s and returns the reopened store, closed when the test ends.
func reopen(t *testing.T, h Harness, s store.Store) store.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close before reopen: %v", err)
	}
	r := h.Reopen(t, s)
	t.Cleanup(func() { closeQuietly(r) })
	return r
}

func closeQuietly(s store.Store) {
	_ = s.Close() // ErrClosed when the test already closed it
}

// kv is one scanned entry.
type kv struct{ key, value string }

func commit(t *testing.T, s store.Store, b *store.Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func set(t *testing.T, s store.Store, pairs ...string) {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("set: odd number of arguments")
	}
	var b store.Batch
	for i := 0; i < len(pairs); i += 2 {
		b.Set([]byte(pairs[i]), []byte(pairs[i+1]))
	}
	commit(t, s, &b)
}

// wantValue fails unless key holds exactly value.
func wantValue(t *testing.T, s store.Store, key, value string) {
	t.Helper()
	got, err := s.Get(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v, want %q", key, err, value)
	}
	if string(got) != value {
		t.Fatalf("Get(%q) = %q, want %q", key, got, value)
	}
}

// wantMissing fails unless Get(key) returns ErrNotFound.
func wantMissing(t *testing.T, s store.Store, key string) {
	t.Helper()
	got, err := s.Get(context.Background(), []byte(key))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

// scan collects [start, end); a nil start or end is passed as nil.
func scan(t *testing.T, s store.Store, start, end []byte) []kv {
	t.Helper()
	var out []kv
	err := s.Scan(context.Background(), start, end, func(k, v []byte) error {
		out = append(out, kv{string(k), string(v)})
		return nil
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", start, end, err)
	}
	return out
}

// wantScan fails unless the scan of [start, end) is exactly want.
func wantScan(t *testing.T, s store.Store, start, end []byte, want []kv) {
	t.Helper()
	got := scan(t, s, start, end)
	if !equalKVs(got, want) {
		t.Fatalf("Scan(%q, %q):\n got  %s\n want %s", start, end, fmtKVs(got), fmtKVs(want))
	}
}

func equalKVs(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func fmtKVs(kvs []kv) string {
	if len(kvs) > 20 {
		return fmt.Sprintf("%d entries, first %q, last %q", len(kvs), kvs[0], kvs[len(kvs)-1])
	}
	var buf bytes.Buffer
	for _, e := range kvs {
		fmt.Fprintf(&buf, "%q=%q ", e.key, e.value)
	}
	return buf.String()
}

// key formats the i-th key of a numbered family so that keys sort by i.
func key(prefix string, i int) string { return fmt.Sprintf("%s%08d", prefix, i) }
