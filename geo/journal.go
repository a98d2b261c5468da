package geo

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Status is the state of a journal record.
type Status int

// The statuses of the article's journal. A PerSession record is Working
// while a region holds the session and Pending when released; a PerMessage
// record is Working while claimed, then Completed or Failed for good.
const (
	Pending Status = iota
	Working
	Completed
	Failed
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case Pending:
		return "Pending"
	case Working:
		return "Working"
	case Completed:
		return "Completed"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Key names a journal record: the session's record (Position 0, used by
// PerSession) or one message's (Position ≥ 1, used by PerMessage).
type Key struct {
	Session  string
	Position int64
}

// String returns "session/position".
func (k Key) String() string { return fmt.Sprintf("%s/%d", k.Session, k.Position) }

// Record is one journal document.
type Record struct {
	Key    Key
	Status Status
	// Next, in a session's record, is the first position not done: every
	// position below it is Completed or Failed.
	Next int64
	// Owner is the consumer holding the claim (Working), or that finished
	// the message.
	Owner string
	// LeaseUntil is when the claim runs out unless renewed.
	LeaseUntil time.Time
	// MessageID is the message the record is about (PerMessage) or the last
	// one finished (PerSession).
	MessageID string
	// Reason says why a message failed: the dead-letter reason.
	Reason string
	// Version is the store's: 1 once created, one more at every Replace;
	// Renew leaves it.
	Version int64
}

// Errors a Journal returns.
var (
	ErrNotFound = errors.New("geo: journal record not found")
	ErrConflict = errors.New("geo: journal record changed (version conflict) or already exists")
)

// Journal is the strongly consistent store the regions coordinate through.
// Implementations must be linearizable per key and safe for concurrent use;
// package geotest is the suite they pass.
type Journal interface {
	// Get returns the record of k, or ErrNotFound.
	Get(ctx context.Context, k Key) (Record, error)
	// Create stores r with Version 1 and returns it, or returns
	// ErrConflict when r.Key exists.
	Create(ctx context.Context, r Record) (Record, error)
	// Replace stores r if the stored record's version is r.Version and
	// returns it with the version incremented; otherwise ErrConflict
	// (ErrNotFound when there is none).
	Replace(ctx context.Context, r Record) (Record, error)
	// Renew sets the lease of r.Key to r.LeaseUntil if the stored record
	// has r's version and owner, without changing its version; otherwise
	// ErrConflict.
	Renew(ctx context.Context, r Record) error
	// Watch returns a channel that receives (without blocking the sender,
	// so coalesced) after every Create or Replace of a record of session
	// committed after Watch returned, and also when the store may have
	// missed one (a lost connection). stop ends the watch.
	Watch(ctx context.Context, session string) (changed <-chan struct{}, stop func(), err error)
}
