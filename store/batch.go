package store

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrInvalidBatch is wrapped by the error Commit returns for a batch that
// cannot be applied (an unknown operation kind, or a delete-range without an
// end). Such a batch is rejected whole: none of its operations is applied.
var ErrInvalidBatch = errors.New("store: invalid batch")

// Validate reports whether every operation of b can be applied. Backends call
// it before applying anything, so an invalid batch leaves the store untouched.
// A nil or empty batch is valid. A delete-range whose start is not below its
// end is valid and deletes nothing.
func (b *Batch) Validate() error {
	if b == nil {
		return nil
	}
	for i, op := range b.Ops {
		switch op.Kind {
		case OpSet, OpDelete:
		case OpDeleteRange:
			if op.End == nil {
				return fmt.Errorf("%w: op %d: delete-range needs an end key", ErrInvalidBatch, i)
			}
		default:
			return fmt.Errorf("%w: op %d: unknown kind %d", ErrInvalidBatch, i, op.Kind)
		}
	}
	return nil
}

// Bytes returns the number of key, value and end bytes the batch carries:
// what Stats.BytesWritten counts for it.
func (b *Batch) Bytes() int {
	if b == nil {
		return 0
	}
	n := 0
	for _, op := range b.Ops {
		n += len(op.Key) + len(op.Head) + len(op.Value) + len(op.End)
	}
	return n
}

// EmptyRange reports whether the delete-range [start, end) holds no key.
func EmptyRange(start, end []byte) bool {
	return end != nil && bytes.Compare(start, end) >= 0
}
