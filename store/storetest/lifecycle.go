package storetest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/busbar-io/busbar/store"
)

func testConcurrentCommits(t *testing.T, h Harness) {
	s := open(t, h)
	const writers, perWriter = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			var b store.Batch
			for i := range perWriter {
				b.Reset()
				// Three keys per batch, and the buffers are reused at once.
				b.Set([]byte(key(key("w", w)+"/a", i)), []byte(key("v", i)))
				b.Set([]byte(key(key("w", w)+"/b", i)), []byte(key("v", i)))
				b.Delete([]byte(key(key("w", w)+"/a", i-1)))
				if err := s.Commit(context.Background(), &b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Commit: %v", err)
	}
	var want []kv
	for w := range writers {
		want = append(want, kv{key(key("w", w)+"/a", perWriter-1), key("v", perWriter-1)})
		for i := range perWriter {
			want = append(want, kv{key(key("w", w)+"/b", i), key("v", i)})
		}
	}
	slices.SortFunc(want, func(a, b kv) int { return bytes.Compare([]byte(a.key), []byte(b.key)) })
	wantScan(t, s, nil, nil, want)

	st := s.Stats()
	if st.Commits != writers*perWriter || st.Ops != writers*perWriter*3 {
		t.Fatalf("Stats after %d commits of 3 ops: %+v", writers*perWriter, st)
	}
	checkSyncs(t, h, st)
}

// checkSyncs checks the sync counter against what the harness declares.
func checkSyncs(t *testing.T, h Harness, st store.Stats) {
	t.Helper()
	switch {
	case h.Durable && (st.Syncs == 0 || st.Syncs > st.Commits):
		t.Fatalf("durable store: Syncs = %d for %d commits; want 1..Commits", st.Syncs, st.Commits)
	case !h.Durable && st.Syncs != 0:
		t.Fatalf("non-durable store reports %d syncs", st.Syncs)
	}
}

func testLargeValues(t *testing.T, h Harness) {
	s := open(t, h)
	big := func(seed byte) []byte {
		v := make([]byte, 4<<20)
		for i := range v {
			v[i] = seed + byte(i*7)
		}
		return v
	}
	v1, v2 := big(1), big(2)
	var b store.Batch
	b.Set([]byte("big1"), v1)
	b.Set([]byte("big2"), v2)
	b.Set([]byte("small"), []byte("s"))
	commit(t, s, &b)
	check := func(s store.Store) {
		t.Helper()
		for k, want := range map[string][]byte{"big1": v1, "big2": v2} {
			got, err := s.Get(context.Background(), []byte(k))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Get(%q): %d bytes, %v; want the 4 MiB value", k, len(got), err)
			}
		}
		n := 0
		err := s.Scan(context.Background(), []byte("big"), []byte("big\xff"), func(k, v []byte) error {
			n++
			if len(v) != 4<<20 {
				t.Errorf("Scan %q: %d bytes", k, len(v))
			}
			return nil
		})
		if err != nil || n != 2 {
			t.Fatalf("Scan of large values: %d entries, %v", n, err)
		}
	}
	check(s)
	if h.Reopen != nil {
		check(reopen(t, h, s))
	}
}

func testStats(t *testing.T, h Harness) {
	s := open(t, h)
	if st := s.Stats(); st != (store.Stats{}) {
		t.Fatalf("fresh store Stats = %+v, want zero", st)
	}
	var b store.Batch
	b.Set([]byte("k1"), []byte("12345")) // 7 bytes
	b.Delete([]byte("k2"))               // 2 bytes
	b.DeleteRange([]byte("a"), []byte("bc"))
	commit(t, s, &b) // 3 bytes
	st := s.Stats()
	if st.Commits != 1 || st.Ops != 3 || st.BytesWritten != 12 {
		t.Fatalf("Stats after one batch of 3 ops and 12 bytes: %+v", st)
	}
	checkSyncs(t, h, st)
	if h.Durable && st.Syncs != 1 {
		t.Fatalf("one lone commit took %d syncs, want 1", st.Syncs)
	}
	set(t, s, "x", "")
	st = s.Stats()
	if st.Commits != 2 || st.Ops != 4 || st.BytesWritten != 13 {
		t.Fatalf("Stats after a second batch: %+v", st)
	}
	checkSyncs(t, h, st)
}

// model is a reference implementation: a map plus sorting.
type model map[string]string

func (m model) apply(b *store.Batch) {
	for _, op := range b.Ops {
		switch op.Kind {
		case store.OpSet:
			m[string(op.Key)] = string(op.Joined())
		case store.OpDelete:
			delete(m, string(op.Key))
		case store.OpDeleteRange:
			for k := range m {
				if k >= string(op.Key) && k < string(op.End) {
					delete(m, k)
				}
			}
		}
	}
}

func (m model) scan(start, end string, hasEnd bool) []kv {
	var out []kv
	for k, v := range m {
		if k >= start && (!hasEnd || k < end) {
			out = append(out, kv{k, v})
		}
	}
	slices.SortFunc(out, func(a, b kv) int { return bytes.Compare([]byte(a.key), []byte(b.key)) })
	return out
}

func testRandomModel(t *testing.T, h Harness) {
	s := open(t, h)
	m := model{}
	rng := rand.New(rand.NewPCG(7, 11))
	randKey := func() []byte {
		// A small alphabet and short keys make overwrites, prefixes and
		// range hits frequent.
		k := make([]byte, 1+rng.IntN(3))
		for i := range k {
			k[i] = "ab\x00\xff"[rng.IntN(4)]
		}
		return k
	}
	for round := range 300 {
		var b store.Batch
		for range 1 + rng.IntN(6) {
			switch r := rng.IntN(10); {
			case r < 6:
				b.Set(randKey(), []byte(key("v", round)))
			case r < 9:
				b.Delete(randKey())
			default:
				b.DeleteRange(randKey(), randKey())
			}
		}
		commit(t, s, &b)
		m.apply(&b)
		lo, hi := randKey(), randKey()
		wantScan(t, s, lo, hi, m.scan(string(lo), string(hi), true))
		wantScan(t, s, lo, nil, m.scan(string(lo), "", false))
		k := randKey()
		if v, ok := m[string(k)]; ok {
			wantValue(t, s, string(k), v)
		} else {
			wantMissing(t, s, string(k))
		}
	}
	wantScan(t, s, nil, nil, m.scan("", "", false))
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("backend cannot reopen")
	}
	s := open(t, h)
	m := model{}
	for cycle := range 3 {
		var b store.Batch
		for i := range 200 {
			b.Set([]byte(key(key("c", cycle), i)), []byte(key("v", i)))
		}
		b.Set([]byte("empty"), nil)
		commit(t, s, &b)
		m.apply(&b)

		b = store.Batch{}
		b.DeleteRange([]byte(key(key("c", cycle), 50)), []byte(key(key("c", cycle), 150)))
		b.Delete([]byte(key(key("c", cycle), 0)))
		commit(t, s, &b)
		m.apply(&b)

		s = reopen(t, h, s)
		wantScan(t, s, nil, nil, m.scan("", "", false))
		wantMissing(t, s, key(key("c", cycle), 60))
		got, err := s.Get(context.Background(), []byte("empty"))
		if err != nil || len(got) != 0 {
			t.Fatalf("empty value after reopen: %q, %v", got, err)
		}
	}
	if st := s.Stats(); st.Commits != 0 {
		t.Fatalf("a reopened store starts with fresh Stats, got %+v", st)
	}
}

func testClosed(t *testing.T, h Harness) {
	s := open(t, h)
	set(t, s, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var b store.Batch
	b.Set([]byte("k2"), []byte("v"))
	if err := s.Commit(context.Background(), &b); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Commit after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Get(context.Background(), []byte("k")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := s.GetMany(context.Background(), [][]byte{[]byte("k")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("GetMany after Close: %v, want ErrClosed", err)
	}
	called := false
	err := s.Scan(context.Background(), nil, nil, func(_, _ []byte) error { called = true; return nil })
	if !errors.Is(err, store.ErrClosed) || called {
		t.Fatalf("Scan after Close: %v (callback called: %v), want ErrClosed", err, called)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	_ = s.Stats() // still answers
}
