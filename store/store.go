// Package store is Busbar's durability boundary: an ordered key/value store
// with atomic, durable batches. The broker owns the key layout and the record
// encodings; a backend owns only bytes, order and durability. Every backend
// (store/pebble, later store/postgres) passes the conformance suite in
// store/storetest.
//
// The contract the broker relies on: when Commit returns nil, every operation
// of the batch is on stable storage (fsync or equivalent) and will be seen by
// Get and Scan, and after a crash and reopen; a batch is applied entirely or
// not at all. Concurrent Commits are group-committed: many batches, one fsync.
package store

import "errors"

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("store: not found")

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store: closed")

// Store is a durable ordered key/value store. Keys compare bytewise.
// It is safe for concurrent use.
type Store interface {
	// Commit applies b atomically and durably; b must not be used afterwards.
	Commit(b *Batch) error
	// Get returns a copy of the value stored under key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for each key in [start, end) in ascending order (end nil:
	// to the end of the keyspace). key and value are valid only during the
	// call and must not be modified. A non-nil error from fn stops the scan
	// and is returned. fn may call Get and Commit (not Close); whether the
	// scan sees commits made while it runs depends on the backend.
	Scan(start, end []byte, fn func(key, value []byte) error) error
	// Stats reports counters for metrics.
	Stats() Stats
	// Close flushes and releases the store.
	Close() error
}

// Stats are cumulative counters of a store.
type Stats struct {
	Commits      uint64 // batches committed
	Syncs        uint64 // fsyncs (group commits)
	Ops          uint64 // operations committed
	BytesWritten uint64 // keys and values committed
}

// OpKind is the kind of one batch operation.
type OpKind uint8

// Batch operation kinds.
const (
	OpSet OpKind = iota + 1
	OpDelete
	OpDeleteRange // deletes [Key, End)
)

// Op is one operation of a Batch.
type Op struct {
	Kind  OpKind
	Key   []byte
	Value []byte // OpSet
	End   []byte // OpDeleteRange
}

// Batch is an ordered list of operations applied atomically by Commit.
// The batch keeps the slices it is given: do not modify them until Commit returns.
type Batch struct {
	Ops []Op
}

// Set stores value under key.
func (b *Batch) Set(key, value []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpSet, Key: key, Value: value})
}

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.Ops = append(b.Ops, Op{Kind: OpDelete, Key: key}) }

// DeleteRange removes every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteRange, Key: start, End: end})
}

// Len returns the number of operations.
func (b *Batch) Len() int { return len(b.Ops) }

// Reset empties the batch for reuse.
func (b *Batch) Reset() { b.Ops = b.Ops[:0] }
