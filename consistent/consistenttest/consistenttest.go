// Package consistenttest is the one test suite every consistent.Store
// passes: loading, duplicate lookup, optimistic concurrency, independent
// streams and retention by count and by age; and, for a
// consistent.OutboxStore, the outbox: outputs stored atomically with their
// version, read back in order, removed once sent. A store's tests call Run with
// a factory.
//
// It owns the suite only; it starts no broker and no database (the factory
// does).
package consistenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/consistent"
)

// Harness is one store under test.
type Harness struct {
	Store consistent.Store
	// Key returns the key of the stream of business id id (for a session
	// store, with a session whose id is id).
	Key func(id string) consistent.Key
	// Serialised says the store relies on its caller to run one Append per
	// stream at a time (the session lock does, for the session store), so
	// concurrent appends to one stream are not tested.
	Serialised bool
}

// Factory returns a new, empty store that keeps versions as r says.
type Factory func(t *testing.T, r consistent.Retention) Harness

var epoch = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

func version(n int64, mid string, at time.Time) consistent.Version {
	return consistent.Version{Number: n, MessageID: mid,
		Context: []byte(fmt.Sprintf(`{"now":%q,"seed":%d}`, at.Format(time.RFC3339Nano), 1000+n)),
		State:   []byte(fmt.Sprintf(`{"n":%d,"tags":["a","b"],"nested":{"x":1.5,"s":"é\"x"}}`, n)),
		Stored:  at}
}

// Run runs the suite against stores from f; when they are
// consistent.OutboxStores, the outbox too.
func Run(t *testing.T, f Factory) {
	t.Run("Empty", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		ld := load(t, h, "a", "m1")
		if ld.Latest.Number != 0 || ld.Match != nil || ld.Base != nil {
			t.Fatalf("empty stream loaded as %+v", ld)
		}
	})
	t.Run("LoadAndDuplicates", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		v := []consistent.Version{{}, version(1, "m1", epoch), version(2, "m2", epoch.Add(time.Second)), version(3, "m3", epoch.Add(2*time.Second))}
		mustAppend(t, h, "a", v[1])
		check(t, load(t, h, "a", "new"), v[1], nil, nil)
		check(t, load(t, h, "a", "m1"), v[1], &v[1], nil)
		mustAppend(t, h, "a", v[2])
		mustAppend(t, h, "a", v[3])
		check(t, load(t, h, "a", "m2"), v[3], &v[2], &v[1])
		check(t, load(t, h, "a", "m3"), v[3], &v[3], &v[2])
		check(t, load(t, h, "a", "m1"), v[3], &v[1], nil)
		check(t, load(t, h, "a", "m4"), v[3], nil, nil)
	})
	t.Run("Conflicts", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		v1, v2 := version(1, "m1", epoch), version(2, "m2", epoch)
		mustAppend(t, h, "a", v1)
		for _, bad := range []consistent.Version{
			version(1, "other", epoch), // stale: loaded an empty stream
			version(3, "other", epoch), // a gap
			version(0, "other", epoch), // nonsense
			version(2, "m1", epoch),    // the input is already in the stream
		} {
			if err := h.Store.Append(context.Background(), h.Key("a"), bad); !errors.Is(err, consistent.ErrConflict) {
				t.Fatalf("Append(version %d, %s) = %v, want ErrConflict", bad.Number, bad.MessageID, err)
			}
		}
		check(t, load(t, h, "a", "other"), v1, nil, nil)
		mustAppend(t, h, "a", v2)
		check(t, load(t, h, "a", "m2"), v2, &v2, &v1)
	})
	t.Run("StreamsAreIndependent", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		a1, b1, b2 := version(1, "m1", epoch), version(1, "m1", epoch), version(2, "m2", epoch)
		b1.State = []byte(`{"b":1}`)
		mustAppend(t, h, "a", a1)
		mustAppend(t, h, "b", b1)
		mustAppend(t, h, "b", b2)
		check(t, load(t, h, "a", "m1"), a1, &a1, nil)
		check(t, load(t, h, "b", "m1"), b2, &b1, nil)
		check(t, load(t, h, "a", "m2"), a1, nil, nil)
	})
	t.Run("ConcurrentAppendsOneWins", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		if h.Serialised {
			t.Skip("the store relies on the session lock to serialise appends")
		}
		mustAppend(t, h, "a", version(1, "m1", epoch))
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = h.Store.Append(context.Background(), h.Key("a"), version(2, fmt.Sprintf("w%d", i), epoch))
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("writers %d and %d both appended version 2", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, consistent.ErrConflict):
				t.Fatalf("writer %d: %v, want nil or ErrConflict", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer appended version 2")
		}
		ld := load(t, h, "a", fmt.Sprintf("w%d", winner))
		if ld.Latest.Number != 2 || ld.Match == nil || ld.Match.Number != 2 {
			t.Fatalf("after the race: %+v", ld)
		}
	})
	t.Run("RetentionByCount", func(t *testing.T) {
		h := f(t, consistent.Retention{MaxVersions: 3, MaxAge: -1})
		var v [11]consistent.Version
		for n := int64(1); n <= 10; n++ {
			v[n] = version(n, fmt.Sprintf("m%d", n), epoch.Add(time.Duration(n)*24*time.Hour))
			mustAppend(t, h, "a", v[n])
		}
		// Kept: 8, 9, 10, and 7 as the replay base of 8.
		for n := 1; n <= 6; n++ {
			check(t, load(t, h, "a", fmt.Sprintf("m%d", n)), v[10], nil, nil)
		}
		check(t, load(t, h, "a", "m7"), v[10], &v[7], nil)
		check(t, load(t, h, "a", "m8"), v[10], &v[8], &v[7])
		check(t, load(t, h, "a", "m10"), v[10], &v[10], &v[9])
	})
	t.Run("RetentionByAge", func(t *testing.T) {
		h := f(t, consistent.Retention{MaxVersions: 1000, MaxAge: time.Hour})
		at := []time.Duration{0, 10 * time.Minute, 20 * time.Minute, 90 * time.Minute, 100 * time.Minute, 110 * time.Minute}
		v := make([]consistent.Version, len(at)+1)
		for i, d := range at {
			n := int64(i + 1)
			v[n] = version(n, fmt.Sprintf("m%d", n), epoch.Add(d))
			mustAppend(t, h, "a", v[n])
		}
		// At 110m the cut is 50m: versions 1-3 are older; 4 is the oldest
		// kept, 3 its replay base.
		check(t, load(t, h, "a", "m1"), v[6], nil, nil)
		check(t, load(t, h, "a", "m2"), v[6], nil, nil)
		check(t, load(t, h, "a", "m3"), v[6], &v[3], nil)
		check(t, load(t, h, "a", "m4"), v[6], &v[4], &v[3])
		// Much later, only the newest and its base stay.
		v7 := version(7, "m7", epoch.Add(10*time.Hour))
		mustAppend(t, h, "a", v7)
		check(t, load(t, h, "a", "m5"), v7, nil, nil)
		check(t, load(t, h, "a", "m6"), v7, &v[6], nil)
		check(t, load(t, h, "a", "m7"), v7, &v7, &v[6])
	})
	outboxSuite(t, f)
}

// outboxSuite runs when the store is a consistent.OutboxStore.
func outboxSuite(t *testing.T, f Factory) {
	t.Run("Outbox", func(t *testing.T) {
		h := f(t, consistent.Retention{})
		ob, ok := h.Store.(consistent.OutboxStore)
		if !ok {
			t.Skip("not an OutboxStore")
		}
		c := context.Background()
		outs := func(input string, n int) []consistent.Outgoing {
			var o []consistent.Outgoing
			for i := range n {
				o = append(o, consistent.Outgoing{Index: i, To: fmt.Sprintf("dest%d", i), Message: []byte(fmt.Sprintf(`{"i":%d,"in":%q}`, i, input))})
			}
			return o
		}
		stored, err := ob.AppendWithOutbox(c, h.Key("a"), version(1, "m1", epoch), outs("m1", 3))
		if err != nil || len(stored) != 3 {
			t.Fatalf("AppendWithOutbox: %d, %v", len(stored), err)
		}
		// A conflicting append stores neither the version nor its outputs.
		if _, err := ob.AppendWithOutbox(c, h.Key("a"), version(1, "m2", epoch), outs("m2", 2)); !errors.Is(err, consistent.ErrConflict) {
			t.Fatalf("stale AppendWithOutbox: %v, want ErrConflict", err)
		}
		if p, err := ob.Pending(c, h.Key("a"), "m2"); err != nil || len(p) != 0 {
			t.Fatalf("outputs of a conflicting append: %+v, %v", p, err)
		}
		if _, err := ob.AppendWithOutbox(c, h.Key("b"), version(1, "m1", epoch.Add(time.Hour)), outs("m1", 1)); err != nil {
			t.Fatal(err)
		}
		p, err := ob.Pending(c, h.Key("a"), "m1")
		if err != nil || len(p) != 3 {
			t.Fatalf("Pending: %+v, %v", p, err)
		}
		for i, o := range p {
			if o.Seq != stored[i].Seq || o.BusinessID != "a" || o.InputID != "m1" || o.Index != i || o.To != fmt.Sprintf("dest%d", i) ||
				string(o.Message) != fmt.Sprintf(`{"i":%d,"in":"m1"}`, i) || !o.Stored.Equal(epoch) {
				t.Fatalf("Pending[%d] = %+v (stored as %+v)", i, o, stored[i])
			}
		}
		if before, err := ob.PendingBefore(c, epoch.Add(time.Minute), 10); err != nil || len(before) != 3 || before[0].InputID != "m1" || before[0].BusinessID != "a" {
			t.Fatalf("PendingBefore: %+v, %v", before, err)
		}
		if all, err := ob.PendingBefore(c, epoch.Add(2*time.Hour), 2); err != nil || len(all) != 2 {
			t.Fatalf("PendingBefore with a limit of 2: %+v, %v", all, err)
		}
		if err := ob.Sent(c, h.Key("a"), []int64{p[0].Seq, p[2].Seq}); err != nil {
			t.Fatal(err)
		}
		if p, err := ob.Pending(c, h.Key("a"), "m1"); err != nil || len(p) != 1 || p[0].Index != 1 {
			t.Fatalf("Pending after Sent: %+v, %v", p, err)
		}
		if all, err := ob.PendingBefore(c, epoch.Add(2*time.Hour), 10); err != nil || len(all) != 2 {
			t.Fatalf("PendingBefore after Sent: %+v, %v", all, err)
		}
	})
}

func load(t *testing.T, h Harness, id, mid string) consistent.Loaded {
	t.Helper()
	ld, err := h.Store.Load(context.Background(), h.Key(id), mid)
	if err != nil {
		t.Fatalf("Load(%s, %s): %v", id, mid, err)
	}
	return ld
}

func mustAppend(t *testing.T, h Harness, id string, v consistent.Version) {
	t.Helper()
	if err := h.Store.Append(context.Background(), h.Key(id), v); err != nil {
		t.Fatalf("Append(%s, version %d): %v", id, v.Number, err)
	}
}

func check(t *testing.T, ld consistent.Loaded, latest consistent.Version, match, base *consistent.Version) {
	t.Helper()
	same(t, "Latest", &ld.Latest, &latest)
	same(t, "Match", ld.Match, match)
	same(t, "Base", ld.Base, base)
}

// same compares versions, their JSON semantically (a store may reformat
// it) and their times to the microsecond.
func same(t *testing.T, what string, got, want *consistent.Version) {
	t.Helper()
	if got == nil || want == nil {
		if got != want {
			t.Fatalf("%s = %+v, want %+v", what, got, want)
		}
		return
	}
	if got.Number != want.Number || got.MessageID != want.MessageID || !got.Stored.Equal(want.Stored) ||
		!sameJSON(got.Context, want.Context) || !sameJSON(got.State, want.State) {
		t.Fatalf("%s = {%d %s %s %s %v}, want {%d %s %s %s %v}", what,
			got.Number, got.MessageID, got.Context, got.State, got.Stored,
			want.Number, want.MessageID, want.Context, want.State, want.Stored)
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
