package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/busbar-io/busbar/store"
)

type moveKind uint8

const (
	mvRewrite  moveKind = iota + 1 // rewrite the record (place, state, count, properties)
	mvDelete                       // delete the message
	mvForward                      // delete here, send to fwd (dead-letter forwarding)
	mvActivate                     // scheduled → active under a new sequence number
	mvRetry                        // nothing written: try the activation again later
	mvReturn                       // nothing written: unlock the message and return it
)

// move is a change to one message that needs a store commit. It is
// decided under q.mu, where the message is marked pending so that nothing
// else changes it, without any store I/O; runMoves then prepares it outside
// the lock (reading the stored message when its content changes or it is
// forwarded), commits it and applies it to the index.
type move struct {
	q          *qstate
	m          *msgIdx
	kind       moveKind
	sub        Subqueue
	state      MessageState
	deliveries uint32
	props      map[string]any // application properties to merge into the message
	dlReason   string         // with setDL: dead-letter properties to set
	dlDesc     string
	setDL      bool
	needBody   bool     // the message itself is needed (forwarding)
	msg        *Message // prepared content; nil when unchanged
	meta       []byte   // index record for mvRewrite, mvActivate (and mvForward's fallback)
	hdr        []byte   // message record when msg changed
	fwd        *entity
	newSeq     uint64
	mark       uint64 // sequence high-water mark to write with an activation (index.go)
	transfer   bool   // mvForward of an activated scheduled message (auto-forwarding)
	ordered    bool   // mvActivate whose newSeq is in q's publication order (order.go)
	enqueued   int64
	expires    int64
	reason     string
	req        *settleReq // the settlement this move belongs to; nil for the broker's own
	dropped    bool       // not committed: its preparation or its settlement failed
}

// newMove builds a move of m in w's queue; q.mu is held. It cannot fail:
// everything that can (reading and re-encoding the message) happens in
// prepare. Moves come from w's slab: a settlement of n messages makes one
// allocation for its moves, not n.
func (w *work) newMove(m *msgIdx, kind moveKind, sub Subqueue, st MessageState, d uint32) *move {
	if len(w.slab) == cap(w.slab) {
		if w.moves == nil {
			w.moves = make([]*move, 0, w.slabHint)
		}
		w.slab = make([]move, 0, max(1, w.slabHint))
		w.slabHint = 0 // a second slab is sized by need, one move at a time
	}
	w.slab = append(w.slab, move{q: w.q, m: m, kind: kind, sub: sub, state: st, deliveries: d,
		enqueued: m.enqueued, expires: m.expires, newSeq: m.seq})
	mv := &w.slab[len(w.slab)-1]
	if kind == mvRewrite || kind == mvForward {
		mm := m.meta()
		mm.sub, mm.state, mm.deliveries = sub, st, d
		if kind == mvForward {
			mm.sub, mm.state = SubqueueDeadLetter, StateActive
		}
		mv.meta = encodeMeta(&mm)
	}
	m.pending = true
	return mv
}

// prepare reads and changes the stored message when the move needs it; no
// lock is held. The message is pending, so nothing else changes it.
func (mv *move) prepare() error {
	// A rewrite of an inline message splits its records: its message
	// record moves to its body key (write), so it is read here.
	split := mv.m.inline && !mv.m.split && (mv.kind == mvRewrite || mv.kind == mvForward)
	if len(mv.props) == 0 && !mv.setDL && !mv.needBody && !split {
		return nil
	}
	base, err := mv.q.b.loadBody(mv.q.ent.id, mv.m)
	if err != nil {
		return err
	}
	changed := len(mv.props) > 0 || mv.setDL
	if !changed {
		mv.msg = base
		if split {
			mv.hdr, err = encodeMessage(base)
		}
		return err
	}
	c := *base
	if len(mv.props) > 0 {
		c.Properties = maps.Clone(base.Properties)
		if c.Properties == nil {
			c.Properties = map[string]any{}
		}
		maps.Copy(c.Properties, mv.props)
		c.PropertiesModified = true
	}
	if mv.setDL {
		setDeadLetterProps(&c, mv.dlReason, mv.dlDesc)
	}
	mv.msg = &c
	// A forward that fails falls back to a rewrite in place (runMoves),
	// which must store the changed message too.
	if mv.kind == mvRewrite || mv.kind == mvForward {
		if mv.hdr, err = encodeMessage(&c); err != nil {
			return err
		}
	}
	return nil
}

// write stores a rewritten message's records: its index record, and its
// message record when it changed or was inline (prepare encoded it).
func (mv *move) write(bt *batchBuf) {
	mv.m.wroteAgain()
	id := mv.q.ent.id
	if mv.sub != mv.m.sub {
		bt.Delete(bt.msgKey(id, mv.m.sub, mv.m.seq))
	}
	bt.Set(bt.msgKey(id, mv.sub, mv.m.seq), mv.meta)
	if mv.hdr != nil {
		bt.Set(bt.bodyKey(id, mv.m.bodyRef), mv.hdr)
	}
}

// runMoves prepares moves, commits them and applies them to the index. A
// settlement whose move cannot be prepared fails alone, as a whole: none of
// its moves is committed. It returns the commit's error.
func (b *Broker) runMoves(w *work, moves []*move) error {
	for _, mv := range moves {
		if err := mv.prepare(); err != nil {
			mv.dropped = true
			if mv.req != nil && mv.req.err == nil {
				mv.req.err = err
			}
			if mv.req == nil {
				b.log.Error("cannot read a message to change it; it is left as it is", "entity", mv.q.ent.path(), "seq", mv.m.seq, "err", err)
			}
		}
	}
	tx := b.newTxn(context.Background())
	tx.bt.Ops = make([]store.Op, 0, 2*len(moves)) // most moves write two records
	// Moves that write records of their entity (not deletions, nor those
	// that write nothing) hold it: a delete of the entity waits for their
	// commit, or, begun already, fails them, so that no record outlives
	// the entity.
	for _, mv := range moves {
		if mv.dropped || mv.kind == mvDelete || mv.kind == mvReturn || mv.kind == mvRetry || slices.Contains(tx.writing, mv.q) {
			continue
		}
		mv.q.mu.Lock()
		err := tx.hold(mv.q)
		mv.q.mu.Unlock()
		if err != nil {
			mv.dropped = true
			if mv.req != nil && mv.req.err == nil {
				mv.req.err = err
			}
		}
	}
	for _, mv := range moves {
		if mv.req != nil && mv.req.err != nil {
			mv.dropped = true
		}
	}
	for _, mv := range moves {
		if mv.dropped {
			continue
		}
		id := mv.q.ent.id
		if mv.mark != 0 {
			tx.addMark(mv.q.ent.seq, mv.mark)
		}
		switch mv.kind {
		case mvRewrite:
			mv.write(&tx.bt)
		case mvDelete:
			deleteMessageKeys(&tx.bt, id, mv.m)
		case mvActivate:
			mv.m.wroteAgain()
			tx.bt.Delete(tx.bt.msgKey(id, SubqueueMain, mv.m.seq))
			tx.bt.Set(tx.bt.msgKey(id, SubqueueMain, mv.newSeq), mv.meta)
		case mvForward:
			f := *mv.msg
			self := mv.fwd == mv.q.ent // a topic's scheduled message fanning out
			if mv.transfer && !self {
				f.hops++
				f.EnqueueSequenceNumber = int64(mv.newSeq)
			} else if !mv.transfer {
				f.DeadLetterSource = mv.q.ent.path()
				f.hops = 0
			}
			n, np, ng := len(tx.bt.Ops), len(tx.places), len(tx.gates)
			if _, err := tx.deliverTo(mv.fwd, &f, 0); err != nil {
				b.log.Warn("forwarding failed; keeping the message", "entity", mv.q.ent.path(), "to", mv.fwd.name, "err", err)
				tx.bt.Ops = tx.bt.Ops[:n]
				tx.dropSince(np, ng)
				if self {
					mv.kind = mvRetry
					continue
				}
				if mv.transfer {
					mv.kind = mvActivate
					mv.m.wroteAgain()
					tx.bt.Delete(tx.bt.msgKey(id, SubqueueMain, mv.m.seq))
					tx.bt.Set(tx.bt.msgKey(id, SubqueueMain, mv.newSeq), mv.meta)
					continue
				}
				mv.kind = mvRewrite
				mv.sub, mv.state = SubqueueDeadLetter, StateActive
				mv.write(&tx.bt)
				continue
			}
			deleteMessageKeys(&tx.bt, id, mv.m)
		}
	}
	err := tx.write()
	q := w.q
	q.mu.Lock()
	in := 0
	for _, mv := range moves {
		if mv.ordered {
			q.order.leave(mv.newSeq)
		}
	}
	for _, mv := range moves {
		m := mv.m
		m.pending = false
		if q.msgs[m.seq] != m {
			continue // deleted meanwhile (entity purge)
		}
		if err != nil || mv.dropped {
			if mv.kind == mvActivate || mv.transfer || mv.kind == mvRetry {
				q.setDeadline(m, b.now().Add(time.Second).UnixNano())
			} else if m.lk == nil {
				q.route(m)
				if mv.req == nil && m.dl != nil && m.dl.when <= b.now().UnixNano() {
					// The broker's own change (an expiry) failed, and the
					// message is due again at once: a second later, or a
					// store that keeps failing would be retried in a loop.
					q.setDeadline(m, b.now().Add(time.Second).UnixNano())
				}
			}
			continue
		}
		switch mv.kind {
		case mvDelete, mvForward:
			q.remove(m)
			b.cache.drop(m)
			if mv.kind == mvForward && !mv.transfer && mv.reason != "" {
				b.obs.DeadLettered(q.ent.path(), mv.reason)
			}
		case mvRewrite:
			q.unlock(m)
			q.unavailable(m)
			q.clearDeadline(m)
			q.setPlace(m, mv.sub, mv.state)
			m.deliveries = mv.deliveries
			m.split = m.split || (m.inline && mv.hdr != nil)
			if mv.msg != nil {
				b.cache.put(m, mv.msg)
			}
			q.route(m)
			if mv.sub != SubqueueMain && mv.reason != "" {
				b.obs.DeadLettered(q.ent.path(), mv.reason)
			}
		case mvRetry:
			q.setDeadline(m, b.now().Add(time.Second).UnixNano())
		case mvReturn:
			q.unlock(m)
			q.route(m)
		case mvActivate:
			q.clearDeadline(m)
			delete(q.msgs, m.seq)
			q.removed(m.seq)
			m.seq = mv.newSeq
			q.msgs[m.seq] = m
			q.setPlace(m, SubqueueMain, StateActive)
			m.scheduled, m.enqueued, m.expires = 0, mv.enqueued, mv.expires
			if mv.ordered && q.order.waits(m.seq) {
				q.order.hold(&placement{q: q, m: m, activated: true, vis: &visibility{}})
			} else {
				q.publishActivated(m)
			}
		}
	}
	// Sends held behind the numbers these activations had taken, and
	// activations held behind sends, whose turn it is now.
	for _, p := range q.order.due() {
		in += q.publishPlacement(p)
		p.vis.done()
	}
	q.dispatch(w)
	q.mu.Unlock()
	if in > 0 {
		b.obs.MessagesIn(q.ent.path(), in)
	}
	if err == nil {
		tx.publish()
	}
	return err
}

// settle runs op on the messages locked under tokens: all of them or, when
// a token is not valid, none.
//
// Settlements of one queue are combined: a caller queues its request, and
// when no other caller is about to take the queue it takes it itself,
// once it holds q.mu, together with every request queued while it waited
// for the lock. It applies them under that one hold of q.mu, commits all
// their changes in one store batch and answers them. Many links (or many
// goroutines) settling at once thus cost one lock and one commit per round
// instead of per call and do not queue up on q.mu, while rounds still
// overlap: the next one starts while this one waits for its commit.
//
// A settlement is all-or-nothing: every token is checked, and check runs on
// every message, before op changes anything; op itself cannot fail (what
// can — reading the message — happens in runMoves, which fails the whole
// settlement). A settlement whose ctx is done when its round starts applies
// nothing and returns ctx's error.
func (b *Broker) settle(ctx context.Context, path string, tokens []LockToken, check func(q *qstate, m *msgIdx) error, op func(q *qstate, m *msgIdx, w *work)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(tokens) == 0 {
		return errorf(ErrInvalidArgument, "no lock token")
	}
	e, _, err := b.resolve(path)
	if err != nil {
		return err
	}
	q := e.q
	r := &settleReq{ctx: ctx, tokens: tokens, check: check, op: op, done: make(chan struct{}, 1)}
	q.smu.Lock()
	q.sq = append(q.sq, r)
	take := !q.taking
	q.taking = true
	q.smu.Unlock()
	if !take {
		<-r.done
		return r.err
	}
	b.settleRound(q, r)
	return r.err
}

// settleReq is one settle call waiting for its round.
type settleReq struct {
	ctx    context.Context
	tokens []LockToken
	check  func(q *qstate, m *msgIdx) error // nil: nothing to check
	op     func(q *qstate, m *msgIdx, w *work)
	err    error
	done   chan struct{} // capacity 1: answered
}

// settleRound takes q.mu and then the queued settlements (self's
// included), applies them as one unit of work, and answers them once the
// deliveries the round caused are flushed.
func (b *Broker) settleRound(q *qstate, self *settleReq) {
	w := &work{q: q}
	q.mu.Lock()
	q.smu.Lock()
	reqs := q.sq
	q.sq = nil
	q.taking = false // the next caller takes the next round
	q.smu.Unlock()
	for _, r := range reqs {
		w.slabHint += len(r.tokens)
	}
	moved := make([]bool, len(reqs))
	for i, r := range reqs {
		n := len(w.moves)
		r.err = q.settleLocked(r, w)
		for _, mv := range w.moves[n:] {
			mv.req = r
		}
		moved[i] = len(w.moves) > n
	}
	// A settlement that needs no commit (a release, an abandon in a
	// dead-letter subqueue) makes its messages available at once: hand them
	// to consumers with credit now.
	q.dispatch(w)
	q.mu.Unlock()
	if err := b.finish(w); err != nil {
		for i, r := range reqs {
			if r.err == nil && (moved[i] || len(reqs) == 1) {
				r.err = err
			}
		}
	}
	for _, r := range reqs {
		if r != self {
			r.done <- struct{}{}
		}
	}
}

// settleLocked checks r's tokens and messages and then runs its op on each
// message; q.mu is held. When it returns an error it has changed nothing.
func (q *qstate) settleLocked(r *settleReq, w *work) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	ms := make([]*msgIdx, len(r.tokens))
	now := q.b.now().UnixNano()
	for i, t := range r.tokens {
		var err error
		if ms[i], err = q.checkLock(t, now); err != nil {
			return err
		}
		for _, prev := range ms[:i] {
			if prev == ms[i] {
				return errorf(ErrInvalidArgument, "lock token %v given twice", t)
			}
		}
	}
	if r.check != nil {
		for _, m := range ms {
			if err := r.check(q, m); err != nil {
				return err
			}
		}
	}
	n := len(w.moves)
	for _, m := range ms {
		r.op(q, m, w)
	}
	// Messages that only go back, unlocked, write nothing: they go back at
	// once when the settlement commits nothing else, or else with its
	// commit, as moves, so that a settlement that fails returns none.
	alone := len(w.moves) == n
	for _, m := range w.back {
		if alone {
			q.unlock(m)
			q.route(m)
		} else {
			w.moves = append(w.moves, w.newMove(m, mvReturn, m.sub, m.state, m.deliveries))
		}
	}
	w.back = w.back[:0]
	return nil
}

// checkLock returns the message locked under token at now; q.mu is held.
func (q *qstate) checkLock(token LockToken, now int64) (*msgIdx, error) {
	m := q.locks[token]
	if m == nil || m.pending {
		return nil, errorf(ErrLockLost, "the lock supplied is invalid: either the lock expired, or the message was already settled or removed from %q", q.ent.path())
	}
	if c := m.owner(); c != nil && c.sess != nil {
		if c.sess.owner != c || c.sess.lockedUntil <= now {
			return nil, errorf(ErrSessionLockLost, "the session lock of session %q on %q was lost", c.sess.id, q.ent.path())
		}
		return m, nil
	}
	if m.lk.until <= now {
		return nil, errorf(ErrLockLost, "the lock on message %d of %q expired", m.seq, q.ent.path())
	}
	return m, nil
}

// Complete removes locked messages, in one commit.
func (b *Broker) Complete(ctx context.Context, path string, tokens ...LockToken) error {
	return b.settle(ctx, path, tokens, nil, func(q *qstate, m *msgIdx, w *work) {
		w.moves = append(w.moves, w.newMove(m, mvDelete, m.sub, m.state, m.deliveries))
	})
}

// Abandon unlocks messages, counting a delivery, after merging props into
// their application properties. A message that reaches MaxDeliveryCount is
// dead-lettered (MaxDeliveryCountExceeded); an expired one expires. The
// AMQP "released" outcome is Release, which does not count.
func (b *Broker) Abandon(ctx context.Context, path string, props map[string]any, tokens ...LockToken) error {
	if err := checkValues(props); err != nil {
		return errorf(ErrInvalidArgument, "properties to modify: %v", err)
	}
	return b.settle(ctx, path, tokens, nil, func(q *qstate, m *msgIdx, w *work) {
		if !q.failedDeliveryMove(m, props, true, w) {
			w.back = append(w.back, m)
		}
	})
}

// Defer sets locked messages aside: they are received again only by
// ReceiveDeferred with their sequence numbers.
func (b *Broker) Defer(ctx context.Context, path string, props map[string]any, tokens ...LockToken) error {
	if err := checkValues(props); err != nil {
		return errorf(ErrInvalidArgument, "properties to modify: %v", err)
	}
	return b.settle(ctx, path, tokens, nil, func(q *qstate, m *msgIdx, w *work) {
		mv := w.newMove(m, mvRewrite, m.sub, StateDeferred, m.deliveries)
		mv.props = props
		w.moves = append(w.moves, mv)
	})
}

// DeadLetter moves locked messages to the dead-letter subqueue, setting
// the DeadLetterReason and DeadLetterErrorDescription properties (when not
// empty) and merging props.
func (b *Broker) DeadLetter(ctx context.Context, path, reason, desc string, props map[string]any, tokens ...LockToken) error {
	if err := checkValues(props); err != nil {
		return errorf(ErrInvalidArgument, "properties to modify: %v", err)
	}
	if len(reason) > 4096 || len(desc) > 4096 {
		return errorf(ErrInvalidArgument, "dead-letter reason and description are limited to 4096 characters")
	}
	check := func(q *qstate, m *msgIdx) error {
		if m.sub != SubqueueMain {
			return errorf(ErrInvalidArgument, "message %d is already in a dead-letter subqueue of %q", m.seq, q.ent.path())
		}
		return nil
	}
	return b.settle(ctx, path, tokens, check, func(q *qstate, m *msgIdx, w *work) {
		q.deadLetter(m, props, reason, desc, m.deliveries, w)
	})
}

// RenewLock extends a message lock by the entity's LockDuration and
// returns the new expiry. Messages of a session are covered by the session
// lock: their renewal returns the session lock's expiry.
func (b *Broker) RenewLock(ctx context.Context, path string, token LockToken) (time.Time, error) {
	var until int64
	err := b.settle(ctx, path, []LockToken{token}, nil, func(q *qstate, m *msgIdx, w *work) {
		if c := m.owner(); c != nil && c.sess != nil {
			until = c.sess.lockedUntil
			return
		}
		q.unlinkLock(m)
		m.lk.until = q.b.now().UnixNano() + int64(q.ent.props().LockDuration)
		q.linkLock(m)
		until = m.lk.until
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, until).UTC(), nil
}

// failedDelivery handles a delivery that ended without settlement (abandon,
// lock expiry): counts it (main subqueue only, when count), then
// dead-letters, expires, or returns the message, merging props. q.mu is
// held; m may still be locked.
func (q *qstate) failedDelivery(m *msgIdx, props map[string]any, count bool, w *work) {
	if !q.failedDeliveryMove(m, props, count, w) {
		q.unlock(m)
		q.route(m)
	}
}

// failedDeliveryMove is failedDelivery but for returning the message: it
// adds the move m needs to w and returns true, or returns false when m
// only needs unlocking and returning, which writes nothing. Settlements
// use it to return such messages only once the rest of the settlement is
// committed (settleLocked).
func (q *qstate) failedDeliveryMove(m *msgIdx, props map[string]any, count bool, w *work) bool {
	d := m.deliveries
	if m.sub == SubqueueMain && count {
		d++
	}
	p := q.ent.props()
	now := q.b.now().UnixNano()
	switch {
	case m.sub == SubqueueMain && d >= uint32(p.MaxDeliveryCount):
		q.deadLetter(m, props, ReasonMaxDeliveryCountExceeded,
			fmt.Sprintf("Message could not be consumed after %d delivery attempts.", d), d, w)
	case m.sub == SubqueueMain && m.state == StateActive && m.expires != 0 && m.expires <= now:
		q.expireWith(m, props, d, w)
	case d != m.deliveries || len(props) > 0:
		mv := w.newMove(m, mvRewrite, m.sub, m.state, d)
		mv.props = props
		w.moves = append(w.moves, mv)
	default:
		return false
	}
	return true
}

// deadLetter moves m to the dead-letter subqueue (or forwards it there,
// ForwardDeadLetteredMessagesTo), merging props; q.mu is held.
func (q *qstate) deadLetter(m *msgIdx, props map[string]any, reason, desc string, d uint32, w *work) {
	kind := mvRewrite
	var fwd *entity
	if to := q.ent.props().ForwardDLTo; to != "" {
		if e, err := q.b.lookup(to); err == nil {
			kind, fwd = mvForward, e
		}
	}
	mv := w.newMove(m, kind, SubqueueDeadLetter, StateActive, d)
	mv.props, mv.setDL, mv.dlReason, mv.dlDesc = props, true, reason, desc
	mv.fwd, mv.reason = fwd, reason
	w.moves = append(w.moves, mv)
}

// expire handles an available message whose TTL has passed; q.mu is held.
func (q *qstate) expire(m *msgIdx, w *work) {
	q.unavailable(m)
	q.expireWith(m, nil, m.deliveries, w)
}

func (q *qstate) expireWith(m *msgIdx, props map[string]any, d uint32, w *work) {
	if q.ent.props().DLOnExpiration {
		q.deadLetter(m, props, ReasonTTLExpired, "The message expired and was dead lettered.", d, w)
		return
	}
	w.moves = append(w.moves, w.newMove(m, mvDelete, m.sub, m.state, d))
}

// onLockDeadline expires the message locks that are due.
func (q *qstate) onLockDeadline(now int64) {
	w := &work{q: q}
	q.mu.Lock()
	n := 0
	for h := q.lockHead; h != nil && h.lk.until <= now; h = q.lockHead {
		q.unlock(h)
		n++
		if h.pending {
			continue
		}
		q.failedDelivery(h, nil, true, w)
	}
	if q.lockHead != nil {
		q.b.wheel.set(&q.lockDL, q.lockHead.lk.until)
	}
	q.dispatch(w)
	q.mu.Unlock()
	for range n {
		q.b.obs.LockExpired(q.ent.path())
	}
	q.b.finish(w)
}

// onMessageDeadlines activates due scheduled messages and expires
// messages whose TTL passed.
func (q *qstate) onMessageDeadlines(ds []*deadline, now int64) {
	w := &work{q: q}
	q.mu.Lock()
	if q.ent.deleted.Load() {
		q.mu.Unlock()
		return
	}
	if q.ent.dormant.Load() {
		// Being loaded: the index is incomplete, and a store scan still
		// running may or may not see what an activation or expiry would
		// write (a message would be read twice). Load runs these after.
		q.held = append(q.held, ds...)
		q.mu.Unlock()
		return
	}
	for _, d := range ds {
		m := d.m
		if q.msgs[m.seq] != m || m.pending || m.dl != d {
			continue
		}
		switch {
		case m.state == StateScheduled && m.scheduled <= now:
			q.activate(m, now, w)
		case m.state == StateActive && m.sub == SubqueueMain && m.lk == nil && m.expires != 0 && m.expires <= now:
			q.expire(m, w)
		}
	}
	q.dispatch(w)
	q.mu.Unlock()
	q.b.finish(w)
}

// runHeld runs the message deadlines that came due while the entity was
// loading; it is called once the entity is no longer dormant.
func (q *qstate) runHeld(now int64) {
	q.mu.Lock()
	ds := q.held
	q.held = nil
	q.mu.Unlock()
	if len(ds) > 0 {
		q.onMessageDeadlines(ds, now)
	}
}

// publishActivated makes an activated message available (or leaves it on
// disk, cold, when the paging window is full); q.mu is held.
func (q *qstate) publishActivated(m *msgIdx) {
	if q.wantsCold(m) {
		q.evictCold(m)
	} else {
		q.route(m)
	}
}

// activate turns a due scheduled message into an active one with a new
// sequence number, from memory; q.mu is held. A topic's message is fanned
// out, a forwarding queue's forwarded: runMoves reads it for that.
func (q *qstate) activate(m *msgIdx, now int64, w *work) {
	seq, mark := q.ent.seq.take(1)
	exp := int64(0)
	if m.expires != 0 {
		// The TTL counts from activation: expires was scheduled + TTL.
		exp = expiry(now, time.Duration(m.expires-m.scheduled))
	}
	mv := &move{q: q, m: m, kind: mvActivate, newSeq: seq, mark: mark, enqueued: now, expires: exp,
		sub: SubqueueMain, state: StateActive, deliveries: m.deliveries}
	mm := m.meta()
	mm.state, mm.enqueued, mm.expires, mm.scheduled = StateActive, now, exp, 0
	mv.meta = encodeMeta(&mm)
	var dest *entity
	if q.ent.kind == kindTopic {
		dest = q.ent
	} else if to := q.ent.props().ForwardTo; to != "" {
		dest, _ = q.b.lookup(to)
	}
	if dest != nil {
		mv.kind, mv.fwd, mv.transfer, mv.needBody = mvForward, dest, true, true
	} else {
		// Its new number takes its place in the publication order: a
		// send decided before it with a lower number and still committing
		// is published first.
		q.order.enter(seq)
		mv.ordered = true
	}
	m.pending = true
	w.moves = append(w.moves, mv)
}
