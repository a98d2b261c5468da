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
//
// Three parts of the contract exist for a store shared by several broker
// nodes (store/postgres in a cluster), and every backend implements them so
// one suite holds them all to it:
//
//   - Ranges: the broker lays out each entity's records under key prefixes of
//     its own, so one entity is loaded with a few Scans of its ranges,
//     never a scan of the namespace.
//   - Fencing: a Batch may carry conditions (Batch.Require): the batch is
//     applied only if, atomically with it, every condition key holds exactly
//     the expected value; otherwise Commit returns ErrConditionFailed and
//     applies nothing. An ownership lease with an epoch is such a key: a node
//     that lost its lease can never write again.
//   - Change notification: Watch tells the caller which keys under a prefix
//     were changed by committed batches, its own and (in a shared backend)
//     other writers', so shared metadata is re-read when it changes; and
//     when it may have missed some (a nil key), so all of it is re-read.
//
// Contexts: a call whose context is done before the store has taken its
// batch returns the context's error and applies nothing. Once a batch is
// handed to the store's committer it is applied or failed as a whole, and
// Commit reports which, whatever happens to the context meanwhile: a caller
// never sees "cancelled" for a batch that was in fact committed.
package store

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("store: not found")

// ErrClosed is returned by every call after Close.
var ErrClosed = errors.New("store: closed")

// ErrConditionFailed is wrapped by the error Commit returns when a condition
// of the batch (Batch.Require) does not hold. Nothing of the batch is applied.
var ErrConditionFailed = errors.New("store: condition failed")

// ErrFull is wrapped by the error SpaceGuard.CheckSpace returns while the
// store's volume has less free space than the store's reserve.
var ErrFull = errors.New("store: volume full")

// SpaceGuard is implemented by stores that live on a local volume.
// CheckSpace returns an error wrapping ErrFull while the volume's free space
// is below the store's reserve, and nil otherwise; it is cheap enough to call
// before every write. The broker calls it before writes that add data (sends,
// schedules, session states) and refuses them while it fails, so that
// completions and other writes that let data go still fit in the reserve.
type SpaceGuard interface {
	CheckSpace() error
}

// Store is a durable ordered key/value store. Keys compare bytewise.
// It is safe for concurrent use.
type Store interface {
	// Commit applies b atomically and durably, if its conditions hold; b must
	// not be used afterwards. See the package comment for ctx.
	Commit(ctx context.Context, b *Batch) error
	// Get returns a copy of the value stored under key, or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// GetMany returns copies of the values stored under keys, in the order
	// of keys, all read from one consistent view of the store: nil for a
	// missing key, an empty non-nil slice for an empty value. Keys may come
	// in any order and repeat. It is what to call for several keys at once:
	// one round trip to a shared backend, and one iterator over the
	// embedded store instead of one lookup per key.
	GetMany(ctx context.Context, keys [][]byte) ([][]byte, error)
	// Scan calls fn for each key in [start, end) in ascending order (end nil:
	// to the end of the keyspace). key and value are valid only during the
	// call and must not be modified. A non-nil error from fn stops the scan
	// and is returned. fn may call Get and Commit (not Close); whether the
	// scan sees commits made while it runs depends on the backend. A done
	// ctx stops the scan with ctx's error.
	Scan(ctx context.Context, start, end []byte, fn func(key, value []byte) error) error
	// Watch calls fn with the key of every operation of a committed batch
	// that falls under prefix (for a delete-range, the start of its overlap
	// with the prefix), after the batch is durable, in commit order, from one
	// goroutine per watch. fn must not block for long; it may call the
	// store. stop ends the watch and waits for a running fn to return; it
	// must not be called from fn.
	//
	// fn(nil) says the watch may have missed changes: a shared backend lost
	// its stream of other writers' changes for a while and has it back.
	// The caller then re-reads what it keeps of the prefix; changes after
	// the nil are reported as usual.
	Watch(prefix []byte, fn func(key []byte)) (stop func())
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
	Kind OpKind
	// Once, on an OpDelete, says the key was set exactly once since it
	// was created, and never written again (DeleteOnce). A store may then
	// drop the key's value and this deletion together, leaving no
	// tombstone; one that cannot treats it as a plain delete.
	Once  bool
	Key   []byte
	Value []byte // OpSet
	End   []byte // OpDeleteRange
	// Head, on an OpSet, is stored in front of Value: the key holds Head
	// then Value (SetJoined). It spares a caller that shares Value between
	// operations a copy of it joined to its own prefix.
	Head []byte
}

// Joined returns what an OpSet stores: Value, or Head then Value in a new
// slice when Head is set.
func (op *Op) Joined() []byte {
	if len(op.Head) == 0 {
		return op.Value
	}
	v := make([]byte, len(op.Head)+len(op.Value))
	copy(v[copy(v, op.Head):], op.Value)
	return v
}

// Batch is an ordered list of operations applied atomically by Commit, if
// its conditions hold. The batch keeps the slices it is given: do not
// modify them until Commit returns.
type Batch struct {
	Ops []Op
	// Conds must all hold, atomically with the batch, for it to apply.
	Conds []Cond
}

// Cond is a condition of a Batch: the value stored under Key equals Value
// (bytewise; a nil Value means the key must be absent).
type Cond struct {
	Key   []byte
	Value []byte
}

// Require adds a condition: the batch applies only if key holds exactly
// value (nil: key absent) when it is applied. A fencing token is such a
// condition on an ownership record.
func (b *Batch) Require(key, value []byte) {
	b.Conds = append(b.Conds, Cond{Key: key, Value: value})
}

// Set stores value under key.
func (b *Batch) Set(key, value []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpSet, Key: key, Value: value})
}

// SetJoined stores head followed by value under key, without the caller
// joining them (see Op.Head).
func (b *Batch) SetJoined(key, head, value []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpSet, Key: key, Value: value, Head: head})
}

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.Ops = append(b.Ops, Op{Kind: OpDelete, Key: key}) }

// DeleteOnce removes a key that was set exactly once and never written
// again (see Op.Once). The caller must be sure: on the embedded store a
// key deleted this way after two writes may have its older value come back.
func (b *Batch) DeleteOnce(key []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDelete, Once: true, Key: key})
}

// DeleteRange removes every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteRange, Key: start, End: end})
}

// Len returns the number of operations.
func (b *Batch) Len() int { return len(b.Ops) }

// Reset empties the batch for reuse.
func (b *Batch) Reset() { b.Ops, b.Conds = b.Ops[:0], b.Conds[:0] }
