package broker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/busbar-io/busbar/store"
)

// qstate holds the messages of one queue or subscription (its main,
// dead-letter and transfer dead-letter subqueues). mu guards every field.
type qstate struct {
	mu  sync.Mutex
	ent *entity
	b   *Broker

	msgs     map[uint64]*msgIdx
	avail    [3]seqHeap // available non-session messages per subqueue
	sessions map[string]*session
	ready    []*session // sessions with available messages and no lock, FIFO
	locks    map[LockToken]*msgIdx
	// freeLocks holds the msgLocks of messages unlocked, for the next
	// locks (at most maxFreeLocks); nothing keeps a msgLock once its
	// message is unlocked.
	freeLocks []*msgLock
	// slab holds the Messages deliver copies deliveries into (see
	// deliveryCopy).
	slab []Message

	lockHead, lockTail *msgIdx // non-session locks, by lockedUntil
	lockDL             deadline
	sessHead, sessTail *session // session locks, by lockedUntil
	sessDL             deadline

	consumers [3][]*Consumer // non-session consumers per subqueue
	rr        [3]int
	waiters   []*acceptWaiter // accept-next-session requests, oldest first
	noSession error           // AcceptNextSession's answer when none is ready, made once

	n        [3][3]int64 // message counts by subqueue and state
	size     int64       // bytes of all messages
	reserved int64       // bytes of sends not yet committed
	peak     int         // largest len(msgs) since msgs was last rebuilt
	pg       pager       // the backlog beyond a window stays on disk (pager.go)
	order    pubOrder    // new messages become available in sequence order (order.go)

	// held keeps the message deadlines that came due while the entity was
	// being read (dormant): Load and recovery run them once it is.
	held []*deadline

	// Settlements waiting to be combined (settle.go). smu guards sq and
	// taking; it is taken after mu or alone.
	smu    sync.Mutex
	sq     []*settleReq
	taking bool // a caller will take sq once it holds mu

	// A delete stops the sends that write records of the entity
	// (stopWrites): deleting, set under mu, refuses those that would start
	// to (txn.hold); writes counts those that already do until their
	// commit ends, for the delete to wait for them.
	deleting atomic.Bool
	writes   sync.WaitGroup
}

// stopWrites marks q's entity as being deleted, so that no send starts to
// write records of it any more; waitWrites then waits for those that
// already do. The delete's range deletions must be committed after all of
// their records, or those would outlive the entity: recovery loads only
// known entities and never reclaims them.
func (q *qstate) stopWrites() {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.deleting.Store(true)
	q.mu.Unlock()
}

func (q *qstate) waitWrites() {
	if q != nil {
		q.writes.Wait()
	}
}

// beginWrite registers a writer of records of q's entity, which a delete
// waits for (waitWrites), or refuses it while the entity is being deleted;
// q.mu is held. endWrite ends it once the writer's commit has ended.
func (q *qstate) beginWrite() error {
	if q.deleting.Load() {
		return errorf(ErrNotFound, "%s %q is being deleted", q.ent.kind, q.ent.path())
	}
	q.writes.Add(1)
	return nil
}

func (q *qstate) endWrite() { q.writes.Done() }

// commitWrites commits bt, which writes records of q's entity, as a writer
// of them (beginWrite): a delete that began before refuses it, one that
// begins meanwhile waits for it. q.mu is not held.
func (b *Broker) commitWrites(ctx context.Context, q *qstate, bt *store.Batch) error {
	q.mu.Lock()
	err := q.beginWrite()
	q.mu.Unlock()
	if err != nil {
		return err
	}
	defer q.endWrite()
	return b.commit(ctx, bt)
}

// resumeWrites undoes stopWrites when the delete failed.
func (q *qstate) resumeWrites() {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.deleting.Store(false)
	q.mu.Unlock()
}

func newQState(b *Broker, e *entity) *qstate {
	q := &qstate{ent: e, b: b, msgs: map[uint64]*msgIdx{}, sessions: map[string]*session{}, locks: map[LockToken]*msgIdx{}}
	q.lockDL = deadline{index: -1, kind: dlLocks, q: q}
	q.sessDL = deadline{index: -1, kind: dlSessLocks, q: q}
	return q
}

func (q *qstate) sessionful() bool { return q.ent.props().RequiresSession }

// session returns (creating if asked) the session id.
func (q *qstate) session(id string, create bool) *session {
	s := q.sessions[id]
	if s == nil && create {
		s = &session{id: id}
		q.sessions[id] = s
	}
	return s
}

// gcSession forgets a session with nothing left in it.
func (q *qstate) gcSession(s *session) {
	if s.count == 0 && !s.hasState && s.owner == nil && len(s.avail) == 0 && s.stateWrites == 0 {
		delete(q.sessions, s.id)
	}
}

// insert adds a committed message to the index and routes it.
func (q *qstate) insert(m *msgIdx) {
	m.hidx = -1
	q.msgs[m.seq] = m
	q.peak = max(q.peak, len(q.msgs))
	q.n[m.sub][m.state]++
	q.size += int64(m.size)
	if m.sub == SubqueueMain && m.sess != nil {
		m.sess.count++
	}
	q.route(m)
}

// route puts a message where its state says: available, or waiting on a
// deadline (scheduled), or nowhere (deferred).
func (q *qstate) route(m *msgIdx) {
	switch {
	case m.state == StateScheduled:
		q.setDeadline(m, m.scheduled)
	case m.state == StateDeferred:
	default:
		if m.sub == SubqueueMain && m.expires != 0 {
			q.setDeadline(m, m.expires)
		}
		q.makeAvailable(m)
	}
}

func (q *qstate) setDeadline(m *msgIdx, when int64) {
	if m.dl == nil {
		m.dl = &deadline{index: -1, kind: dlMessage, q: q, m: m}
	}
	q.b.wheel.setOrdered(m.dl, when, m.seq)
}

func (q *qstate) clearDeadline(m *msgIdx) {
	if m.dl != nil {
		q.b.wheel.remove(m.dl)
		m.dl = nil
	}
}

func (q *qstate) makeAvailable(m *msgIdx) {
	if m.sub == SubqueueMain && m.sess != nil {
		m.sess.avail.push(m)
		q.maybeReady(m.sess)
		return
	}
	q.avail[m.sub].push(m)
}

func (q *qstate) unavailable(m *msgIdx) {
	if m.hidx < 0 {
		return
	}
	if m.sub == SubqueueMain && m.sess != nil {
		m.sess.avail.remove(m)
	} else {
		q.avail[m.sub].remove(m)
	}
}

// remove deletes a message from the index.
func (q *qstate) remove(m *msgIdx) {
	if q.msgs[m.seq] != m {
		return
	}
	q.unavailable(m)
	q.unlock(m)
	q.clearDeadline(m)
	delete(q.msgs, m.seq)
	q.removed(m.seq)
	q.n[m.sub][m.state]--
	q.size -= int64(m.size)
	if q.peak > 4096 && len(q.msgs) < q.peak/8 {
		// Go maps do not shrink: after a large backlog drains, rebuild.
		msgs := make(map[uint64]*msgIdx, len(q.msgs))
		for k, v := range q.msgs {
			msgs[k] = v
		}
		q.msgs, q.peak = msgs, len(msgs)
	}
	if s := m.sess; s != nil && m.sub == SubqueueMain {
		s.count--
		q.gcSession(s)
	}
}

// setPlace changes a message's subqueue and state, keeping counts right.
func (q *qstate) setPlace(m *msgIdx, sub Subqueue, st MessageState) {
	q.n[m.sub][m.state]--
	if m.sess != nil && m.sub == SubqueueMain && sub != SubqueueMain {
		m.sess.count--
		s := m.sess
		m.sess = nil
		q.gcSession(s)
	}
	m.sub, m.state = sub, st
	q.n[sub][st]++
}

// lock locks m for c until `until`.
func (q *qstate) lock(m *msgIdx, c *Consumer, until int64) {
	q.unavailable(m)
	var lk *msgLock
	if n := len(q.freeLocks); n > 0 {
		lk = q.freeLocks[n-1]
		q.freeLocks[n-1] = nil
		q.freeLocks = q.freeLocks[:n-1]
	} else {
		lk = new(msgLock)
	}
	*lk = msgLock{until: until, token: q.b.newToken(), owner: c}
	m.lk = lk
	q.locks[lk.token] = m
	if c != nil && c.sess != nil {
		c.linkLocked(m)
		return
	}
	q.linkLock(m)
}

// unlock drops m's lock (if any) without making it available.
func (q *qstate) unlock(m *msgIdx) {
	if m.lk == nil {
		return
	}
	delete(q.locks, m.lk.token)
	if o := m.lk.owner; o != nil && o.sess != nil {
		o.unlinkLocked(m)
	} else {
		q.unlinkLock(m)
	}
	if len(q.freeLocks) < maxFreeLocks {
		*m.lk = msgLock{}
		q.freeLocks = append(q.freeLocks, m.lk)
	}
	m.lk = nil
}

// maxFreeLocks bounds a queue's free msgLocks: every peek-lock delivery
// takes one and its settlement gives it back, so a busy queue locks without
// allocating.
const maxFreeLocks = 256

// linkLock inserts m into the lock list, kept sorted by lockedUntil
// (normally an append), and arms the list's deadline.
func (q *qstate) linkLock(m *msgIdx) {
	if linkSorted(&q.lockHead, &q.lockTail, m) {
		q.b.wheel.set(&q.lockDL, m.lk.until)
	}
}

// unlinkLock removes m from the lock list. The list deadline is left armed:
// when it fires early it re-arms for the new head (cheaper than moving it
// on every settlement).
func (q *qstate) unlinkLock(m *msgIdx) { unlinkSorted(&q.lockHead, &q.lockTail, m) }

// maybeReady queues a session for accept-next when it has available
// messages and no lock, handing it to a waiting acceptor if there is one.
func (q *qstate) maybeReady(s *session) {
	if s.owner != nil || len(s.avail) == 0 || s.inReady {
		return
	}
	if q.handToWaiter(s) {
		return
	}
	s.inReady = true
	q.ready = append(q.ready, s)
}

// nextReady pops the next lockable session with available messages.
func (q *qstate) nextReady() *session {
	for len(q.ready) > 0 {
		s := q.ready[0]
		q.ready[0] = nil
		q.ready = q.ready[1:]
		s.inReady = false
		if s.owner == nil && len(s.avail) > 0 && q.sessions[s.id] == s {
			return s
		}
	}
	return nil
}

// linkSessionLock inserts s into the session-lock list, sorted by
// lockedUntil, and arms the list's deadline when s is its new head.
func (q *qstate) linkSessionLock(s *session) {
	if linkSorted(&q.sessHead, &q.sessTail, s) {
		q.b.wheel.set(&q.sessDL, s.lockedUntil)
	}
}

// unlinkSessionLock removes s from the session-lock list.
func (q *qstate) unlinkSessionLock(s *session) { unlinkSorted(&q.sessHead, &q.sessTail, s) }

// counts returns the runtime counts.
func (q *qstate) counts(ri *RuntimeInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ri.ActiveMessageCount += q.n[SubqueueMain][StateActive]
	ri.DeferredMessageCount += q.n[SubqueueMain][StateDeferred]
	ri.ScheduledMessageCount += q.n[SubqueueMain][StateScheduled]
	for st := range 3 {
		ri.DeadLetterMessageCount += q.n[SubqueueDeadLetter][st]
		ri.TransferDeadLetterMessageCount += q.n[SubqueueTransferDeadLetter][st]
	}
	ri.TotalMessageCount += int64(len(q.msgs)) + q.pg.cold
	ri.SizeInBytes += q.size
}
