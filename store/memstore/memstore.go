// Package memstore is an in-memory store.Store for fast unit tests of the
// broker. It keeps keys ordered in a skiplist guarded by a read/write lock and
// passes the store conformance suite (store/storetest).
//
// It owns only its in-memory data. It is not durable: nothing survives the
// process. Reopen simulates a clean restart by handing back a new handle over
// the same committed data, which is what a test of broker recovery needs.
// It must not touch the file system, and it never syncs (Stats.Syncs stays 0).
package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/busbar-io/busbar/store"
)

// scanChunk is how many entries Scan copies out under the read lock before it
// releases the lock and calls fn. Calling fn without the lock lets fn use the
// store (even Commit) without deadlocking.
const scanChunk = 128

// data is the committed state shared by every handle of one store. Its
// watchers hear of commits through every handle, so two handles behave as
// two writers sharing one backend.
type data struct {
	mu      sync.RWMutex
	list    *skiplist
	watches store.Watchers
	// writes counts the sets of each key since it was last deleted, to
	// hold DeleteOnce to its contract (a key written at most once):
	// memstore refuses a batch that breaks it, where the embedded store
	// would let an older value come back.
	writes     map[string]int
	violations int
}

// Store is an in-memory, ordered key/value store. It is safe for concurrent
// use. Its zero value is not usable: call New.
type Store struct {
	d      *data
	closed atomic.Bool

	commits atomic.Uint64
	ops     atomic.Uint64
	bytes   atomic.Uint64
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{d: &data{list: newSkiplist(), writes: map[string]int{}}}
}

// Reopen returns a new handle over the data committed through s, as a
// restarted process would see it. It may be called before or after s is
// closed; the new handle starts with zeroed Stats.
func (s *Store) Reopen() *Store {
	return &Store{d: s.d}
}

// Commit applies b atomically if its conditions hold. Keys and values are
// copied, so the caller may reuse b's slices as soon as Commit returns. A
// batch without operations only checks its conditions and is not counted
// in Stats.
func (s *Store) Commit(ctx context.Context, b *store.Batch) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if b == nil || len(b.Ops)+len(b.Conds) == 0 {
		return nil
	}
	ops := copyOps(b.Ops)
	s.d.mu.Lock()
	l := s.d.list
	if err := store.CheckConds(b.Conds, func(k []byte) ([]byte, bool, error) {
		if n := l.get(k); n != nil {
			return n.value, true, nil
		}
		return nil, false, nil
	}); err != nil {
		s.d.mu.Unlock()
		return err
	}
	if len(ops) == 0 {
		s.d.mu.Unlock()
		return nil
	}
	if err := s.d.checkOnce(ops); err != nil {
		s.d.violations++
		s.d.mu.Unlock()
		return err
	}
	for _, op := range ops {
		switch op.Kind {
		case store.OpSet:
			l.set(op.Key, op.Value)
			s.d.writes[string(op.Key)]++
		case store.OpDelete:
			l.delete(op.Key)
			delete(s.d.writes, string(op.Key))
		case store.OpDeleteRange:
			if !store.EmptyRange(op.Key, op.End) {
				l.deleteRange(op.Key, op.End)
				for k := range s.d.writes {
					if k >= string(op.Key) && k < string(op.End) {
						delete(s.d.writes, k)
					}
				}
			}
		}
	}
	s.d.watches.Notify(ops)
	s.d.mu.Unlock()
	s.commits.Add(1)
	s.ops.Add(uint64(len(ops)))
	s.bytes.Add(uint64(b.Bytes()))
	return nil
}

// checkOnce refuses ops when one deletes with DeleteOnce a key set more than
// once since its last deletion (counting the sets of ops before it).
func (d *data) checkOnce(ops []store.Op) error {
	if !slices.ContainsFunc(ops, func(op store.Op) bool { return op.Once }) {
		return nil
	}
	local := map[string]int{} // counts changed by ops, before the DeleteOnce
	count := func(k string) int {
		if n, ok := local[k]; ok {
			return n
		}
		return d.writes[k]
	}
	for _, op := range ops {
		switch op.Kind {
		case store.OpSet:
			local[string(op.Key)] = count(string(op.Key)) + 1
		case store.OpDelete:
			if n := count(string(op.Key)); op.Once && n > 1 {
				return fmt.Errorf("store/memstore: DeleteOnce of key %x, set %d times since it was created (DeleteOnce is for keys set once)", op.Key, n)
			}
			local[string(op.Key)] = 0
		case store.OpDeleteRange:
			for k := range d.writes {
				if k >= string(op.Key) && k < string(op.End) {
					local[k] = 0
				}
			}
			for k := range local {
				if k >= string(op.Key) && k < string(op.End) {
					local[k] = 0
				}
			}
		}
	}
	return nil
}

// DeleteOnceViolations is how many batches were refused for deleting with
// DeleteOnce a key set more than once (tests require none).
func (s *Store) DeleteOnceViolations() int {
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	return s.d.violations
}

// copyOps copies the keys and values of sets (which the skiplist keeps) into
// one allocation per operation. Delete keys are only compared, never kept.
func copyOps(in []store.Op) []store.Op {
	out := make([]store.Op, len(in))
	for i, op := range in {
		out[i] = op
		if op.Kind != store.OpSet {
			continue
		}
		buf := make([]byte, len(op.Key)+len(op.Head)+len(op.Value))
		n := copy(buf, op.Key)
		copy(buf[n+copy(buf[n:], op.Head):], op.Value)
		out[i].Key = buf[:n:n]
		out[i].Value, out[i].Head = buf[n:], nil
	}
	return out
}

// Get returns a copy of the value stored under key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.d.mu.RLock()
	n := s.d.list.get(key)
	var v []byte
	if n != nil {
		v = make([]byte, len(n.value))
		copy(v, n.value)
	}
	s.d.mu.RUnlock()
	if n == nil {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// GetMany returns copies of the values stored under keys (nil for a missing
// key), read under one hold of the lock.
func (s *Store) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	for i, k := range keys {
		if n := s.d.list.get(k); n != nil {
			out[i] = append(make([]byte, 0, len(n.value)), n.value...)
		}
	}
	return out, nil
}

// Scan calls fn for each key in [start, end) in ascending order; a nil end
// means the end of the keyspace. fn receives copies, so a misbehaving fn that
// modifies them cannot corrupt the store. The scan is not a snapshot: it
// reads the data in chunks, and fn runs without any lock held, so it may call
// the store, and commits made during the scan to keys not yet reached are
// seen.
func (s *Store) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Each chunk is copied into buf; spans records where each entry lies.
	type span struct{ off, klen, vlen int }
	spans := make([]span, 0, scanChunk)
	var buf, cursor []byte
	cursor = start
	for first := true; ; first = false {
		spans, buf = spans[:0], buf[:0]
		s.d.mu.RLock()
		n := s.d.list.findGE(cursor, nil)
		if !first && n != nil && string(n.key) == string(cursor) {
			n = n.next[0] // resume after the last key handed out
		}
		for ; n != nil && len(spans) < scanChunk; n = n.next[0] {
			if end != nil && string(n.key) >= string(end) {
				break
			}
			spans = append(spans, span{len(buf), len(n.key), len(n.value)})
			buf = append(buf, n.key...)
			buf = append(buf, n.value...)
		}
		more := n != nil && (end == nil || string(n.key) < string(end))
		s.d.mu.RUnlock()
		for _, sp := range spans {
			k := buf[sp.off : sp.off+sp.klen : sp.off+sp.klen]
			v := buf[sp.off+sp.klen : sp.off+sp.klen+sp.vlen : sp.off+sp.klen+sp.vlen]
			if err := fn(k, v); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		if s.closed.Load() {
			return store.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		last := spans[len(spans)-1]
		cursor = append(cursor[:0:0], buf[last.off:last.off+last.klen]...)
	}
}

// Watch calls fn with the keys under prefix changed by commits through any
// handle of this store; see store.Store.
func (s *Store) Watch(prefix []byte, fn func(key []byte)) (stop func()) {
	return s.d.watches.Watch(prefix, fn)
}

// Stats reports the handle's counters. Syncs is always 0: nothing is synced.
func (s *Store) Stats() store.Stats {
	return store.Stats{
		Commits:      s.commits.Load(),
		Ops:          s.ops.Load(),
		BytesWritten: s.bytes.Load(),
	}
}

// Close releases the handle; every later call on it returns store.ErrClosed.
// The data stays reachable through handles from Reopen.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}
