package broker

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/busbar-io/busbar/store"
)

// acceptWaiter is an AcceptNextSession call waiting for a session.
type acceptWaiter struct {
	c  *Consumer
	ch chan acceptResult
	dl deadline
}

type acceptResult struct {
	c   *Consumer
	err error
}

func (w *acceptWaiter) done(c *Consumer, err error) {
	select {
	case w.ch <- acceptResult{c, err}:
	default:
	}
}

// sessionEntity resolves a path for session receive.
func (b *Broker) sessionEntity(path string, o ConsumerOptions) (*entity, Path, error) {
	e, p, err := b.receivable(path, o)
	if err != nil {
		return nil, p, err
	}
	if p.Subqueue != SubqueueMain {
		return nil, p, errorf(ErrInvalidArgument, "dead-letter subqueues have no sessions; use NewConsumer on %q", path)
	}
	if !e.props().RequiresSession {
		return nil, p, errorf(ErrInvalidArgument, "%q does not require sessions", e.path())
	}
	return e, p, nil
}

// AcceptSession locks session id of a session-enabled queue or subscription
// and returns a consumer of its messages, in order. A session locked by
// another receiver is ErrSessionCannotBeLocked. Any id is accepted, with or
// without messages.
func (b *Broker) AcceptSession(ctx context.Context, path, id string, o ConsumerOptions) (*Consumer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(id) > MaxIDLength {
		return nil, errorf(ErrInvalidArgument, "session id is %d characters, more than %d", len(id), MaxIDLength)
	}
	e, p, err := b.sessionEntity(path, o)
	if err != nil {
		return nil, err
	}
	c := b.newConsumer(e, p, o)
	q := e.q
	w := &work{q: q}
	var lost *Consumer
	q.mu.Lock()
	if e.deleted.Load() {
		q.mu.Unlock()
		return nil, errorf(ErrNotFound, "%q was deleted", e.path())
	}
	s := q.session(id, true)
	if old := s.owner; old != nil && s.lockedUntil <= b.now().UnixNano() {
		// Expired, its deadline not yet run: end the old lock now.
		old.closed, old.credit = true, 0
		q.releaseSession(old, true, w)
		lost = old
	}
	if s.owner != nil {
		q.mu.Unlock()
		return nil, errorf(ErrSessionCannotBeLocked, "session %q of %q is locked by another receiver", id, e.path())
	}
	q.lockSession(s, c)
	q.mu.Unlock()
	b.finish(w)
	if lost != nil {
		lost.notifyLost(errorf(ErrSessionLockLost, "the lock on session %q of %q expired", id, e.path()))
	}
	return c, nil
}

// AcceptNextSession locks the next session that has available messages
// and no lock (sessions are rotated in the order they became available),
// waiting up to timeout (on the broker's clock) for one. With none in time
// it returns ErrTimeout.
func (b *Broker) AcceptNextSession(ctx context.Context, path string, timeout time.Duration, o ConsumerOptions) (*Consumer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, p, err := b.sessionEntity(path, o)
	if err != nil {
		return nil, err
	}
	q := e.q
	q.mu.Lock()
	if e.deleted.Load() {
		q.mu.Unlock()
		return nil, errorf(ErrNotFound, "%q was deleted", e.path())
	}
	s := q.nextReady()
	if s == nil && timeout <= 0 {
		// No consumer made, no error formatted: a receiver often asks
		// before the next session is in.
		if q.noSession == nil {
			q.noSession = errorf(ErrTimeout, "no session of %q is available", e.path())
		}
		err := q.noSession
		q.mu.Unlock()
		return nil, err
	}
	c := b.newConsumer(e, p, o) // allocation only, fine under q.mu
	if s != nil {
		q.lockSession(s, c)
		q.mu.Unlock()
		return c, nil
	}
	w := &acceptWaiter{c: c, ch: make(chan acceptResult, 1)}
	w.dl = deadline{index: -1, kind: dlWaiter, q: q, w: w}
	q.waiters = append(q.waiters, w)
	b.wheel.set(&w.dl, satNano(b.now().Add(timeout)))
	q.mu.Unlock()
	select {
	case r := <-w.ch:
		return r.c, r.err
	case <-ctx.Done():
		q.mu.Lock()
		i := slices.Index(q.waiters, w)
		if i >= 0 {
			q.waiters = slices.Delete(q.waiters, i, i+1)
		}
		q.mu.Unlock()
		b.wheel.remove(&w.dl)
		if i < 0 {
			if r := <-w.ch; r.c != nil {
				r.c.Close()
			}
		}
		return nil, ctx.Err()
	}
}

// handToWaiter gives s to the oldest waiting acceptor; q.mu is held.
func (q *qstate) handToWaiter(s *session) bool {
	if len(q.waiters) == 0 {
		return false
	}
	w := q.waiters[0]
	q.waiters = q.waiters[1:]
	q.b.wheel.remove(&w.dl)
	q.lockSession(s, w.c)
	w.done(w.c, nil)
	return true
}

func (q *qstate) onWaiterDeadline(w *acceptWaiter) {
	q.mu.Lock()
	i := slices.Index(q.waiters, w)
	if i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
	}
	q.mu.Unlock()
	if i >= 0 {
		w.done(nil, errorf(ErrTimeout, "no session of %q became available in time", q.ent.path()))
	}
}

// lockSession gives s to c; q.mu is held.
func (q *qstate) lockSession(s *session, c *Consumer) {
	s.owner = c
	s.lockedUntil = q.b.now().UnixNano() + int64(q.ent.props().LockDuration)
	q.linkSessionLock(s)
	c.sess = s
	q.consumers[SubqueueMain] = append(q.consumers[SubqueueMain], c)
}

// releaseSession ends c's hold on its session. Its locked messages return
// to the session, counting a delivery when the lock expired. q.mu is held.
func (q *qstate) releaseSession(c *Consumer, expired bool, w *work) {
	s := c.sess
	if s == nil || s.owner != c {
		return
	}
	q.unlinkSessionLock(s)
	s.owner, s.lockedUntil, s.ahead = nil, 0, nil
	cs := q.consumers[SubqueueMain]
	if i := slices.Index(cs, c); i >= 0 {
		q.consumers[SubqueueMain] = slices.Delete(cs, i, i+1)
	}
	var locked []*msgIdx
	for m := c.locked; m != nil; m = m.lk.next {
		locked = append(locked, m)
	}
	for _, m := range locked {
		q.unlock(m)
		if m.pending {
			continue
		}
		if expired {
			q.failedDelivery(m, nil, true, w)
		} else {
			q.route(m)
		}
	}
	q.maybeReady(s)
	q.gcSession(s)
}

// onSessionLockDeadline expires the session locks that are due.
func (q *qstate) onSessionLockDeadline(now int64) {
	w := &work{q: q}
	var lost []*Consumer
	q.mu.Lock()
	for h := q.sessHead; h != nil && h.lockedUntil <= now; h = q.sessHead {
		c := h.owner
		c.closed = true
		c.credit = 0
		q.releaseSession(c, true, w)
		lost = append(lost, c)
	}
	if q.sessHead != nil {
		q.b.wheel.set(&q.sessDL, q.sessHead.lockedUntil)
	}
	q.dispatch(w)
	q.mu.Unlock()
	q.b.finish(w)
	for _, c := range lost {
		q.b.obs.LockExpired(q.ent.path())
		c.notifyLost(errorf(ErrSessionLockLost, "the lock on session %q of %q expired", c.sess.id, q.ent.path()))
	}
}

// dispatchSessions feeds session consumers from their sessions; q.mu is held.
func (q *qstate) dispatchSessions(w *work, now int64) {
	for _, c := range q.consumers[SubqueueMain] {
		s := c.sess
		if s == nil || s.owner != c {
			continue
		}
		for c.credit > 0 && len(s.avail) > 0 {
			m := s.avail.peek()
			if m.expires != 0 && m.expires <= now {
				q.expire(m, w)
				continue
			}
			q.deliver(c, m, w, now)
		}
	}
}

// SessionID returns the id of a session consumer's session ("" otherwise).
func (c *Consumer) SessionID() string {
	if c.sess == nil {
		return ""
	}
	return c.sess.id
}

// LockedUntil returns when the session lock of a session consumer expires.
func (c *Consumer) LockedUntil() time.Time {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if c.sess == nil || c.sess.owner != c {
		return time.Time{}
	}
	return time.Unix(0, c.sess.lockedUntil).UTC()
}

// RenewSessionLock extends the session lock of a session consumer.
func (c *Consumer) RenewSessionLock() (time.Time, error) {
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.sess == nil {
		return time.Time{}, errorf(ErrInvalidArgument, "not a session consumer")
	}
	return q.renewSession(c.sess, c)
}

// renewSession extends s's lock (held by c, or by anyone when c is nil).
func (q *qstate) renewSession(s *session, c *Consumer) (time.Time, error) {
	now := q.b.now().UnixNano()
	if s.owner == nil || (c != nil && s.owner != c) || s.lockedUntil <= now {
		return time.Time{}, errorf(ErrSessionLockLost, "session %q of %q is not locked", s.id, q.ent.path())
	}
	q.unlinkSessionLock(s)
	s.lockedUntil = now + int64(q.ent.props().LockDuration)
	q.linkSessionLock(s)
	return time.Unix(0, s.lockedUntil).UTC(), nil
}

// sessionOf resolves a session of a session-enabled entity.
func (b *Broker) sessionOf(path, id string) (*qstate, error) {
	e, p, err := b.resolve(path)
	if err != nil {
		return nil, err
	}
	if p.Subqueue != SubqueueMain || !e.props().RequiresSession {
		return nil, errorf(ErrInvalidArgument, "%q does not have sessions", path)
	}
	if len(id) > MaxIDLength {
		return nil, errorf(ErrInvalidArgument, "session id is %d characters, more than %d", len(id), MaxIDLength)
	}
	return e.q, nil
}

// RenewSessionLock extends the lock of a locked session (the management
// operation; the lock may be held by any receiver).
func (b *Broker) RenewSessionLock(ctx context.Context, path, id string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	q, err := b.sessionOf(path, id)
	if err != nil {
		return time.Time{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sessions[id]
	if s == nil {
		return time.Time{}, errorf(ErrSessionLockLost, "session %q of %q is not locked", id, path)
	}
	return q.renewSession(s, nil)
}

// GetSessionState returns a session's state; nil when it has none.
func (b *Broker) GetSessionState(ctx context.Context, path, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := b.sessionOf(path, id)
	if err != nil {
		return nil, err
	}
	v, err := b.st.Get(ctx, keyS(kSession, q.ent.id, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(v) < 8 {
		return nil, errorf(errCorrupt, "session state record of %d bytes", len(v))
	}
	return v[8:], nil
}

// SetSessionState stores a session's state durably; an empty state clears
// it. The session must be locked (by any receiver) and the state must fit
// the entity's maximum message size. Calls for one session are applied one
// at a time, in the order their lock checks pass.
func (b *Broker) SetSessionState(ctx context.Context, path, id string, state []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q, err := b.sessionOf(path, id)
	if err != nil {
		return err
	}
	if max := q.ent.props().MaxMessageSizeKB * 1024; int64(len(state)) > max {
		return errorf(ErrMessageSizeExceeded, "session state of %d bytes is larger than the %d bytes %q allows", len(state), max, path)
	}
	if len(state) > 0 {
		if err := b.checkSpace(); err != nil {
			return err
		}
	}
	now := b.now()
	lost := func() error { return errorf(ErrSessionLockLost, "session %q of %q is not locked", id, path) }
	q.mu.Lock()
	s := q.sessions[id]
	if s == nil || s.owner == nil || s.lockedUntil <= now.UnixNano() {
		q.mu.Unlock()
		return lost()
	}
	s.stateWrites++
	if s.stateTurn == nil {
		s.stateTurn = make(chan struct{}, 1)
	}
	turn := s.stateTurn
	// end indexes the state once stored, lets the session go and passes
	// the turn on (after the index is updated: the next state's update
	// must come later).
	end := func(held, stored bool) {
		q.mu.Lock()
		s.stateWrites--
		if q.sessions[id] == s { // (not when the entity was dropped)
			if stored {
				s.hasState, s.stateUpdated = len(state) > 0, now.UnixNano()
			}
			q.gcSession(s)
		}
		q.mu.Unlock()
		if held {
			<-turn
		}
	}
	select {
	case turn <- struct{}{}:
		q.mu.Unlock()
	default:
		// Another state of this session is being stored. This one is
		// stored after it, so it checks the lock again then: a state
		// must not land after one set under a later lock.
		q.mu.Unlock()
		select {
		case turn <- struct{}{}:
		case <-ctx.Done():
			end(false, false)
			return ctx.Err()
		}
		now = b.now()
		q.mu.Lock()
		ok := q.sessions[id] == s && s.owner != nil && s.lockedUntil > now.UnixNano()
		q.mu.Unlock()
		if !ok {
			end(true, false)
			return lost()
		}
	}
	var bt batchBuf
	k := keyS(kSession, q.ent.id, id)
	if len(state) == 0 {
		bt.Delete(k)
	} else {
		bt.Set(k, append(encodeUint(uint64(now.UnixNano())), state...))
	}
	if err := b.commitWrites(ctx, q, &bt.Batch); err != nil {
		end(true, false)
		return err
	}
	end(true, true)
	return nil
}

// ListSessions returns, in id order, the sessions of a session-enabled
// entity that have messages or state (updatedSince zero), or whose state was
// set after updatedSince.
func (b *Broker) ListSessions(ctx context.Context, path string, updatedSince time.Time, skip, top int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q, err := b.sessionOf(path, "")
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	var ids []string
	for id, s := range q.sessions {
		if updatedSince.IsZero() {
			if s.count > 0 || s.hasState {
				ids = append(ids, id)
			}
		} else if s.hasState && s.stateUpdated > satNano(updatedSince) {
			ids = append(ids, id)
		}
	}
	q.mu.Unlock()
	sort.Strings(ids)
	return page(ids, skip, top), nil
}
