package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/busbar-io/busbar/store"
)

func testSetGetDelete(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "a", "1", "b", "2")
	wantValue(t, s, "a", "1")
	wantValue(t, s, "b", "2")

	set(t, s, "a", "overwritten")
	wantValue(t, s, "a", "overwritten")

	var b store.Batch
	b.Delete([]byte("a"))
	commit(t, s, &b)
	wantMissing(t, s, "a")
	wantValue(t, s, "b", "2")

	// Deleting a missing key is not an error.
	b = store.Batch{}
	b.Delete([]byte("never-set"))
	commit(t, s, &b)
	wantScan(t, s, nil, nil, []kv{{"b", "2"}})
}

// testDeleteOnce: a key set once and deleted with DeleteOnce is gone, also
// after a reopen, in the same batch as other keys' writes and in a batch
// of its own; a key set, deleted and set again may be deleted once again.
func testDeleteOnce(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "m1", "index", "b1", "body", "m2", "index2")
	var b store.Batch
	b.DeleteOnce([]byte("m1"))
	b.DeleteOnce([]byte("b1"))
	b.Set([]byte("m3"), []byte("index3"))
	commit(t, s, &b)
	wantMissing(t, s, "m1")
	wantMissing(t, s, "b1")
	wantScan(t, s, nil, nil, []kv{{"m2", "index2"}, {"m3", "index3"}})

	b = store.Batch{}
	b.Delete([]byte("m2"))
	commit(t, s, &b)
	set(t, s, "m2", "again")
	b = store.Batch{}
	b.DeleteOnce([]byte("m2"))
	b.DeleteOnce([]byte("m3"))
	commit(t, s, &b)
	wantScan(t, s, nil, nil, nil)
}

// testSetJoined: a key set with a head holds the head then the value, read
// back by Get and Scan, after a reopen, and as the value a condition sees,
// also within one batch; the caller's slices are copied.
func testSetJoined(t *testing.T, h Harness) {
	s := open(t, h)
	head, value := []byte("head:"), []byte("shared")
	var b store.Batch
	b.SetJoined([]byte("a"), head, value)
	b.SetJoined([]byte("b"), nil, value)
	b.SetJoined([]byte("c"), head, nil)
	b.Require([]byte("d"), nil)
	commit(t, s, &b)
	copy(head, "XXXXX")
	copy(value, "YYYYYY")
	want := []kv{{"a", "head:shared"}, {"b", "shared"}, {"c", "head:"}}
	wantScan(t, s, nil, nil, want)
	s = reopen(t, h, s)
	wantValue(t, s, "a", "head:shared")
	wantScan(t, s, nil, nil, want)

	// A condition compares the joined value, stored or earlier in a group.
	b = store.Batch{}
	b.Require([]byte("a"), []byte("head:shared"))
	b.SetJoined([]byte("e"), []byte("1"), []byte("2"))
	commit(t, s, &b)
	b = store.Batch{}
	b.Require([]byte("a"), []byte("shared"))
	b.Set([]byte("f"), []byte("never"))
	if err := s.Commit(context.Background(), &b); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("condition on the value without its head: %v, want ErrConditionFailed", err)
	}
	wantValue(t, s, "e", "12")
	wantMissing(t, s, "f")
}

func testNotFound(t *testing.T, h Harness) {
	s := open(t, h)
	wantMissing(t, s, "x")
	wantMissing(t, s, "")
	set(t, s, "x1", "v")
	// Neighbours and prefixes of a stored key are not found.
	wantMissing(t, s, "x")
	wantMissing(t, s, "x10")
	wantMissing(t, s, "x0")
	got, err := s.Get(context.Background(), []byte("x"))
	if got != nil {
		t.Fatalf("Get of missing key returned value %q with %v", got, err)
	}
}

func testEmptyValue(t *testing.T, h Harness) {
	s := open(t, h)
	var b store.Batch
	b.Set([]byte("empty"), []byte{})
	b.Set([]byte("nil"), nil)
	b.Set([]byte(""), []byte("empty key"))
	commit(t, s, &b)

	for _, k := range []string{"empty", "nil"} {
		got, err := s.Get(context.Background(), []byte(k))
		if err != nil {
			t.Fatalf("Get(%q) of an empty value: %v, want no error", k, err)
		}
		if len(got) != 0 {
			t.Fatalf("Get(%q) = %q, want empty", k, got)
		}
	}
	wantValue(t, s, "", "empty key")
	wantMissing(t, s, "missing")
	wantScan(t, s, nil, nil, []kv{{"", "empty key"}, {"empty", ""}, {"nil", ""}})
}

func testDeleteRange(t *testing.T, h Harness) {
	s := open(t, h)
	for _, k := range []string{"a", "b", "c", "c\x00", "cc", "d", "e", "f", "g"} {
		set(t, s, k, "v"+k)
	}
	var b store.Batch
	b.DeleteRange([]byte("c"), []byte("f")) // removes c, c\x00, cc, d, e
	commit(t, s, &b)
	wantScan(t, s, nil, nil, []kv{{"a", "va"}, {"b", "vb"}, {"f", "vf"}, {"g", "vg"}})

	// Empty and inverted ranges delete nothing.
	b = store.Batch{}
	b.DeleteRange([]byte("b"), []byte("b"))
	b.DeleteRange([]byte("g"), []byte("a"))
	commit(t, s, &b)
	wantScan(t, s, nil, nil, []kv{{"a", "va"}, {"b", "vb"}, {"f", "vf"}, {"g", "vg"}})

	// Order inside one batch: a set before the range is deleted by it,
	// a set after the range survives.
	b = store.Batch{}
	b.Set([]byte("p1"), []byte("gone"))
	b.DeleteRange([]byte("p"), []byte("q"))
	b.Set([]byte("p2"), []byte("kept"))
	commit(t, s, &b)
	wantMissing(t, s, "p1")
	wantValue(t, s, "p2", "kept")

	// A range from the empty key covers everything below its end.
	b = store.Batch{}
	b.DeleteRange([]byte{}, []byte("g"))
	commit(t, s, &b)
	wantScan(t, s, nil, nil, []kv{{"g", "vg"}, {"p2", "kept"}})

	// Keys set again after a range delete are visible.
	set(t, s, "c", "again")
	wantValue(t, s, "c", "again")
}

func testScanBounds(t *testing.T, h Harness) {
	s := open(t, h)
	// Inserted out of order; includes bytes 0x00 and 0xff and prefixes.
	keys := []string{"b", "a\xff", "a", "\xff\xff", "ab", "a\x00", "\x00", "ba", "c"}
	var b store.Batch
	for _, k := range keys {
		b.Set([]byte(k), []byte("v"+k))
	}
	commit(t, s, &b)
	all := []kv{
		{"\x00", "v\x00"}, {"a", "va"}, {"a\x00", "va\x00"}, {"ab", "vab"},
		{"a\xff", "va\xff"}, {"b", "vb"}, {"ba", "vba"}, {"c", "vc"}, {"\xff\xff", "v\xff\xff"},
	}
	wantScan(t, s, nil, nil, all)
	wantScan(t, s, []byte{}, nil, all)
	// Start inclusive, end exclusive.
	wantScan(t, s, []byte("a"), []byte("b"), all[1:5])
	wantScan(t, s, []byte("a\x00"), []byte("a\xff"), all[2:4])
	// Bounds that fall between keys.
	wantScan(t, s, []byte("a\x01"), []byte("b\x00"), all[3:6])
	// Nil start: from the first key; nil end: to the last.
	wantScan(t, s, nil, []byte("a\x00"), all[:2])
	wantScan(t, s, []byte("ba"), nil, all[6:])
	// Empty and inverted ranges, and ranges past either end.
	wantScan(t, s, []byte("b"), []byte("b"), nil)
	wantScan(t, s, []byte("c"), []byte("a"), nil)
	wantScan(t, s, []byte("\xff\xff\x00"), nil, nil)
	wantScan(t, s, nil, []byte("\x00"), nil)
}

func testScanMany(t *testing.T, h Harness) {
	s := open(t, h)
	const n = 1000
	var b store.Batch
	for i := n - 1; i >= 0; i-- {
		b.Set([]byte(key("k", i)), []byte(key("v", i)))
	}
	commit(t, s, &b)
	set(t, s, "j", "before", "l", "after")

	want := func(lo, hi int) []kv {
		var out []kv
		for i := lo; i < hi; i++ {
			out = append(out, kv{key("k", i), key("v", i)})
		}
		return out
	}
	wantScan(t, s, []byte("k"), []byte("l"), want(0, n))
	wantScan(t, s, []byte(key("k", 127)), []byte(key("k", 900)), want(127, 900))
	wantScan(t, s, []byte(key("k", 999)), []byte("l"), want(999, n))
	got := scan(t, s, nil, nil)
	if len(got) != n+2 || got[0] != (kv{"j", "before"}) || got[n+1] != (kv{"l", "after"}) {
		t.Fatalf("full scan: %s", fmtKVs(got))
	}
}

func testScanStop(t *testing.T, h Harness) {
	s := open(t, h)
	for i := range 10 {
		set(t, s, key("k", i), "v")
	}
	stop := errors.New("stop here")
	var seen []string
	err := s.Scan(context.Background(), nil, nil, func(k, _ []byte) error {
		seen = append(seen, string(k))
		if len(seen) == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Scan returned %v, want the callback's error", err)
	}
	if len(seen) != 3 || seen[2] != key("k", 2) {
		t.Fatalf("callback saw %q, want the first 3 keys and no more", seen)
	}
}

func testScanReentrant(t *testing.T, h Harness) {
	s := open(t, h)
	for i := range 300 {
		set(t, s, key("k", i), key("v", i))
	}
	n := 0
	err := s.Scan(context.Background(), nil, nil, func(k, v []byte) error {
		got, err := s.Get(context.Background(), k)
		if err != nil {
			return err
		}
		if string(got) != string(v) {
			t.Errorf("Get(%q) inside Scan = %q, scan saw %q", k, got, v)
		}
		n++
		return nil
	})
	if err != nil || n != 300 {
		t.Fatalf("Scan with Get inside: %d keys, %v; want 300, nil", n, err)
	}
}

func testScanCallbackCommits(t *testing.T, h Harness) {
	s := open(t, h)
	for i := range 300 {
		set(t, s, key("k", i), "v")
	}
	// Recovery code may fix records as it scans them: commits from inside
	// the callback must neither deadlock nor disturb the scan.
	n := 0
	err := s.Scan(context.Background(), []byte("k"), []byte("l"), func(k, _ []byte) error {
		n++
		var b store.Batch
		b.Set(append([]byte("fixed/"), k...), []byte("done"))
		return s.Commit(context.Background(), &b)
	})
	if err != nil || n != 300 {
		t.Fatalf("Scan committing inside: %d keys, %v; want 300, nil", n, err)
	}
	if got := scan(t, s, []byte("fixed/"), []byte("fixed0")); len(got) != 300 {
		t.Fatalf("%d commits from inside the scan are visible, want 300", len(got))
	}
}

func testBatchOrder(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "k3", "old")
	var b store.Batch
	b.Set([]byte("k1"), []byte("1"))
	b.Delete([]byte("k1")) // set then delete: gone
	b.Set([]byte("k2"), []byte("a"))
	b.Set([]byte("k2"), []byte("b")) // last set wins
	b.Delete([]byte("k3"))
	b.Set([]byte("k3"), []byte("new")) // delete then set: present
	if b.Len() != 6 {
		t.Fatalf("Batch.Len = %d, want 6", b.Len())
	}
	commit(t, s, &b)
	wantMissing(t, s, "k1")
	wantValue(t, s, "k2", "b")
	wantValue(t, s, "k3", "new")
	wantScan(t, s, nil, nil, []kv{{"k2", "b"}, {"k3", "new"}})
}

func testInvalidBatch(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "keep", "1")

	var b store.Batch
	b.Set([]byte("a"), []byte("1"))
	b.Delete([]byte("keep"))
	b.Ops = append(b.Ops, store.Op{Kind: 0, Key: []byte("x")})
	if err := s.Commit(context.Background(), &b); !errors.Is(err, store.ErrInvalidBatch) {
		t.Fatalf("Commit of an unknown op kind: %v, want ErrInvalidBatch", err)
	}

	b = store.Batch{}
	b.Set([]byte("a"), []byte("1"))
	b.DeleteRange([]byte("k"), nil)
	if err := s.Commit(context.Background(), &b); !errors.Is(err, store.ErrInvalidBatch) {
		t.Fatalf("Commit of a delete-range without end: %v, want ErrInvalidBatch", err)
	}
	// Nothing of either batch was applied.
	wantScan(t, s, nil, nil, []kv{{"keep", "1"}})
}

func testEmptyBatch(t *testing.T, h Harness) {
	s := open(t, h)
	before := s.Stats()
	if err := s.Commit(context.Background(), &store.Batch{}); err != nil {
		t.Fatalf("Commit of an empty batch: %v", err)
	}
	if err := s.Commit(context.Background(), nil); err != nil {
		t.Fatalf("Commit(nil): %v", err)
	}
	if got := s.Stats(); got != before {
		t.Fatalf("empty commits changed Stats from %+v to %+v", before, got)
	}
	wantScan(t, s, nil, nil, nil)
}

func testValuesCopied(t *testing.T, h Harness) {
	s := open(t, h)
	k := []byte("key")
	v := []byte("value")
	var b store.Batch
	b.Set(k, v)
	commit(t, s, &b)
	// The caller reuses its buffers once Commit has returned.
	copy(k, "XXX")
	copy(v, "YYYYY")
	wantValue(t, s, "key", "value")
	wantMissing(t, s, "XXX")

	got, err := s.Get(context.Background(), []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	copy(got, "ZZZZZ")
	wantValue(t, s, "key", "value")

	// Batches are reused after Reset.
	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("Len after Reset = %d", b.Len())
	}
	b.Set([]byte("second"), []byte("2"))
	commit(t, s, &b)
	wantScan(t, s, nil, nil, []kv{{"key", "value"}, {"second", "2"}})
}

func testGetMany(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := context.Background()
	var b store.Batch
	for i := 0; i < 50; i++ {
		b.Set([]byte(key("m", i)), []byte(fmt.Sprintf("v%d", i)))
	}
	b.Set([]byte("empty"), []byte{})
	b.Set([]byte(""), []byte("empty key"))
	commit(t, s, &b)

	// Any order, repeats, missing keys (neighbours of stored ones among
	// them), the empty key and an empty value.
	keys := []string{key("m", 42), "missing", key("m", 3), "", key("m", 42), "empty", key("m", 49) + "0", key("m", 0), "m", "zzz"}
	want := []string{"v42", "", "v3", "empty key", "v42", "", "", "v0", "", ""}
	present := []bool{true, false, true, true, true, true, false, true, false, false}
	kb := make([][]byte, len(keys))
	for i, k := range keys {
		kb[i] = []byte(k)
	}
	got, err := s.GetMany(ctx, kb)
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	if len(got) != len(keys) {
		t.Fatalf("GetMany returned %d values for %d keys", len(got), len(keys))
	}
	for i := range keys {
		if (got[i] != nil) != present[i] || string(got[i]) != want[i] {
			t.Errorf("GetMany: key %q = %q (nil: %v), want %q (nil: %v)", keys[i], got[i], got[i] == nil, want[i], !present[i])
		}
	}
	// Each value is the caller's own, a repeated key's too.
	got[0][0] = 'X'
	if string(got[4]) != "v42" {
		t.Fatalf("changing one returned value changed another: %q", got[4])
	}
	wantValue(t, s, key("m", 42), "v42")

	if got, err := s.GetMany(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("GetMany of no keys = %q, %v; want nothing, no error", got, err)
	}
	// Many keys, as a consumer catching up on a backlog reads them.
	kb = kb[:0]
	for i := 49; i >= 0; i-- {
		kb = append(kb, []byte(key("m", i)))
	}
	got, err = s.GetMany(ctx, kb)
	if err != nil {
		t.Fatalf("GetMany of 50 keys: %v", err)
	}
	for i, v := range got {
		if w := fmt.Sprintf("v%d", 49-i); string(v) != w {
			t.Fatalf("GetMany of 50 keys: value %d = %q, want %q", i, v, w)
		}
	}
}
