package pebble

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
)

// gateFS holds WAL syncs while armed, so a test can pile commits up behind a
// sync in progress.
type gateFS struct {
	vfs.FS
	armed   atomic.Bool
	entered chan struct{} // a sync is held
	release chan struct{} // let it go
}

func newGateFS() *gateFS {
	return &gateFS{FS: vfs.Default, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f *gateFile) hold() {
	if f.g.armed.CompareAndSwap(true, false) {
		f.g.entered <- struct{}{}
		<-f.g.release
	}
}

func (f *gateFile) Sync() error     { f.hold(); return f.File.Sync() }
func (f *gateFile) SyncData() error { f.hold(); return f.File.SyncData() }

func (s *Store) pendingLen() int {
	s.committer.mu.Lock()
	defer s.committer.mu.Unlock()
	return len(s.committer.pending)
}

// commitHook records OnCommit calls.
type commitHook struct {
	mu  sync.Mutex
	ops []int
}

func (h *commitHook) onCommit(ops int, d time.Duration) {
	if d <= 0 {
		panic("OnCommit with a non-positive latency")
	}
	h.mu.Lock()
	h.ops = append(h.ops, ops)
	h.mu.Unlock()
}

func (h *commitHook) calls() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

func commitOne(s store.Store, key string) error {
	var b store.Batch
	b.Set([]byte(key), []byte("v"))
	return s.Commit(context.Background(), &b)
}

// groupScenario commits one batch whose sync is held, queues `callers` more
// behind it, each committing `rounds` batches in sequence, then releases the
// sync. It returns the OnCommit calls and the store's Stats.
func groupScenario(t *testing.T, linger time.Duration, callers, rounds int) ([]int, store.Stats) {
	gate := newGateFS()
	hook := &commitHook{}
	s, err := Open(t.TempDir(), Options{fs: gate, Linger: linger, OnCommit: hook.onCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	gate.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := commitOne(s, "first"); err != nil {
			t.Error(err)
		}
	})
	<-gate.entered // the first group's fsync is in progress
	for c := range callers {
		wg.Go(func() {
			for r := range rounds {
				if err := commitOne(s, key("c", c*100+r)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	poll.Until(t, 30*time.Second, "callers queued behind the sync", func() bool { return s.pendingLen() == callers })
	close(gate.release)
	wg.Wait()
	return hook.calls(), s.Stats()
}

func key(prefix string, i int) string { return fmt.Sprintf("%s/%06d", prefix, i) }

func TestGroupCommitMergesWaitingBatches(t *testing.T) {
	calls, st := groupScenario(t, 0, 10, 1)
	// One group for the first batch, one group and one fsync for the ten
	// that waited behind it.
	if !slices.Equal(calls, []int{1, 10}) {
		t.Fatalf("OnCommit calls (ops per group) = %v, want [1 10]", calls)
	}
	if st.Commits != 11 || st.Ops != 11 || st.Syncs != 2 {
		t.Fatalf("Stats = %+v, want 11 commits and ops in 2 syncs", st)
	}
}

// TestOnSyncTimesEachWALSync holds one WAL fsync for a while and checks
// that OnSync is called once per fsync (Stats.Syncs) and that the held one
// reports at least the time it was held.
func TestOnSyncTimesEachWALSync(t *testing.T) {
	gate := newGateFS()
	var mu sync.Mutex
	var durations []time.Duration
	s, err := Open(t.TempDir(), Options{fs: gate, OnSync: func(d time.Duration) {
		mu.Lock()
		durations = append(durations, d)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := s.Stats().Syncs // Open may sync the WAL too
	mu.Lock()
	opened := len(durations)
	mu.Unlock()
	if uint64(opened) != before {
		t.Fatalf("OnSync called %d times for the %d syncs of Open", opened, before)
	}

	gate.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- commitOne(s, "held") }()
	<-gate.entered
	heldFrom := time.Now()
	const hold = 5 * time.Millisecond // the fsync's duration is what is measured here
	poll.Until(t, 30*time.Second, "the fsync held for 5 ms", func() bool { return time.Since(heldFrom) >= hold })
	select {
	case err := <-done:
		t.Fatalf("commit returned (%v) while its fsync was held", err)
	default:
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := commitOne(s, "free"); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	got := slices.Clone(durations[opened:])
	mu.Unlock()
	if want := s.Stats().Syncs - before; uint64(len(got)) != want {
		t.Fatalf("OnSync called %d times for %d WAL syncs", len(got), want)
	}
	if len(got) < 2 {
		t.Fatalf("OnSync called %d times for two commits", len(got))
	}
	if got[0] < hold {
		t.Errorf("the held fsync reported %v, less than the %v it was held", got[0], hold)
	}
	for i, d := range got {
		if d <= 0 {
			t.Errorf("fsync %d reported %v", i, d)
		}
	}
}

func TestLingerWaitsForReturningCallers(t *testing.T) {
	// With a linger far beyond the test's run time, the committer must
	// gather the second round of all ten callers as one group, and must
	// not wait at all for the lone first batch or at Close.
	calls, st := groupScenario(t, time.Hour, 10, 2)
	if !slices.Equal(calls, []int{1, 10, 10}) {
		t.Fatalf("OnCommit calls (ops per group) = %v, want [1 10 10]", calls)
	}
	if st.Commits != 21 || st.Syncs != 3 {
		t.Fatalf("Stats = %+v, want 21 commits in 3 syncs", st)
	}
}

func TestLingerDoesNotCountReturnedCallersTwice(t *testing.T) {
	// Ten callers commit twice each. After the group of their first round
	// is released, every caller is back before the committer looks at the
	// pending queue (as on a busy machine): it must expect ten, not the
	// ten released plus the ten pending, and must not wait out its Linger
	// for callers that do not exist.
	gate := newGateFS()
	hook := &commitHook{}
	const callers = 10
	var s *Store
	var releases atomic.Int32
	s, err := Open(t.TempDir(), Options{fs: gate, Linger: 200 * time.Millisecond, OnCommit: hook.onCommit,
		afterRelease: func() {
			if releases.Add(1) == 2 { // the first round's group
				poll.Until(t, 30*time.Second, "the released callers back", func() bool { return s.pendingLen() == callers })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gate.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { _ = commitOne(s, "first") })
	<-gate.entered
	for c := range callers {
		wg.Go(func() {
			for r := range 2 {
				if err := commitOne(s, key("c", c*100+r)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	poll.Until(t, 30*time.Second, "callers queued behind the sync", func() bool { return s.pendingLen() == callers })
	close(gate.release)
	wg.Wait()
	if calls := hook.calls(); !slices.Equal(calls, []int{1, callers, callers}) {
		t.Fatalf("OnCommit calls (ops per group) = %v, want [1 10 10]", calls)
	}
	if n := s.committer.lingered.Load(); n != 0 {
		t.Fatalf("%d lingers ran to their end waiting for callers that were already queued", n)
	}
}

func TestLingerJoinsAlternatingCallers(t *testing.T) {
	// Two closed-loop callers, one behind the other's fsync: the committer
	// expects the one released back and commits it with the one that
	// waited, in one fsync, instead of alternating one batch per fsync.
	gate := newGateFS()
	hook := &commitHook{}
	s, err := Open(t.TempDir(), Options{fs: gate, Linger: time.Hour, OnCommit: hook.onCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gate.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, k := range []string{"a0", "a1"} {
			if err := commitOne(s, k); err != nil {
				t.Error(err)
			}
		}
	})
	<-gate.entered // a0's fsync is in progress
	wg.Go(func() {
		if err := commitOne(s, "b0"); err != nil {
			t.Error(err)
		}
	})
	poll.Until(t, 30*time.Second, "b0 queued behind the sync", func() bool { return s.pendingLen() == 1 })
	close(gate.release)
	wg.Wait()
	if calls := hook.calls(); !slices.Equal(calls, []int{1, 2}) {
		t.Fatalf("OnCommit calls (ops per group) = %v, want [1 2]", calls)
	}
}

func TestCloseEndsLinger(t *testing.T) {
	gate := newGateFS()
	s, err := Open(t.TempDir(), Options{fs: gate, Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A group of two, formed behind a held sync ...
	gate.armed.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() { _ = commitOne(s, "first") })
	<-gate.entered
	for i := range 2 {
		wg.Go(func() { _ = commitOne(s, key("k", i)) })
	}
	poll.Until(t, 30*time.Second, "two queued callers", func() bool { return s.pendingLen() == 2 })
	close(gate.release)
	wg.Wait()
	// ... so the committer lingers for two, but only one caller comes.
	done := make(chan error, 1)
	go func() { done <- commitOne(s, "alone") }()
	poll.Until(t, 30*time.Second, "the lone commit to be queued", func() bool { return s.pendingLen() == 1 })
	// Close must cut the linger short and let the commit finish.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("commit in flight during Close: %v", err)
	}
	if st := s.Stats(); st.Commits != 4 {
		t.Fatalf("Stats = %+v, want 4 commits", st)
	}
}

func TestCloseWhileCommitting(t *testing.T) {
	s := openT(t, Options{})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := commitOne(s, key(key("w", w), i))
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("commit racing Close: %v", err)
					return
				}
				ok.Add(1)
			}
		})
	}
	poll.Until(t, 30*time.Second, "some commits", func() bool { return ok.Load() >= 50 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Every commit that returned nil is in the store.
	r, err := Open(s.Dir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	if err := r.Scan(context.Background(), nil, nil, func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if int64(n) != ok.Load() {
		t.Fatalf("%d keys after reopen, %d commits acknowledged", n, ok.Load())
	}
}

func TestCheckpoint(t *testing.T) {
	s := openT(t, Options{})
	defer s.Close()
	if err := commitOne(s, "before"); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "backup")
	if err := s.Checkpoint(dest); err != nil {
		t.Fatal(err)
	}
	if err := commitOne(s, "after"); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(dest); err == nil || !strings.Contains(err.Error(), "store/pebble: checkpoint") {
		t.Fatalf("checkpoint into an existing directory: %v, want a wrapped error", err)
	}
	b, err := Open(dest, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Get(context.Background(), []byte("before")); err != nil {
		t.Fatalf("checkpoint lacks data committed before it: %v", err)
	}
	if _, err := b.Get(context.Background(), []byte("after")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("checkpoint has data committed after it: %v", err)
	}
}

func TestDeleteRangeReclaimsSpace(t *testing.T) {
	s := openT(t, Options{MemTableSize: 1 << 20})
	defer s.Close()
	value := make([]byte, 1024)
	for batch := range 32 {
		var b store.Batch
		for i := range 1024 {
			v := make([]byte, len(value))
			_, _ = rand.Read(v) // incompressible
			b.Set([]byte(key(key("m", batch), i)), v)
		}
		if err := s.Commit(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	full := s.db.Metrics().DiskSpaceUsage()
	if full < 32<<20 {
		t.Fatalf("disk usage %d bytes after writing 32 MiB", full)
	}
	var b store.Batch
	b.DeleteRange([]byte("m/"), []byte("m0"))
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "space to be reclaimed", func() bool { return s.db.Metrics().DiskSpaceUsage() < full/4 })
}

func TestOpenErrorIsWrapped(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "store/pebble: open "+file) {
		t.Fatalf("Open on a file: %v, want an error naming the store and path", err)
	}
}

// captureHandler records log records.
type captureHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var comp string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "engine" {
			comp = a.Value.String()
		}
		return true
	})
	h.msgs = append(h.msgs, comp+": "+r.Level.String()+" "+r.Message)
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func TestPebbleLogsGoToSlog(t *testing.T) {
	h := &captureHandler{}
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	if err := commitOne(s, "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening replays the WAL, which Pebble reports.
	s, err = Open(dir, Options{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var replay bool
	for _, m := range h.msgs {
		if !strings.HasPrefix(m, "pebble: ") {
			t.Errorf("log record without engine=pebble: %q", m)
		}
		if strings.Contains(m, "DEBUG") && strings.Contains(m, "WAL") {
			replay = true
		}
	}
	if !replay {
		t.Fatalf("no Pebble WAL log line at Debug; got %q", h.msgs)
	}
}

// TestGroupKeepsEachKeysOrder: the committer sorts a group's operations by
// key before it applies them; operations on one key, and range deletions
// with the keys they cover, must keep the order the callers committed them
// in. Each case queues its batches, one at a time and in order, behind a
// held sync, so that they form one group.
func TestGroupKeepsEachKeysOrder(t *testing.T) {
	type step = func(b *store.Batch)
	set := func(k, v string) step { return func(b *store.Batch) { b.Set([]byte(k), []byte(v)) } }
	del := func(k string) step { return func(b *store.Batch) { b.Delete([]byte(k)) } }
	delRange := func(from, to string) step { return func(b *store.Batch) { b.DeleteRange([]byte(from), []byte(to)) } }
	for _, c := range []struct {
		name    string
		batches [][]step
		want    map[string]string // key → value; "" absent
	}{
		{"one key across callers", [][]step{
			{set("x", "1"), set("b", "b1")},
			{del("x"), set("a", "a1")},
			{set("x", "3"), del("a")},
			{set("c", "c1"), set("b", "b2")},
		}, map[string]string{"x": "3", "a": "", "b": "b2", "c": "c1"}},
		{"one key within a batch", [][]step{
			{set("k", "1"), set("j", "j"), del("k"), set("k", "2"), set("i", "i")},
			{set("h", "h"), del("j")},
		}, map[string]string{"k": "2", "j": "", "i": "i", "h": "h"}},
		{"many operations on one key", [][]step{manyOnOneKey(set)}, map[string]string{"k": "v39", "j00": "j", "j39": "j"}},
		{"range deletion in the group", [][]step{
			{set("m", "before")},
			{delRange("a", "z")},
			{set("n", "after"), set("a", "after")},
		}, map[string]string{"m": "", "n": "after", "a": "after"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gate := newGateFS()
			s, err := Open(t.TempDir(), Options{fs: gate, Linger: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			gate.armed.Store(true)
			var wg sync.WaitGroup
			wg.Go(func() { _ = commitOne(s, "zz-first") })
			<-gate.entered
			for i, steps := range c.batches {
				var b store.Batch
				for _, st := range steps {
					st(&b)
				}
				wg.Go(func() {
					if err := s.Commit(context.Background(), &b); err != nil {
						t.Error(err)
					}
				})
				poll.Until(t, 30*time.Second, "batch queued", func() bool { return s.pendingLen() == i+1 })
			}
			close(gate.release)
			wg.Wait()
			if st := s.Stats(); st.Syncs != 2 {
				t.Fatalf("%d syncs, want 2: the batches did not form one group", st.Syncs)
			}
			for k, want := range c.want {
				v, err := s.Get(context.Background(), []byte(k))
				switch {
				case want == "" && err == nil:
					t.Errorf("%s = %q, want it absent", k, v)
				case want != "" && (err != nil || string(v) != want):
					t.Errorf("%s = %q (%v), want %q", k, v, err, want)
				}
			}
		})
	}
}

// manyOnOneKey sets k 40 times among 40 other keys: enough for a sort that is
// not stable to reorder them.
func manyOnOneKey(set func(k, v string) func(*store.Batch)) []func(*store.Batch) {
	var steps []func(*store.Batch)
	for i := range 40 {
		steps = append(steps, set(fmt.Sprintf("j%02d", 39-i), "j"), set("k", fmt.Sprintf("v%02d", i)))
	}
	return steps
}

func TestSortOpsKeepsEachKeysOrder(t *testing.T) {
	rnd := mrand.New(mrand.NewPCG(1, 2))
	for range 50 {
		var b store.Batch
		for i := range 200 {
			b.Set([]byte{byte('a' + rnd.IntN(5))}, []byte(strconv.Itoa(i)))
		}
		want := map[string][]string{}
		ops := make([]*store.Op, len(b.Ops))
		for i := range b.Ops {
			ops[i] = &b.Ops[i]
			want[string(b.Ops[i].Key)] = append(want[string(b.Ops[i].Key)], string(b.Ops[i].Value))
		}
		sortOps(ops, nil)
		got := map[string][]string{}
		for i, op := range ops {
			if i > 0 && bytes.Compare(ops[i-1].Key, op.Key) > 0 {
				t.Fatalf("not sorted at %d", i)
			}
			got[string(op.Key)] = append(got[string(op.Key)], string(op.Value))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatal("the operations on one key changed order")
		}
	}
}

// TestDeleteOnceLeavesNothingAtFlush: keys set once and deleted with
// DeleteOnce within one memtable leave no tombstone in the table files,
// where a plain delete leaves one per key; and Pebble's check of the
// contract is wired to SingleDeleteMisuses and the log.
func TestDeleteOnceLeavesNothingAtFlush(t *testing.T) {
	ctx := context.Background()
	// Tables are counted as the flushes wrote them: a table that an
	// automatic compaction has since moved to the bottom level (and emptied
	// of its tombstones there) still counts.
	flushed := func(once bool) (tables uint64, s *Store) {
		s, err := Open(t.TempDir(), Options{Linger: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		for i := range 100 {
			var b store.Batch
			b.Set([]byte(key("k", i)), make([]byte, 1024))
			if err := s.Commit(ctx, &b); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 100 {
			var b store.Batch
			if once {
				b.DeleteOnce([]byte(key("k", i)))
			} else {
				b.Delete([]byte(key("k", i)))
			}
			if err := s.Commit(ctx, &b); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		m := s.db.Metrics()
		for _, l := range m.Levels {
			tables += l.TablesFlushed
		}
		return tables, s
	}
	if tables, _ := flushed(false); tables == 0 {
		t.Fatal("plain deletes flushed no table: the test cannot tell")
	}
	tables, s := flushed(true)
	if tables != 0 {
		t.Fatalf("%d tables after flushing keys set once and deleted once, want none", tables)
	}
	if n := s.SingleDeleteMisuses(); n != 0 {
		t.Fatalf("%d misuses reported for a correct use", n)
	}

	// A key set twice and deleted once: Pebble reports it when the three
	// meet (here, at the flush).
	var b store.Batch
	b.Set([]byte("twice"), []byte("old"))
	b.Set([]byte("twice"), []byte("new"))
	if err := s.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	b = store.Batch{}
	b.DeleteOnce([]byte("twice"))
	if err := s.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := s.SingleDeleteMisuses(); n == 0 {
		t.Fatal("Pebble did not report a key set twice and deleted once")
	}
}
