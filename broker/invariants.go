package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// checkInvariants verifies the in-memory index of every queue, topic and
// subscription against itself and against the store, and the deadline
// heap, and returns every violation found, joined (nil when none).
//
// It is meant for tests, at a quiescent point: no broker call in flight, no
// store commit pending. Some facts hold only then (no message is pending a
// commit, nothing is reserved for an uncommitted send, the index equals the
// store). It takes b.mu, then each queue's mu and the wheel's mu, in the
// broker's lock order; it reads the store outside every queue lock.
//
// What it checks, per entity with a qstate:
//   - every message record in the store is in q.msgs with the same
//     subqueue, state, delivery count, times, size, body reference and
//     session, and has a body record of that size, equal to its cached
//     copy; q.msgs has nothing else, and no body record is left without
//     its message;
//   - a record not in q.msgs is cold (pager.go): main subqueue, active,
//     at or beyond pg.from, and pg.cold counts them; no startup count runs
//     and no consumer has credit while some are cold;
//   - q.n[sub][state], q.size (the quota counter) and the sessions' counts
//     equal what q.msgs and the cold records hold; nothing is pending,
//     nothing reserved, no send is waiting to be published;
//   - every locked message is in q.locks under its token and in the right
//     lock list (the queue's, sorted by lockedUntil, or its session
//     consumer's); the lists link back and forth consistently;
//   - an available message (hidx ≥ 0) is active, unlocked, and at hidx in
//     its heap (the subqueue's, or its session's); every heap is a heap; no
//     active unlocked message is stranded outside its heap;
//   - the sessions with state are those with a stored session state,
//     updated at the stored time;
//   - every session with available messages and no owner is queued in
//     q.ready, and then no AcceptNextSession waits; an owned session is in
//     the session-lock list, and its owner points back to it;
//   - no consumer has credit while its subqueue (or its session) has
//     available messages: they would be stranded until the next dispatch;
//   - every scheduled message is armed in the wheel at its scheduled time,
//     every available main-subqueue message with a TTL at its expiry; no
//     other message deadline is armed; the lock lists' deadlines are armed
//     no later than their heads;
//   - sequence numbers and body references are below the entity's next
//     sequence number, which is within the persisted high-water mark.
//
// And the wheel: positions, heap order, and the timer armed no later than
// the earliest deadline.
func (b *Broker) checkInvariants() error {
	b.bg.Wait() // page-ins and startup counts end at a quiescent point
	b.mu.RLock()
	ents := make([]*entity, 0, len(b.byID))
	for _, e := range b.byID {
		ents = append(ents, e)
	}
	b.mu.RUnlock()
	sort.Slice(ents, func(i, j int) bool { return ents[i].id < ents[j].id })
	var errs []error
	for _, e := range ents {
		if e.deleted.Load() || e.q == nil {
			continue
		}
		errs = append(errs, b.checkEntity(e)...)
	}
	errs = append(errs, b.wheel.check()...)
	return errors.Join(errs...)
}

// storedMsg is a message as the store has it.
type storedMsg struct {
	mm      msgMeta
	bodyLen int64 // -1: no body record
}

// storedMessages reads the message and body records of entity e.
func (b *Broker) storedMessages(e *entity) (map[uint64]storedMsg, map[uint64]*Message, []error) {
	var errs []error
	msgs := map[uint64]storedMsg{}
	inline := map[uint64]*Message{} // message records inline, by body ref
	start, end := prefixRange(kMessage, e.id)
	err := b.st.Scan(context.Background(), start, end, func(k, v []byte) error {
		if len(k) != 18 {
			errs = append(errs, fmt.Errorf("message key %x has %d bytes", k, len(k)))
			return nil
		}
		seq := binary.BigEndian.Uint64(k[10:])
		mm, rec, err := decodeMetaRecord(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("message %d: %w", seq, err))
			return nil
		}
		bodyLen := int64(-1)
		if rec != nil {
			m, err := decodeMessage(bytes.Clone(rec))
			if err != nil {
				errs = append(errs, fmt.Errorf("message %d: inline record: %w", seq, err))
				return nil
			}
			inline[mm.bodyRef], bodyLen = m, int64(len(m.Body))
		}
		if byte(mm.sub) != k[9] {
			errs = append(errs, fmt.Errorf("message %d: record of subqueue %d under a key of subqueue %d", seq, mm.sub, k[9]))
		}
		if _, dup := msgs[seq]; dup {
			errs = append(errs, fmt.Errorf("message %d: records in two subqueues", seq))
		}
		msgs[seq] = storedMsg{mm: mm, bodyLen: bodyLen}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("scanning messages: %w", err))
	}
	bodies := map[uint64]*Message{}
	start, end = prefixRange(kBody, e.id)
	err = b.st.Scan(context.Background(), start, end, func(k, v []byte) error {
		if len(k) != 17 {
			errs = append(errs, fmt.Errorf("body key %x has %d bytes", k, len(k)))
			return nil
		}
		ref := binary.BigEndian.Uint64(k[9:])
		m, err := decodeMessage(bytes.Clone(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("body %d: %w", ref, err))
			return nil
		}
		bodies[ref] = m
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("scanning bodies: %w", err))
	}
	for seq, sm := range msgs {
		if m, ok := bodies[sm.mm.bodyRef]; ok {
			if sm.mm.inline {
				errs = append(errs, fmt.Errorf("message %d: its record is inline and under body key %d too", seq, sm.mm.bodyRef))
			}
			sm.bodyLen = int64(len(m.Body))
			msgs[seq] = sm
		}
	}
	for ref, m := range inline {
		bodies[ref] = m
	}
	return msgs, bodies, errs
}

// checkEntity checks one entity's qstate.
func (b *Broker) checkEntity(e *entity) []error {
	stored, bodies, serrs := b.storedMessages(e)
	var mark uint64
	var hasMark bool
	seqOwner := e
	if e.kind == kindSubscription {
		seqOwner = e.parent
	}
	// The durable high-water mark is the largest stored mark (index.go).
	// A batch writing a mark deletes the smaller ones; batches that commit
	// out of order may leave a smaller one behind until the next mark.
	start, end := prefixRange(kCounter, seqOwner.id)
	if err := b.st.Scan(context.Background(), start, end, func(k, _ []byte) error {
		if len(k) != 17 {
			return fmt.Errorf("counter key %x is not a mark", k)
		}
		mark, hasMark = max(mark, binary.BigEndian.Uint64(k[9:])), true
		return nil
	}); err != nil {
		serrs = append(serrs, fmt.Errorf("sequence marks: %w", err))
	}
	states := map[string]int64{} // stored session states: when set, by session
	start, end = prefixRange(kSession, e.id)
	if err := b.st.Scan(context.Background(), start, end, func(k, v []byte) error {
		if len(v) < 8 {
			serrs = append(serrs, fmt.Errorf("session state record %x of %d bytes", k, len(v)))
			return nil
		}
		states[string(k[9:])] = int64(binary.BigEndian.Uint64(v))
		return nil
	}); err != nil {
		serrs = append(serrs, fmt.Errorf("session states: %w", err))
	}

	q := e.q
	q.mu.Lock()
	defer q.mu.Unlock()
	b.wheel.mu.Lock()
	defer b.wheel.mu.Unlock()

	c := &checker{q: q, b: b}
	for _, err := range serrs {
		c.errorf("%v", err)
	}
	c.store(stored, bodies)
	c.messages()
	c.lockList()
	c.sessions()
	c.sessionStates(states)
	c.heaps()
	c.credit()
	c.deadlines()
	if sc := seqOwner.seq; sc != nil {
		sc.mu.Lock()
		next, reserved := sc.next, sc.reserved
		sc.mu.Unlock()
		// Numbers taken by a send that then failed may lie beyond the
		// mark (never used, so harmless); every stored one must not.
		if next == 0 {
			c.errorf("sequence counter: next is 0")
		}
		if hasMark && mark != reserved {
			c.errorf("sequence counter: persisted mark %d, in memory %d", mark, reserved)
		}
		for seq := range q.msgs {
			if seq > mark {
				c.errorf("sequence counter: message %d is beyond the durable mark %d", seq, mark)
			}
		}
		for seq, m := range q.msgs {
			if seq >= next || m.bodyRef >= next {
				c.errorf("message %d (body %d): not below the next sequence number %d", seq, m.bodyRef, next)
			}
		}
	}
	return c.errs
}

// checker accumulates the violations of one qstate; q.mu and the wheel's
// mu are held.
type checker struct {
	q    *qstate
	b    *Broker
	errs []error

	cold, coldSize int64 // cold records found by store
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", c.q.ent.path(), fmt.Sprintf(format, args...)))
}

// store compares q.msgs, and the cached bodies, with the records of the
// store.
func (c *checker) store(stored map[uint64]storedMsg, bodies map[uint64]*Message) {
	q := c.q
	refs := map[uint64]bool{}
	for seq, m := range q.msgs {
		refs[m.bodyRef] = true
		sm, ok := stored[seq]
		if !ok {
			c.errorf("message %d is in the index but not in the store", seq)
			continue
		}
		want, got := m.meta(), sm.mm
		want.inline = m.inline && !m.split // until a rewrite splits its records
		if got.sub != SubqueueMain {
			// A dead letter keeps the session id it had in its record;
			// only main-subqueue messages belong to sessions.
			got.sessionID = ""
		}
		if got != want {
			c.errorf("message %d: store has %+v, index has %+v", seq, got, want)
		}
		switch {
		case sm.bodyLen < 0:
			c.errorf("message %d: no body record %d", seq, m.bodyRef)
		case sm.bodyLen != int64(m.size):
			c.errorf("message %d: body of %d bytes, index says %d", seq, sm.bodyLen, m.size)
		}
		if cached := c.b.cache.get(m); cached != nil && bodies[m.bodyRef] != nil {
			if diff := messageDiff(cached, bodies[m.bodyRef]); diff != "" {
				c.errorf("message %d: the cached copy differs from the store in %s", seq, diff)
			}
		}
	}
	c.cold = 0
	c.coldSize = 0
	for seq, sm := range stored {
		if q.msgs[seq] != nil {
			continue
		}
		switch {
		case !q.paged(sm.mm.sub) || sm.mm.state != StateActive || q.pg.from == 0:
			c.errorf("message %d (%s, subqueue %d) is in the store but not in the index", seq, sm.mm.state, sm.mm.sub)
		case seq < q.pg.from:
			c.errorf("message %d is cold below the paging start %d", seq, q.pg.from)
		default:
			c.cold++
			c.coldSize += sm.mm.size
			refs[sm.mm.bodyRef] = true
		}
	}
	if c.cold != q.pg.cold {
		c.errorf("paging: %d cold records, pg.cold says %d", c.cold, q.pg.cold)
	}
	if len(q.order.pend) != 0 || len(q.order.held) != 0 {
		c.errorf("publication order: %d sequence numbers pending, %d messages held at a quiescent point",
			len(q.order.pend), len(q.order.held))
	}
	if q.pg.counting || q.pg.running || q.pg.scanning || len(q.pg.unpub) != 0 {
		c.errorf("paging: counting %v, running %v, scanning %v, %d unpublished at a quiescent point",
			q.pg.counting, q.pg.running, q.pg.scanning, len(q.pg.unpub))
	}
	for ref := range bodies {
		if !refs[ref] {
			c.errorf("body record %d belongs to no message", ref)
		}
	}
}

// messageDiff names the first stored field in which a and b differ ("" when
// none): the fields of a message record, not the broker-assigned ones.
func messageDiff(a, b *Message) string {
	switch {
	case !bytes.Equal(a.Body, b.Body):
		return "Body"
	case a.MessageID != b.MessageID || a.SessionID != b.SessionID || a.CorrelationID != b.CorrelationID ||
		a.To != b.To || a.ReplyTo != b.ReplyTo || a.ReplyToSessionID != b.ReplyToSessionID || a.Subject != b.Subject ||
		a.ContentType != b.ContentType || a.PartitionKey != b.PartitionKey || a.ViaPartitionKey != b.ViaPartitionKey:
		return "a system property"
	case a.DeadLetterSource != b.DeadLetterSource || a.EnqueueSequenceNumber != b.EnqueueSequenceNumber || a.hops != b.hops:
		return "its forwarding fields"
	case a.TimeToLive != b.TimeToLive || !a.ScheduledEnqueueTime.Equal(b.ScheduledEnqueueTime):
		return "TimeToLive or ScheduledEnqueueTime"
	case a.PropertiesModified != b.PropertiesModified || a.SystemPropertiesModified != b.SystemPropertiesModified:
		return "its modified flags"
	case fmt.Sprint(a.Properties) != fmt.Sprint(b.Properties):
		return fmt.Sprintf("Properties (%v, stored %v)", a.Properties, b.Properties)
	}
	return ""
}

// messages checks each message and the counters derived from them.
func (c *checker) messages() {
	q := c.q
	var n [3][3]int64
	var size int64
	locked := 0
	sessCount := map[*session]int{}
	sessionful := q.sessionful()
	for seq, m := range q.msgs {
		if m.seq != seq {
			c.errorf("message %d is filed under %d", m.seq, seq)
		}
		if m.sub > SubqueueTransferDeadLetter || m.state > StateScheduled {
			c.errorf("message %d: subqueue %d state %d", seq, m.sub, m.state)
			continue
		}
		n[m.sub][m.state]++
		size += int64(m.size)
		if m.pending {
			c.errorf("message %d is pending a commit at a quiescent point", seq)
		}
		if m.state == StateScheduled && (m.sub != SubqueueMain || m.scheduled == 0) {
			c.errorf("message %d: scheduled in subqueue %d at %d", seq, m.sub, m.scheduled)
		}
		switch {
		case m.sub == SubqueueMain && sessionful:
			if m.sess == nil {
				c.errorf("message %d of a session-enabled entity has no session", seq)
			} else {
				sessCount[m.sess]++
				if q.sessions[m.sess.id] != m.sess {
					c.errorf("message %d: its session %q is not the entity's", seq, m.sess.id)
				}
			}
		case m.sess != nil:
			c.errorf("message %d in subqueue %d has session %q", seq, m.sub, m.sess.id)
		}
		if m.lk != nil { // (an unlocked message has no lock state at all)
			locked++
			c.lockedMessage(m)
		}
		available := m.hidx >= 0
		if available && (m.lk != nil || m.pending || m.state != StateActive) {
			c.errorf("message %d is available (hidx %d) and also locked %v, pending %v or %s", seq, m.hidx, m.lk != nil, m.pending, m.state)
		}
		if !available && m.lk == nil && !m.pending && m.state == StateActive {
			c.errorf("message %d is active, unlocked and not available: stranded", seq)
		}
		if available {
			h := &q.avail[m.sub]
			if m.sub == SubqueueMain && m.sess != nil {
				h = &m.sess.avail
			}
			if int(m.hidx) >= len(*h) || (*h)[m.hidx] != m {
				c.errorf("message %d has hidx %d but is not there in its heap", seq, m.hidx)
			}
		}
	}
	n[SubqueueMain][StateActive] += c.cold
	size += c.coldSize
	if n != q.n {
		c.errorf("counts by subqueue and state: index and cold records hold %v, counters say %v", n, q.n)
	}
	if size != q.size {
		c.errorf("size: messages hold %d bytes, counter says %d", size, q.size)
	}
	if q.reserved != 0 {
		c.errorf("%d bytes reserved at a quiescent point", q.reserved)
	}
	if locked != len(q.locks) {
		c.errorf("%d locked messages, %d lock tokens", locked, len(q.locks))
	}
	for t, m := range q.locks {
		if q.msgs[m.seq] != m || m.lk.token != t || m.lk == nil {
			c.errorf("lock token %v maps to message %d (token %v, lockedUntil %d, indexed %v)", t, m.seq, m.lk.token, m.lockedUntil(), q.msgs[m.seq] == m)
		}
	}
	for s, k := range sessCount {
		if s.count != k {
			c.errorf("session %q counts %d messages, holds %d", s.id, s.count, k)
		}
	}
	for _, s := range q.sessions {
		if sessCount[s] == 0 && s.count != 0 {
			c.errorf("session %q counts %d messages, holds none", s.id, s.count)
		}
	}
}

// lockedMessage checks that locked m is in the right lock list.
func (c *checker) lockedMessage(m *msgIdx) {
	q := c.q
	if q.locks[m.lk.token] != m {
		c.errorf("message %d is locked but not in q.locks under its token %v", m.seq, m.lk.token)
	}
	if o := m.owner(); o != nil && o.sess != nil {
		if !o.hasLocked(m) {
			c.errorf("message %d is locked by a session consumer but not in its list", m.seq)
		}
		return
	}
	if !q.lockListHas(m) {
		c.errorf("message %d is locked but not in the queue's lock list", m.seq)
	}
}

func (o *Consumer) hasLocked(m *msgIdx) bool {
	for x, i := o.locked, 0; x != nil && i <= len(o.q.msgs); x, i = x.lk.next, i+1 {
		if x == m {
			return true
		}
	}
	return false
}

func (q *qstate) lockListHas(m *msgIdx) bool {
	for x, i := q.lockHead, 0; x != nil && i <= len(q.msgs); x, i = x.lk.next, i+1 {
		if x == m {
			return true
		}
	}
	return false
}

// lockList checks the queue's lock list and the session consumers' lists.
func (c *checker) lockList() {
	q := c.q
	var prev *msgIdx
	n := 0
	for m := q.lockHead; m != nil; m = m.lk.next {
		if n++; n > len(q.msgs) {
			c.errorf("the lock list has a cycle or more nodes than messages")
			return
		}
		if m.lk.prev != prev {
			c.errorf("lock list: message %d links back to the wrong node", m.seq)
		}
		if q.msgs[m.seq] != m || m.lk == nil {
			c.errorf("lock list: message %d is not an indexed locked message", m.seq)
		}
		if m.owner() != nil && m.owner().sess != nil {
			c.errorf("lock list: message %d belongs to a session consumer's list", m.seq)
		}
		if prev != nil && prev.lockedUntil() > m.lockedUntil() {
			c.errorf("lock list: message %d (until %d) after message %d (until %d): not sorted", m.seq, m.lockedUntil(), prev.seq, prev.lockedUntil())
		}
		prev = m
	}
	if q.lockTail != prev {
		c.errorf("lock list: tail is not the last node")
	}
	if q.lockHead != nil {
		if !c.armed(&q.lockDL) || q.lockDL.when > q.lockHead.lockedUntil() {
			c.errorf("lock list: deadline armed %v at %d, after the head's expiry %d", c.armed(&q.lockDL), q.lockDL.when, q.lockHead.lockedUntil())
		}
	}
}

// sessions checks sessions, the ready queue and the session-lock list.
func (c *checker) sessions() {
	q := c.q
	inReady := map[*session]int{}
	for _, s := range q.ready {
		inReady[s]++
		if !s.inReady {
			c.errorf("session %q is in the ready queue without its inReady flag", s.id)
		}
	}
	for s, k := range inReady {
		if k > 1 {
			c.errorf("session %q is %d times in the ready queue", s.id, k)
		}
	}
	owned := 0
	for id, s := range q.sessions {
		if s.id != id {
			c.errorf("session %q is filed under %q", s.id, id)
		}
		if s.inReady && inReady[s] == 0 {
			c.errorf("session %q has inReady set but is not in the ready queue", id)
		}
		if s.owner == nil {
			if s.lockedUntil != 0 {
				c.errorf("session %q has no owner but a lock until %d", id, s.lockedUntil)
			}
			if len(s.avail) > 0 && inReady[s] == 0 {
				c.errorf("session %q has %d available messages and no owner but is not in the ready queue", id, len(s.avail))
			}
			if s.count == 0 && !s.hasState && len(s.avail) == 0 {
				c.errorf("session %q is empty, unlocked and stateless but kept", id)
			}
		} else {
			owned++
			if s.owner.sess != s {
				c.errorf("session %q: its owner consumes another session", id)
			}
			if s.lockedUntil == 0 {
				c.errorf("session %q is owned but not locked", id)
			}
			if s.owner.closed {
				c.errorf("session %q is owned by a closed consumer", id)
			}
			if !containsConsumer(q.consumers[SubqueueMain], s.owner) {
				c.errorf("session %q: its owner is not among the entity's consumers", id)
			}
		}
		c.ownerList(s)
	}
	var prev *session
	n := 0
	for s := q.sessHead; s != nil; s = s.lnext {
		if n++; n > len(q.sessions) {
			c.errorf("the session-lock list has a cycle or more nodes than sessions")
			return
		}
		if s.lprev != prev {
			c.errorf("session-lock list: session %q links back to the wrong node", s.id)
		}
		if s.owner == nil || q.sessions[s.id] != s {
			c.errorf("session-lock list: session %q is not an owned session of the entity", s.id)
		}
		if prev != nil && prev.lockedUntil > s.lockedUntil {
			c.errorf("session-lock list: session %q (until %d) after %q (until %d): not sorted", s.id, s.lockedUntil, prev.id, prev.lockedUntil)
		}
		prev = s
	}
	if q.sessTail != prev {
		c.errorf("session-lock list: tail is not the last node")
	}
	if n != owned {
		c.errorf("session-lock list holds %d sessions, %d are owned", n, owned)
	}
	if q.sessHead != nil && (!c.armed(&q.sessDL) || q.sessDL.when > q.sessHead.lockedUntil) {
		c.errorf("session-lock list: deadline armed %v at %d, after the head's expiry %d", c.armed(&q.sessDL), q.sessDL.when, q.sessHead.lockedUntil)
	}
	for _, w := range q.waiters {
		if !c.armed(&w.dl) {
			c.errorf("an AcceptNextSession waiter has no deadline armed")
		}
	}
	if len(q.waiters) > 0 {
		for id, s := range q.sessions {
			if s.owner == nil && len(s.avail) > 0 {
				c.errorf("session %q is available while %d AcceptNextSession calls wait", id, len(q.waiters))
			}
		}
	}
	if !q.sessionful() && (len(q.sessions) > 0 || len(q.ready) > 0) {
		c.errorf("an entity without sessions has %d sessions, %d ready", len(q.sessions), len(q.ready))
	}
}

// sessionStates compares the sessions' state flags and times with the
// stored session states: a session whose state is stored must be indexed
// (ListSessions lists it), and no state set on a call in flight.
func (c *checker) sessionStates(stored map[string]int64) {
	q := c.q
	for id, at := range stored {
		s := q.sessions[id]
		switch {
		case s == nil || !s.hasState:
			c.errorf("session %q has a stored state but the index says it has none", id)
		case s.stateUpdated != at:
			c.errorf("session %q: state stored at %d, the index says %d", id, at, s.stateUpdated)
		}
	}
	for id, s := range q.sessions {
		if _, ok := stored[id]; s.hasState && !ok {
			c.errorf("session %q has state in the index but none stored", id)
		}
		if s.stateWrites != 0 {
			c.errorf("session %q has %d state writes in flight at a quiescent point", id, s.stateWrites)
		}
	}
}

func containsConsumer(cs []*Consumer, c *Consumer) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// ownerList checks the locked-message list of s's owner.
func (c *checker) ownerList(s *session) {
	o := s.owner
	if o == nil {
		return
	}
	var prev *msgIdx
	n := 0
	for m := o.locked; m != nil; m = m.lk.next {
		if n++; n > len(c.q.msgs) {
			c.errorf("session %q: the owner's lock list has a cycle", s.id)
			return
		}
		if m.lk.prev != prev {
			c.errorf("session %q: message %d links back to the wrong node", s.id, m.seq)
		}
		if m.owner() != o || m.lk == nil || c.q.msgs[m.seq] != m {
			c.errorf("session %q: message %d in the owner's list is not locked by it", s.id, m.seq)
		}
		if m.sess != s {
			c.errorf("session %q: message %d of another session in the owner's list", s.id, m.seq)
		}
		prev = m
	}
}

// heaps checks the availability heaps.
func (c *checker) heaps() {
	q := c.q
	for sub := range q.avail {
		c.heap(fmt.Sprintf("subqueue %d", sub), q.avail[sub], func(m *msgIdx) bool {
			return m.sub == Subqueue(sub) && (m.sub != SubqueueMain || m.sess == nil)
		})
	}
	for id, s := range q.sessions {
		c.heap(fmt.Sprintf("session %q", id), s.avail, func(m *msgIdx) bool {
			return m.sub == SubqueueMain && m.sess == s
		})
	}
}

func (c *checker) heap(name string, h seqHeap, belongs func(*msgIdx) bool) {
	for i, m := range h {
		if m == nil {
			c.errorf("%s heap: nil at %d", name, i)
			continue
		}
		if int(m.hidx) != i {
			c.errorf("%s heap: message %d at %d has hidx %d", name, m.seq, i, m.hidx)
		}
		if c.q.msgs[m.seq] != m || !belongs(m) {
			c.errorf("%s heap: message %d does not belong here", name, m.seq)
		}
		if i > 0 && h[(i-1)/2] != nil && h[(i-1)/2].seq > m.seq {
			c.errorf("%s heap: message %d under %d breaks the heap order", name, m.seq, h[(i-1)/2].seq)
		}
	}
}

// credit checks that no open consumer with credit is left beside
// available messages it could take.
func (c *checker) credit() {
	q := c.q
	if !q.ent.props().Status.canReceive() {
		return
	}
	for sub, cs := range q.consumers {
		for _, x := range cs {
			if x.closed || x.credit == 0 {
				continue
			}
			if s := x.sess; s != nil {
				if s.owner == x && len(s.avail) > 0 {
					c.errorf("a consumer of session %q has %d credit while %d of its messages are available", s.id, x.credit, len(s.avail))
				}
			} else if len(q.avail[sub]) > 0 {
				c.errorf("a consumer of subqueue %d has %d credit while %d messages are available", sub, x.credit, len(q.avail[sub]))
			} else if q.paged(Subqueue(sub)) && q.pg.from != 0 {
				c.errorf("a consumer of subqueue %d has %d credit while messages from %d are cold", sub, x.credit, q.pg.from)
			}
		}
	}
}

// armed reports whether d is in the wheel; the wheel's mu is held.
func (c *checker) armed(d *deadline) bool {
	h := c.b.wheel.h
	return d.index >= 0 && int(d.index) < len(h) && h[d.index] == d
}

// deadlines checks the message deadlines of q against the wheel.
func (c *checker) deadlines() {
	q := c.q
	for seq, m := range q.msgs {
		armed := m.dl != nil && c.armed(m.dl)
		if m.dl != nil && (m.dl.m != m || m.dl.q != q || m.dl.kind != dlMessage) {
			c.errorf("message %d: its deadline belongs to something else", seq)
		}
		switch {
		case m.state == StateScheduled:
			if !armed || m.dl.when != m.scheduled {
				c.errorf("message %d is scheduled at %d but its activation is not armed then (armed %v)", seq, m.scheduled, armed)
			}
		case m.hidx >= 0 && m.sub == SubqueueMain && m.expires != 0:
			if !armed || m.dl.when != m.expires {
				c.errorf("message %d is available and expires at %d but its expiry is not armed then (armed %v)", seq, m.expires, armed)
			}
		case armed && !(m.state == StateActive && m.sub == SubqueueMain && m.expires != 0 && m.dl.when == m.expires):
			c.errorf("message %d (%s, subqueue %d) has a stray deadline at %d", seq, m.state, m.sub, m.dl.when)
		}
	}
	for _, d := range c.b.wheel.h {
		if d.q != q || d.kind != dlMessage {
			continue
		}
		if d.m == nil || q.msgs[d.m.seq] != d.m || d.m.dl != d {
			c.errorf("a message deadline at %d is armed for a message the index no longer holds", d.when)
		}
	}
}

// check verifies the heap of the wheel.
func (w *wheel) check() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for i, d := range w.h {
		if int(d.index) != i {
			errs = append(errs, fmt.Errorf("wheel: deadline at %d has index %d", i, d.index))
		}
		if i > 0 && w.h[(i-1)/2].when > d.when {
			errs = append(errs, fmt.Errorf("wheel: deadline %d at %d under %d breaks the heap order", i, d.when, w.h[(i-1)/2].when))
		}
	}
	if len(w.h) > 0 && !w.closed && (w.armedAt == 0 || w.armedAt > w.h[0].when) {
		errs = append(errs, fmt.Errorf("wheel: timer armed at %d, earliest deadline %d", w.armedAt, w.h[0].when))
	}
	return errs
}
