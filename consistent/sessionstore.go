package consistent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// captured context and state) is one JSON document in the session state.
// Only the newest state is stored whole: each older one is stored as a
// delta, the top-level members of the JSON object that differ from the
// version after it, whenever that is smaller. Retention bounds the size of
// the session state: at most one state plus MaxVersions deltas (when states
// are not JSON objects, MaxVersions whole states). The zero value keeps 16
// versions for 7 days.
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
	State     json.RawMessage `json:"state,omitempty"` // whole, or nil with Delta
	Delta     json.RawMessage `json:"delta,omitempty"` // turns the next version's state into this one's
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
	// Rebuild the states stored as deltas, from the newest backwards.
	for i := len(d.Versions) - 2; i >= 0; i-- {
		v := &d.Versions[i]
		if v.State == nil && v.Delta != nil {
			if v.State, err = applyDelta(d.Versions[i+1].State, v.Delta); err != nil {
				return sessionDoc{}, fmt.Errorf("consistent: session state of %q, version %d: %w", key.ID, v.Number, err)
			}
		}
	}
	return d, nil
}

// stateDelta returns the delta that turns next into prev: the top-level
// members of prev that next lacks or has with another value ("s"), and the
// members of next that prev lacks ("d"). ok is false when either is not a
// JSON object.
func stateDelta(prev, next []byte) (delta []byte, ok bool) {
	var p, n map[string]json.RawMessage
	if json.Unmarshal(prev, &p) != nil || json.Unmarshal(next, &n) != nil || p == nil || n == nil {
		return nil, false
	}
	var dl struct {
		Set map[string]json.RawMessage `json:"s,omitempty"`
		Del []string                   `json:"d,omitempty"`
	}
	for k, pv := range p {
		if nv, ok := n[k]; !ok || !bytes.Equal(pv, nv) {
			if dl.Set == nil {
				dl.Set = map[string]json.RawMessage{}
			}
			dl.Set[k] = pv
		}
	}
	for k := range n {
		if _, ok := p[k]; !ok {
			dl.Del = append(dl.Del, k)
		}
	}
	slices.Sort(dl.Del)
	b, err := json.Marshal(dl)
	return b, err == nil
}

// applyDelta applies a delta of stateDelta to next.
func applyDelta(next, delta []byte) ([]byte, error) {
	var n map[string]json.RawMessage
	if err := json.Unmarshal(next, &n); err != nil {
		return nil, err
	}
	var dl struct {
		Set map[string]json.RawMessage `json:"s"`
		Del []string                   `json:"d"`
	}
	if err := json.Unmarshal(delta, &dl); err != nil {
		return nil, err
	}
	for _, k := range dl.Del {
		delete(n, k)
	}
	for k, v := range dl.Set {
		n[k] = v
	}
	return json.Marshal(n)
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
	if n := len(d.Versions); n > 0 {
		prev := &d.Versions[n-1]
		if delta, ok := stateDelta(prev.State, v.State); ok && len(delta) < len(prev.State) {
			prev.Delta = delta
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
	for i := range d.Versions {
		if d.Versions[i].Delta != nil {
			d.Versions[i].State = nil // rebuilt by read
		}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return key.Session.SetState(ctx, data)
}
