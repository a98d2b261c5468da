package consistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SessionStateStore keeps each state stream in the session state of the
// session whose id is the business id: no database, for users who keep
// their state in the broker. The session lock serialises the handlers of
// one session, and a host that lost the lock can no longer set the state,
// so it can neither commit nor (the Runner stores before it publishes)
// publish.
//
// The whole retained history (every kept version with its MessageId,
// captured context and state) is one JSON document in the session state, so
// Retention also bounds the size of the session state: about MaxVersions
// times the size of one state. The zero value keeps 16 versions for 7 days.
type SessionStateStore struct {
	Retention Retention
}

// sessionDoc is the session state.
type sessionDoc struct {
	Versions []sessionVersion `json:"versions"` // oldest first, consecutive numbers
}

type sessionVersion struct {
	Number    int64           `json:"n"`
	MessageID string          `json:"id"`
	Context   json.RawMessage `json:"ctx"`
	State     json.RawMessage `json:"state"`
	Stored    time.Time       `json:"at"`
}

func (v sessionVersion) version() *Version {
	return &Version{Number: v.Number, MessageID: v.MessageID, Context: []byte(v.Context), State: []byte(v.State), Stored: v.Stored}
}

func (SessionStateStore) read(ctx context.Context, key Key) (sessionDoc, error) {
	if key.Session == nil {
		return sessionDoc{}, errors.New("consistent: SessionStateStore needs the input's session (use a SessionProcessor)")
	}
	if key.Session.ID() != key.ID {
		return sessionDoc{}, fmt.Errorf("consistent: SessionStateStore needs the business id to be the session id (%q, not %q)", key.Session.ID(), key.ID)
	}
	data, err := key.Session.State(ctx)
	if err != nil || len(data) == 0 {
		return sessionDoc{}, err
	}
	var d sessionDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return sessionDoc{}, fmt.Errorf("consistent: session state of %q: %w", key.ID, err)
	}
	return d, nil
}

// Load reads the session state.
func (s SessionStateStore) Load(ctx context.Context, key Key, messageID string) (Loaded, error) {
	d, err := s.read(ctx, key)
	if err != nil || len(d.Versions) == 0 {
		return Loaded{}, err
	}
	ld := Loaded{Latest: *d.Versions[len(d.Versions)-1].version()}
	for i, v := range d.Versions {
		if v.MessageID == messageID {
			ld.Match = v.version()
			if i > 0 {
				ld.Base = d.Versions[i-1].version()
			}
			break
		}
	}
	return ld, nil
}

// Append adds v to the history, drops what Retention no longer keeps and
// writes the session state.
func (s SessionStateStore) Append(ctx context.Context, key Key, v Version) error {
	d, err := s.read(ctx, key)
	if err != nil {
		return err
	}
	var newest int64
	if n := len(d.Versions); n > 0 {
		newest = d.Versions[n-1].Number
	}
	if v.Number != newest+1 {
		return ErrConflict
	}
	for _, old := range d.Versions {
		if old.MessageID == v.MessageID {
			return ErrConflict
		}
	}
	d.Versions = append(d.Versions, sessionVersion{Number: v.Number, MessageID: v.MessageID,
		Context: json.RawMessage(v.Context), State: json.RawMessage(v.State), Stored: v.Stored})
	r := s.Retention
	if r.MaxVersions <= 0 {
		r.MaxVersions = 16
	}
	first := d.Versions[0].Number
	oldest := r.OldestKept(v.Number, v.Stored, func(n int64) time.Time {
		if n < first {
			return time.Time{} // removed before: older than any cut
		}
		return d.Versions[n-first].Stored
	})
	if drop := oldest - 1 - first; drop > 0 {
		d.Versions = d.Versions[drop:]
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return key.Session.SetState(ctx, data)
}
