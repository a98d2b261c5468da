package saga

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Status is where a saga instance is in its life.
type Status string

// The statuses of a saga instance.
const (
	StatusActive      Status = "active"      // running
	StatusCompleted   Status = "completed"   // finished by Complete
	StatusCompensated Status = "compensated" // finished by Compensate or the deadline
)

// Finished reports whether the status is a final one.
func (s Status) Finished() bool { return s == StatusCompleted || s == StatusCompensated }

// Session is what a Store may use of the session that keys an instance;
// *processor.Session implements it.
type Session interface {
	ID() string
	State(ctx context.Context) ([]byte, error)
	SetState(ctx context.Context, state []byte) error
}

// Record is one saga instance as a Store keeps it.
type Record struct {
	Saga    string    // the saga's name (Config.Name)
	ID      string    // the instance id: the session id
	Status  Status    // where the instance is
	Version int64     // 1 for the first save, incremented by each save
	Data    []byte    // the instance encoded as JSON; its "state" member is the user's state
	Updated time.Time // when the saga last changed it
}

// ErrConflict is returned by Store.Save when the stored version is not the
// one the record was loaded at: another host changed the instance.
var ErrConflict = errors.New("saga: the instance was changed concurrently")

// Store keeps saga instances. The saga calls it from the handler of one
// message of the instance's session at a time.
type Store interface {
	// Load returns the instance of saga name keyed by s.ID(); ok is false
	// when there is none.
	Load(ctx context.Context, s Session, name string) (rec Record, ok bool, err error)
	// Save writes rec, whose Version is one more than the version it was
	// loaded at (1 for a new instance). It returns ErrConflict when the
	// stored version is not rec.Version-1.
	Save(ctx context.Context, s Session, rec Record) error
	// Delete removes the instance loaded at version; it returns ErrConflict
	// when the stored version differs.
	Delete(ctx context.Context, s Session, name string, version int64) error
}

// SessionStateStore keeps each instance in the state of its session, on the
// broker: no database, and the session lock already serialises every change.
// One session holds one saga's instance.
type SessionStateStore struct{}

// Load reads the session state.
func (SessionStateStore) Load(ctx context.Context, s Session, name string) (Record, bool, error) {
	data, err := s.State(ctx)
	if err != nil || len(data) == 0 {
		return Record{}, false, err
	}
	var head struct {
		Saga    string    `json:"saga"`
		Status  Status    `json:"status"`
		Version int64     `json:"version"`
		Updated time.Time `json:"updated"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Record{}, false, err
	}
	return Record{Saga: head.Saga, ID: s.ID(), Status: head.Status, Version: head.Version, Data: data, Updated: head.Updated}, true, nil
}

// Save replaces the session state. The session lock is the concurrency
// control: a host that lost it cannot set the state.
func (SessionStateStore) Save(ctx context.Context, s Session, rec Record) error {
	return s.SetState(ctx, rec.Data)
}

// Delete clears the session state.
func (SessionStateStore) Delete(ctx context.Context, s Session, name string, version int64) error {
	return s.SetState(ctx, nil)
}
