package broker

import (
	"context"
	"sort"
	"time"
)

// SessionInfo describes one session of a session-enabled queue or
// subscription, as a console lists it.
type SessionInfo struct {
	ID string
	// MessageCount is the number of the session's messages in the main
	// subqueue (active, deferred and scheduled).
	MessageCount int
	// HasState says whether the session has a state; StateUpdated is when
	// it was last set (zero when unknown, as after a restart).
	HasState     bool
	StateUpdated time.Time
	// LockedUntil is when the session's lock expires; zero when no
	// receiver holds it.
	LockedUntil time.Time
}

// Sessions returns, in id order, the sessions ListSessions returns with
// updatedSince zero (those with messages or state), with what the broker
// knows of each. It reads memory only.
func (b *Broker) Sessions(ctx context.Context, path string, skip, top int) ([]SessionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := b.sessionOf(path, "")
	if err != nil {
		return nil, err
	}
	now := b.now().UnixNano()
	q.mu.Lock()
	out := make([]SessionInfo, 0, len(q.sessions))
	for id, s := range q.sessions {
		if s.count == 0 && !s.hasState {
			continue
		}
		si := SessionInfo{ID: id, MessageCount: s.count, HasState: s.hasState}
		if s.stateUpdated > 0 {
			si.StateUpdated = time.Unix(0, s.stateUpdated).UTC()
		}
		if s.owner != nil && s.lockedUntil > now {
			si.LockedUntil = time.Unix(0, s.lockedUntil).UTC()
		}
		out = append(out, si)
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return page(out, skip, top), nil
}
