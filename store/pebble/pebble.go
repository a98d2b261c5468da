// Package pebble is Busbar's embedded, default store.Store backend, built on
// CockroachDB's Pebble LSM engine.
//
// It owns one directory on disk (Pebble's WAL, sstables, MANIFEST and
// OPTIONS files) and the group committer that turns many concurrent Commits
// into one Pebble batch and one fsync. It knows nothing of the broker's key
// layout or record encodings, and it must not touch files outside its
// directory (except the destination a caller passes to Checkpoint).
//
// Durability: Commit returns nil only after the WAL holding the batch has
// been fsynced; a batch is applied entirely or not at all, even across a
// crash. See docs/store.md for the operator's view.
package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/internal/uring"
	"github.com/busbar-io/busbar/store"
)

// Defaults of Options.
const (
	DefaultCacheSize     = 64 << 20
	DefaultMemTableSize  = 64 << 20
	DefaultMaxGroupBytes = 64 << 20
	DefaultLinger        = 250 * time.Microsecond
)

// Options configure a Store. The zero value is usable: every zero field takes
// its default.
type Options struct {
	// CacheSize bounds Pebble's block cache, in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size of one memtable, in bytes. Default 64 MiB
	// (Pebble's default is 4 MiB). A queue writes a message and deletes it
	// soon after; when both land in the same memtable the flush drops the
	// value and keeps only a small tombstone, so a larger memtable means far
	// less data written to sstables and compacted later.
	MemTableSize uint64
	// Linger bounds how long the committer, after a group of k > 1
	// batches, waits for k batches to be pending again before it starts the
	// next group (see commit.go). Callers released by a group usually come
	// straight back, and gathering them makes each fsync carry about as
	// many batches as there are committers instead of about half as many.
	// A lone producer never waits; the wait ends as soon as the batches are
	// there, so the linger is paid in full only when load drops. Default
	// 250µs; negative disables it.
	Linger time.Duration
	// MaxGroupBytes caps the keys and values merged into one group commit;
	// a single batch larger than this is committed alone. Default 64 MiB.
	MaxGroupBytes int
	// Logger receives Pebble's log lines, with the attribute
	// engine=pebble: routine ones at Debug, write stalls, slow disks and
	// low disk space at Warn, background errors at Error. Nil discards
	// them.
	Logger *slog.Logger
	// MinFreeBytes is the free space the store keeps on its volume:
	// below it CheckSpace fails (store.SpaceGuard), and the broker refuses
	// sends while completions go on in the reserve. The reserve matters:
	// Pebble cannot go on after a failed WAL write, so a volume that really
	// fills up stops the process (its Logger.Fatalf). Default twice
	// MemTableSize: the WAL of the current memtable may grow to that size
	// and its flush writes an sstable of about as much. Negative disables
	// the check.
	MinFreeBytes int64
	// OnCommit, when set, is called once per group commit (one fsync) with
	// the number of operations the group held and the time from the arrival
	// of its oldest batch until the group was durable: the worst commit
	// latency of the group. It runs on the committer's goroutine and must
	// return quickly (update a histogram, no I/O).
	OnCommit func(batchOps int, d time.Duration)
	// OnSync, when set, is called after every fsync of the write-ahead log
	// with how long the fsync took: the disk's part of a commit's latency,
	// without the gathering and queueing OnCommit's latency includes. It
	// runs on Pebble's WAL writer and must return quickly.
	OnSync func(d time.Duration)

	// fs replaces the OS file system in tests.
	fs vfs.FS
	// spaceEvery replaces spaceCheckEvery in tests.
	spaceEvery time.Duration
	// afterRelease, in tests, runs after a group's callers are released.
	afterRelease func()
}

func (o *Options) setDefaults() {
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = 2 * int64(o.MemTableSize)
	}
	if o.MaxGroupBytes <= 0 {
		o.MaxGroupBytes = DefaultMaxGroupBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
}

// pebbleOptions translates o into Pebble's options, tuned for a queue.
func (o *Options) pebbleOptions(cache *pebble.Cache, fs vfs.FS, misuses *atomic.Uint64) *pebble.Options {
	po := &pebble.Options{
		Cache:              cache,
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             slogLogger{o.Logger},
		EventListener:      eventListener(o.Logger, misuses),
		MemTableSize:       o.MemTableSize,
		// Up to four memtables may queue for flushing before writes stall,
		// so a slow flush on a busy 2-core machine delays acks less often.
		MemTableStopWritesThreshold: 4,
		// Compact L0 early: tombstones reach the sets they shadow sooner,
		// and both are dropped, which keeps reads and disk usage small
		// under constant set-then-delete churn.
		L0CompactionThreshold: 2,
		// ...but do not stop writes until L0 is deep: a stall is an
		// outage for every producer at once.
		L0StopWritesThreshold: 24,
		// On a small machine let compactions use at most two threads.
		CompactionConcurrencyRange: func() (int, int) { return 1, 2 },
	}
	// Bloom filters make a Get of a key that is not in a table cheap; the
	// broker reads message bodies by key after restarts and on delivery.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return po
}

// Store is a durable store.Store on a Pebble database. It is safe for
// concurrent use.
type Store struct {
	dir  string
	db   *pebble.DB
	opts Options

	// state counts in-flight calls; closedBit marks the store closed.
	// Close waits until the count drops to zero (drained is closed then).
	state     atomic.Int64
	drained   chan struct{}
	drainOnce sync.Once

	committer committer
	fs        *syncCountingFS // the WAL files' file system: counts their fsyncs, makes large groups' through the ring
	watches   store.Watchers
	space     spaceGuard

	commits atomic.Uint64
	ops     atomic.Uint64
	bytes   atomic.Uint64
	// misuses counts single deletions Pebble saw meet a key written more
	// than once (Batch.DeleteOnce used wrongly; logged at Error).
	misuses atomic.Uint64
}

const closedBit = int64(1) << 62

var _ store.Store = (*Store)(nil)

// Open opens, or creates, the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	opts.setDefaults()
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	s := &Store{dir: dir, opts: opts, drained: make(chan struct{})}
	s.fs = &syncCountingFS{FS: opts.fs, onSync: opts.OnSync}
	if opts.fs == vfs.Default {
		var err error
		if s.fs.ring, err = uring.New(); err != nil {
			opts.Logger.Info("store/pebble: the write-ahead log is flushed with fdatasync", "reason", err)
		}
	}
	db, err := pebble.Open(dir, opts.pebbleOptions(cache, s.fs, &s.misuses))
	if err != nil {
		s.closeRing()
		return nil, fmt.Errorf("store/pebble: open %s: %w", dir, err)
	}
	s.db = db
	s.committer.start(s)
	s.startSpaceGuard()
	return s, nil
}

// Dir returns the directory the store lives in.
func (s *Store) Dir() string { return s.dir }

// acquire registers an in-flight call; false means the store is closed.
func (s *Store) acquire() bool {
	if s.state.Add(1)&closedBit != 0 {
		s.release()
		return false
	}
	return true
}

func (s *Store) release() {
	if s.state.Add(-1) == closedBit {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

// Commit applies b atomically, if its conditions hold, and returns once it
// is fsynced. Concurrent Commits are merged into one Pebble batch and one
// fsync. Keys and values are copied before Commit returns; the caller may
// reuse b's slices afterwards. A batch without operations or conditions
// returns nil at once and is not counted. ctx is honoured until the batch is
// queued for the committer; after that Commit reports the real outcome.
func (s *Store) Commit(ctx context.Context, b *store.Batch) error {
	if !s.acquire() {
		return store.ErrClosed
	}
	defer s.release()
	if err := b.Validate(); err != nil {
		return err
	}
	if b == nil || len(b.Ops)+len(b.Conds) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.committer.commit(b)
}

// Watch calls fn with the keys under prefix changed by commits; see
// store.Store. An embedded store has one writer, so only this process's
// commits are reported.
func (s *Store) Watch(prefix []byte, fn func(key []byte)) (stop func()) {
	return s.watches.Watch(prefix, fn)
}

// Get returns a copy of the value stored under key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if !s.acquire() {
		return nil, store.ErrClosed
	}
	defer s.release()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store/pebble: get: %w", err)
	}
	out := make([]byte, len(v))
	copy(out, v)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("store/pebble: get: %w", err)
	}
	return out, nil
}

// GetMany returns copies of the values stored under keys (nil for a missing
// key), read from one iterator: the keys are sought in ascending order, each
// seek going on from the last, which costs a third of a Get per key when
// the keys lie close together, as one session's messages do.
func (s *Store) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if !s.acquire() {
		return nil, store.ErrClosed
	}
	defer s.release()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	switch len(keys) {
	case 0:
		return out, nil
	case 1:
		v, closer, err := s.db.Get(keys[0])
		if errors.Is(err, pebble.ErrNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("store/pebble: get: %w", err)
		}
		out[0] = append(make([]byte, 0, len(v)), v...)
		if err := closer.Close(); err != nil {
			return nil, fmt.Errorf("store/pebble: get: %w", err)
		}
		return out, nil
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	first, last := keys[order[0]], keys[order[len(order)-1]]
	if len(first) == 0 {
		first = nil // no lower bound (see Scan)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: first,
		UpperBound: append(append(make([]byte, 0, len(last)+1), last...), 0), // just past the last key
	})
	if err != nil {
		return nil, fmt.Errorf("store/pebble: get: %w", err)
	}
	for _, i := range order {
		var ok bool
		if len(keys[i]) == 0 {
			ok = it.First() // the empty key sorts first; Pebble seeks only to non-empty ones
		} else {
			ok = it.SeekGE(keys[i])
		}
		if !ok || !bytes.Equal(it.Key(), keys[i]) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("store/pebble: get: %w", err)
		}
		out[i] = append(make([]byte, 0, len(v)), v...)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("store/pebble: get: %w", err)
	}
	return out, nil
}

// Scan calls fn for each key in [start, end) in ascending order; a nil end
// means the end of the keyspace. It reads a consistent snapshot taken when
// the scan starts: commits made meanwhile, including by fn, are not seen. fn
// may call Get and Commit, but not Close. key and value are valid only during
// the call and must not be modified.
func (s *Store) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte) error) error {
	if !s.acquire() {
		return store.ErrClosed
	}
	defer s.release()
	if err := ctx.Err(); err != nil {
		return err
	}
	if store.EmptyRange(start, end) {
		return nil
	}
	if len(start) == 0 {
		// No key sorts before the empty key: that is no lower bound. (An
		// empty, non-nil bound also trips Pebble's invariant checks, on in
		// race builds, which index the seek key's first byte.)
		start = nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("store/pebble: scan: %w", err)
	}
	for ok, n := it.First(), 0; ok; ok, n = it.Next(), n+1 {
		if n&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("store/pebble: scan: read value: %w", err)
		}
		if err := fn(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("store/pebble: scan: %w", err)
	}
	return nil
}

// Stats reports the store's counters since Open. Syncs counts the fsyncs of
// the write-ahead log, so Ops/Syncs is the average group size.
func (s *Store) Stats() store.Stats {
	return store.Stats{
		Commits:      s.commits.Load(),
		Syncs:        s.fs.syncs.Load(),
		Ops:          s.ops.Load(),
		BytesWritten: s.bytes.Load(),
	}
}

// SingleDeleteMisuses is how many times Pebble saw a deletion made with
// Batch.DeleteOnce meet a key written more than once (each is logged at
// Error). Tests require it to stay zero.
func (s *Store) SingleDeleteMisuses() uint64 { return s.misuses.Load() }

// Checkpoint writes a consistent copy of the store, as of the call, into
// destDir, which must not exist. Files are hard-linked where the file system
// allows, so it is fast and cheap; the copy can then be archived while the
// broker keeps running, and opened with Open to restore.
func (s *Store) Checkpoint(destDir string) error {
	if !s.acquire() {
		return store.ErrClosed
	}
	defer s.release()
	if err := s.db.Checkpoint(destDir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("store/pebble: checkpoint to %s: %w", destDir, err)
	}
	return nil
}

// Close waits for in-flight calls, stops the committer and closes the
// database. Every later call returns store.ErrClosed.
func (s *Store) Close() error {
	old := s.state.Or(closedBit)
	if old&closedBit != 0 {
		return store.ErrClosed
	}
	s.committer.hurryUp()
	if old == 0 {
		s.drainOnce.Do(func() { close(s.drained) })
	}
	<-s.drained
	s.committer.stop()
	s.stopSpaceGuard()
	err := s.db.Close()
	s.closeRing()
	if err != nil {
		return fmt.Errorf("store/pebble: close: %w", err)
	}
	return nil
}

// closeRing releases the WAL's io_uring, once nothing can flush through it.
func (s *Store) closeRing() {
	if s.fs.ring != nil {
		_ = s.fs.ring.Close()
	}
}
