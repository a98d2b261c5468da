package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/store"
)

// ReceiveMode is how a consumer takes messages.
type ReceiveMode uint8

// Receive modes.
const (
	// PeekLock locks each delivered message until it is settled or its
	// lock expires (at-least-once).
	PeekLock ReceiveMode = iota
	// ReceiveAndDelete deletes each message, durably, before delivering it
	// (at-most-once).
	ReceiveAndDelete
)

// ConsumerOptions configure a Consumer.
type ConsumerOptions struct {
	Mode ReceiveMode
	// Deliver receives each message. It must not block; it is called from
	// one goroutine at a time per consumer, in delivery order (the caller of
	// AddCredit, Drain or a settlement, a sender, or the clock's timer),
	// with no broker lock held: it may settle or add credit, but must not
	// call Drain.
	Deliver func(*Message)
	// OnLost, if set, is called once when the broker ends the consumer:
	// its entity was deleted, or (sessions) its session lock expired.
	OnLost func(error)
	// AbandonOnClose makes Close return the consumer's locked messages to
	// the queue at once instead of leaving them locked until they expire.
	AbandonOnClose bool
}

// Consumer is a receiver on a queue, subscription or dead-letter subqueue,
// fed by credit, as an AMQP receiver link. Session consumers (AcceptSession,
// AcceptNextSession) deliver only their session's messages, in order.
type Consumer struct {
	b    *Broker
	q    *qstate
	sub  Subqueue
	opts ConsumerOptions
	path string

	adding atomic.Int64 // credit added, not yet in credit (AddCredit)

	// guarded by q.mu
	credit int
	closed bool
	sess   *session
	locked *msgIdx // session consumers: list of locked messages

	lostOnce sync.Once

	omu      sync.Mutex
	out      []outItem
	outBuf   []outItem // out's buffer from its front: push starts there again when out empties
	flushing bool
	run      []outItem // the deliveries flush is handing out (takeReady); only the flushing goroutine uses it
	idle     *sync.Cond
}

type outItem struct {
	m    *Message
	pc   *pendingCommit
	lazy *lazyBody // m has only its broker fields: read the rest before delivering
}

// lazyBody names the stored message a delivery still needs. dispatch runs
// under the queue's lock and never reads the store there: a message not in
// the cache is read after the lock is released (receive-and-delete: before
// its deletion is committed; peek-lock: when the delivery is flushed).
type lazyBody struct {
	eid uint64
	m   *msgIdx
	// split is m.split when the delivery was stamped, under the queue's
	// lock (it only ever turns true): a split message's record is read
	// from its body key at once; a stale false costs a second read.
	split bool
	// ahead, for a session delivery, is what its read reads besides.
	ahead *readAhead
}

// readAhead is the session's next available messages, read with a
// delivery's body when that had to come from the store, for the session's
// buffer (session.ahead): a session receiver asking for one message at a
// time (the SDK's do) then reads its session's backlog with one lookup, not
// one per message. keys[i] is where ms[i]'s record is, as the queue's lock
// saw it.
type readAhead struct {
	q      *qstate
	s      *session
	c      *Consumer
	ms     []*msgIdx
	keys   [][]byte
	inline []bool // keys[i] is ms[i]'s index record, its message record inline
}

// aheadMax and aheadBytes bound a read-ahead.
const (
	aheadMax   = 16
	aheadBytes = 256 << 10
)

// readAhead picks the session's available messages, besides m, whose
// bodies are neither cached nor read ahead already; q.mu is held.
func (q *qstate) readAhead(c *Consumer, m *msgIdx) *readAhead {
	s := c.sess
	var ra *readAhead
	size := 0
	for _, x := range s.avail {
		if x == m || x.pending || x.body.Load() != nil || s.ahead[x] != nil {
			continue
		}
		if size += int(x.size); size > aheadBytes || (ra != nil && len(ra.ms) == aheadMax) {
			break
		}
		if ra == nil {
			ra = &readAhead{q: q, s: s, c: c}
		}
		key, inline := recordKey(q.ent.id, x, x.split)
		ra.ms, ra.keys, ra.inline = append(ra.ms, x), append(ra.keys, key), append(ra.inline, inline)
	}
	return ra
}

// keep puts what was read ahead (recs[i]: ms[i]'s stored value, or nil) in
// the session's buffer, for messages still available in the session its
// consumer still holds.
func (ra *readAhead) keep(recs [][]byte) {
	msgs := make([]*Message, len(ra.ms))
	for i, v := range recs {
		if v == nil {
			continue
		}
		if ra.inline[i] {
			rec, moved, err := inlineRecord(v)
			if err != nil || moved {
				continue // split meanwhile: read when delivered
			}
			v = rec
		}
		if msg, err := decodeMessage(v); err == nil {
			msgs[i] = msg
		}
	}
	q := ra.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if ra.s.owner != ra.c {
		return
	}
	for i, x := range ra.ms {
		if msgs[i] == nil || q.msgs[x.seq] != x || x.sess != ra.s || x.hidx < 0 || x.lk != nil || x.pending ||
			x.sub != SubqueueMain || x.state != StateActive {
			continue
		}
		if ra.s.ahead == nil {
			ra.s.ahead = make(map[*msgIdx]*Message)
		}
		ra.s.ahead[x] = msgs[i]
	}
}

// pendingCommit marks deliveries that wait for a store commit
// (receive-and-delete) before they may be pushed.
type pendingCommit struct {
	state atomic.Int32 // 0 pending, 1 committed, 2 failed
}

// NewConsumer opens a non-session consumer on a queue, subscription or
// dead-letter path. Session-enabled entities need AcceptSession or
// AcceptNextSession (their dead-letter subqueues do not).
func (b *Broker) NewConsumer(ctx context.Context, path string, o ConsumerOptions) (*Consumer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, p, err := b.receivable(path, o)
	if err != nil {
		return nil, err
	}
	if p.Subqueue == SubqueueMain && e.props().RequiresSession {
		return nil, errorf(ErrSessionRequired, "%q requires sessions: accept a session to receive from it", e.path())
	}
	c := b.newConsumer(e, p, o)
	q := e.q
	q.mu.Lock()
	if e.deleted.Load() {
		q.mu.Unlock()
		return nil, errorf(ErrNotFound, "%q was deleted", e.path())
	}
	q.consumers[p.Subqueue] = append(q.consumers[p.Subqueue], c)
	q.mu.Unlock()
	return c, nil
}

func (b *Broker) receivable(path string, o ConsumerOptions) (*entity, Path, error) {
	if o.Deliver == nil {
		return nil, Path{}, errorf(ErrInvalidArgument, "ConsumerOptions.Deliver is nil")
	}
	if o.Mode > ReceiveAndDelete {
		return nil, Path{}, errorf(ErrInvalidArgument, "unknown receive mode %d", o.Mode)
	}
	e, p, err := b.resolve(path)
	if err != nil {
		return nil, p, err
	}
	if st := e.props().Status; !st.canReceive() {
		return nil, p, errorf(ErrEntityDisabled, "%q is %s", e.path(), st)
	}
	e.touch(b.now())
	return e, p, nil
}

func (b *Broker) newConsumer(e *entity, p Path, o ConsumerOptions) *Consumer {
	c := &Consumer{b: b, q: e.q, sub: p.Subqueue, opts: o, path: e.path() + p.Subqueue.String()}
	c.idle = sync.NewCond(&c.omu)
	return c
}

// Path returns the entity path the consumer reads.
func (c *Consumer) Path() string { return c.path }

// AddCredit lets the broker deliver n more messages.
//
// Concurrent calls combine: n goes to an atomic counter, and only the call
// that finds it at zero takes q.mu to apply everything added by then, so a
// burst of AddCredit(1) from many goroutines costs a few holds of q.mu
// instead of a queue on it.
func (c *Consumer) AddCredit(n int) {
	if n <= 0 {
		return
	}
	if c.adding.Add(int64(n)) != int64(n) {
		return // the call that found zero applies it
	}
	q := c.q
	w := &work{q: q}
	q.mu.Lock()
	c.takeAdded()
	if !c.closed {
		q.dispatch(w)
	}
	q.mu.Unlock()
	c.b.finish(w)
}

// takeAdded moves credit added by AddCredit into credit; q.mu is held. The
// call that added it still dispatches for it, after taking q.mu.
func (c *Consumer) takeAdded() {
	n := int(c.adding.Swap(0))
	if !c.closed {
		c.credit += n
	}
}

// Credit returns the unused credit.
func (c *Consumer) Credit() int {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	c.takeAdded()
	return c.credit
}

// Drain delivers what is available now, up to the credit, then drops the
// remaining credit and returns how much was dropped (the AMQP drain). Every
// delivery the consumer's credit paid for has been passed to Deliver when
// Drain returns. Drain must not be called from Deliver.
func (c *Consumer) Drain() int {
	q := c.q
	w := &work{q: q}
	q.mu.Lock()
	c.takeAdded() // credit added before Drain (an AddCredit still applying)
	q.dispatch(w)
	cold := func() int {
		if c.sess != nil || c.closed || !q.paged(c.sub) || q.pg.from == 0 || !q.ent.props().Status.canReceive() {
			return 0
		}
		return c.credit
	}
	want := cold()
	q.mu.Unlock()
	c.b.finish(w)
	for want > 0 {
		// Messages on disk are available too: a drain delivers them.
		// Each page-in moves pg.from on, or ends paging.
		if err := q.pageIn(context.Background(), want); err != nil {
			c.b.log.Error("paging in messages for a drain", "entity", q.ent.path(), "err", err)
			break
		}
		q.mu.Lock()
		want = cold()
		q.mu.Unlock()
	}
	c.waitFlushed()
	q.mu.Lock()
	left := c.credit
	c.credit = 0
	q.mu.Unlock()
	return left
}

// Close ends the consumer. Its locked messages stay locked until they
// expire, unless AbandonOnClose; a session consumer releases its session and
// returns the session's locked messages without counting a delivery.
func (c *Consumer) Close() error {
	q := c.q
	w := &work{q: q}
	q.mu.Lock()
	if c.closed {
		q.mu.Unlock()
		return nil
	}
	c.closed = true
	c.credit = 0
	cs := q.consumers[c.sub]
	for i, x := range cs {
		if x == c {
			q.consumers[c.sub] = append(cs[:i:i], cs[i+1:]...)
			break
		}
	}
	if c.sess != nil {
		q.releaseSession(c, false, w)
	} else if c.opts.AbandonOnClose {
		var mine []*msgIdx
		for _, m := range q.locks {
			if m.owner() == c {
				mine = append(mine, m)
			}
		}
		for _, m := range mine {
			q.unlock(m)
			if m.pending {
				// Its settlement is committing and decides where it
				// goes; if that fails, runMoves returns it, unlocked.
				continue
			}
			// Its expiry may have come due, and been skipped, while it
			// was locked: route arms it again.
			q.route(m)
		}
	}
	q.dispatch(w)
	q.mu.Unlock()
	c.b.finish(w)
	return nil
}

func (c *Consumer) notifyLost(err error) {
	if c.opts.OnLost != nil {
		c.lostOnce.Do(func() { c.opts.OnLost(err) })
	}
}

// push queues a delivery; q.mu is held.
func (c *Consumer) push(m *Message, pc *pendingCommit, lazy *lazyBody) {
	c.omu.Lock()
	if len(c.out) == 0 && c.outBuf != nil {
		c.out = c.outBuf[:0] // the queue is empty: start again at the front
	}
	before := cap(c.out)
	c.out = append(c.out, outItem{m, pc, lazy})
	if cap(c.out) != before {
		c.outBuf = c.out[:0]
	}
	c.omu.Unlock()
}

// flush hands queued deliveries to Deliver in order; only one goroutine
// delivers at a time, the others return at once.
func (c *Consumer) flush() {
	c.omu.Lock()
	if c.flushing {
		c.omu.Unlock()
		return
	}
	c.flushing = true
	for {
		run := c.takeReady()
		if len(run) == 0 {
			break
		}
		c.omu.Unlock()
		c.deliverRun(run)
		c.omu.Lock()
	}
	if len(c.out) == 0 {
		c.out = nil
	}
	c.flushing = false
	c.idle.Broadcast()
	c.omu.Unlock()
}

// flushRun and flushRunBytes bound the deliveries flush takes at once: the
// bodies it reads together, and what they may hold in memory before the
// first of them goes out (always at least one).
const (
	flushRun      = 32
	flushRunBytes = 4 << 20
)

// takeReady moves the deliveries at the front of c.out that may go out now
// into c.run and returns them. It stops at one whose receive-and-delete
// commit is still pending (the committing goroutine flushes again) and
// drops those whose commit failed. c.omu is held, and c.flushing set.
func (c *Consumer) takeReady() []outItem {
	run := c.run[:0]
	var size int64
	for len(c.out) > 0 && len(run) < flushRun {
		it := c.out[0]
		if it.pc != nil {
			state := it.pc.state.Load()
			if state == 0 {
				break
			}
			if state == 2 {
				c.out[0] = outItem{}
				c.out = c.out[1:]
				continue
			}
		}
		if it.lazy != nil {
			if size += int64(it.lazy.m.size); size > flushRunBytes && len(run) > 0 {
				break
			}
		}
		c.out[0] = outItem{}
		c.out = c.out[1:]
		run = append(run, it)
	}
	c.run = run
	return run
}

// deliverRun reads the bodies run's deliveries still need, together, and
// hands each to Deliver in order.
func (c *Consumer) deliverRun(run []outItem) {
	var outs []*Message
	var lazies []*lazyBody
	for _, it := range run {
		if it.lazy != nil {
			outs, lazies = append(outs, it.m), append(lazies, it.lazy)
		}
	}
	var errs []error
	if len(lazies) > 0 {
		errs = c.b.fill(outs, lazies)
	}
	j := 0
	for i := range run {
		it := run[i]
		run[i] = outItem{}
		if it.lazy != nil {
			err := errs[j]
			j++
			if err != nil {
				// The message stays locked to this consumer until its lock
				// expires, and is then delivered again.
				c.b.log.Error("cannot read a message to deliver it", "entity", c.path, "seq", it.m.SequenceNumber, "err", err)
				continue
			}
		}
		c.opts.Deliver(it.m)
	}
}

// waitFlushed waits until every queued delivery has been handed to
// Deliver (or dropped, when its receive-and-delete commit failed). Items
// waiting for another goroutine's commit are pushed by that goroutine.
func (c *Consumer) waitFlushed() {
	c.omu.Lock()
	for c.flushing || len(c.out) > 0 {
		c.idle.Wait()
	}
	c.omu.Unlock()
}

// linkLocked and unlinkLocked keep a session consumer's locked messages.
func (c *Consumer) linkLocked(m *msgIdx) {
	m.lk.prev = nil
	m.lk.next = c.locked
	if c.locked != nil {
		c.locked.lk.prev = m
	}
	c.locked = m
}

func (c *Consumer) unlinkLocked(m *msgIdx) {
	l := m.lk
	if l.prev != nil {
		l.prev.lk.next = l.next
	} else if c.locked == m {
		c.locked = l.next
	}
	if l.next != nil {
		l.next.lk.prev = l.prev
	}
	l.prev, l.next = nil, nil
}

// work is what an operation must finish after releasing its queue's lock:
// receive-and-delete commits, moves to commit, consumers to flush.
type work struct {
	q     *qstate
	flush []*Consumer
	rdBt  batchBuf
	rd    []rdItem
	pc    *pendingCommit
	moves []*move
	// back holds the messages a settlement returns without writing
	// anything, until it knows whether it commits (settleLocked).
	back []*msgIdx
	// slab holds the moves newMove makes; slabHint, when set, is how many
	// the work is expected to make (it sizes the first slab and moves).
	slab     []move
	slabHint int
}

type rdItem struct {
	m    *msgIdx
	c    *Consumer
	out  *Message
	lazy *lazyBody
}

func (w *work) addFlush(c *Consumer) {
	for _, x := range w.flush {
		if x == c {
			return
		}
	}
	w.flush = append(w.flush, c)
}

// redispatch matches available messages with consumer credit after a change
// that may allow more deliveries (new properties, a loaded entity); q.mu is
// not held.
func (q *qstate) redispatch() {
	q.mu.Lock()
	w := &work{q: q}
	q.dispatch(w)
	q.mu.Unlock()
	q.b.finish(w)
}

// dispatch matches available messages with consumer credit; q.mu is held.
func (q *qstate) dispatch(w *work) {
	if q.ent.deleted.Load() || !q.ent.props().Status.canReceive() {
		return
	}
	now := q.b.now().UnixNano()
	for sub := range q.consumers {
		cs := q.consumers[sub]
		h := &q.avail[sub]
		for len(cs) > 0 && len(*h) > 0 {
			c := q.nextWithCredit(Subqueue(sub))
			if c == nil {
				break
			}
			m := h.peek()
			if m.sub == SubqueueMain && m.expires != 0 && m.expires <= now {
				q.expire(m, w)
				continue
			}
			q.deliver(c, m, w, now)
		}
	}
	if q.sessionful() {
		q.dispatchSessions(w, now)
	} else if q.pg.window > 0 {
		q.maybePage()
	}
}

func (q *qstate) nextWithCredit(sub Subqueue) *Consumer {
	cs := q.consumers[sub]
	for i := range cs {
		j := (q.rr[sub] + i) % len(cs)
		if cs[j].credit > 0 {
			q.rr[sub] = j + 1
			return cs[j]
		}
	}
	return nil
}

// deliver hands m to c; q.mu is held.
func (q *qstate) deliver(c *Consumer, m *msgIdx, w *work, now int64) {
	c.credit--
	q.ent.accessed.Store(now)
	var lazy *lazyBody
	base := q.b.cache.get(m)
	if base == nil && c.sess != nil {
		if base = c.sess.ahead[m]; base != nil {
			delete(c.sess.ahead, m)
		}
	}
	if base == nil {
		base, lazy = &Message{}, &lazyBody{eid: q.ent.id, m: m, split: m.split}
		if c.sess != nil && c.credit == 0 {
			// The session's receiver takes no more now: read its next
			// messages with this one, for its next deliveries.
			lazy.ahead = q.readAhead(c, m)
		}
	}
	out := stampInto(q.deliveryCopy(), base, m)
	if c.opts.Mode == PeekLock {
		until := now + int64(q.ent.props().LockDuration)
		if c.sess != nil {
			until = c.sess.lockedUntil
		}
		q.lock(m, c, until)
		out.LockToken = m.lk.token
		out.LockedUntil = time.Unix(0, until).UTC()
		c.push(out, nil, lazy)
	} else {
		q.unavailable(m)
		m.pending = true
		deleteMessageKeys(&w.rdBt, q.ent.id, m)
		if w.pc == nil {
			w.pc = &pendingCommit{}
		}
		w.rd = append(w.rd, rdItem{m: m, c: c, out: out, lazy: lazy})
		c.push(out, w.pc, nil) // finishRD reads a lazy body before the deletion commits
	}
	w.addFlush(c)
	q.b.obs.MessagesOut(q.ent.path(), 1)
}

// loadBody returns the stored message (headers, properties, body) of index
// entry m of entity eid, from the cache or the store (caching it). It must
// not be called with a queue's lock held, and m must be pending (nothing
// else changes it meanwhile).
func (b *Broker) loadBody(eid uint64, m *msgIdx) (*Message, error) {
	msgs, errs := b.loadBodies(context.Background(), []*lazyBody{{eid: eid, m: m, split: m.split}})
	return msgs[0], errs[0]
}

// loadBodies is loadBody for several index entries: msgs[i] is ls[i]'s
// message, or nil with errs[i] saying why. The messages not cached are
// read with one store call (GetMany), and a second for those whose records
// a rewrite split: a consumer catching up on a backlog larger than the
// cache reads its deliveries' bodies together, not one lookup each. It
// must not be called with a queue's lock held. A done ctx fails the reads
// not yet made.
func (b *Broker) loadBodies(ctx context.Context, ls []*lazyBody) (msgs []*Message, errs []error) {
	msgs, errs = make([]*Message, len(ls)), make([]error, len(ls))
	recs := make([][]byte, len(ls))
	var keys [][]byte
	var idx []int     // ls's index of each of keys
	var inline []bool // keys[j] is an index record, the message record inline
	for i, l := range ls {
		if c := b.cache.get(l.m); c != nil {
			msgs[i] = c
			continue
		}
		key, in := recordKey(l.eid, l.m, l.split)
		keys, idx, inline = append(keys, key), append(idx, i), append(inline, in)
	}
	// Read-aheads' keys follow the deliveries' own.
	var aheads []*readAhead
	for _, l := range ls {
		if l.ahead != nil {
			aheads = append(aheads, l.ahead)
		}
	}
	own := len(keys)
	for _, ra := range aheads {
		keys = append(keys, ra.keys...)
	}
	readErr := func(i int, err error) error {
		return fmt.Errorf("read message %d of entity %d: %w", ls[i].m.bodyRef, ls[i].eid, err)
	}
	var split []int // those whose record a rewrite moved to the body key
	if len(keys) > 0 {
		vals, err := b.st.GetMany(ctx, keys)
		if err == nil {
			rest := vals[own:]
			for _, ra := range aheads {
				ra.keep(rest[:len(ra.keys)])
				rest = rest[len(ra.keys):]
			}
		}
		for j, i := range idx {
			switch {
			case err != nil:
				errs[i] = readErr(i, err)
			case !inline[j] && vals[j] == nil:
				errs[i] = readErr(i, store.ErrNotFound)
			case !inline[j]:
				recs[i] = vals[j]
			case vals[j] == nil:
				split = append(split, i) // and its inline value moved on
			default:
				rec, moved, derr := inlineRecord(vals[j])
				switch {
				case derr != nil:
					errs[i] = readErr(i, derr)
				case moved:
					split = append(split, i) // in place
				default:
					recs[i] = rec
				}
			}
		}
	}
	if len(split) > 0 {
		keys = keys[:0]
		for _, i := range split {
			keys = append(keys, key2(kBody, ls[i].eid, ls[i].m.bodyRef))
		}
		vals, err := b.st.GetMany(ctx, keys)
		for j, i := range split {
			switch {
			case err != nil:
				errs[i] = readErr(i, err)
			case vals[j] == nil:
				errs[i] = readErr(i, store.ErrNotFound)
			default:
				recs[i] = vals[j]
			}
		}
	}
	for _, i := range idx {
		if errs[i] != nil {
			continue
		}
		msg, err := decodeMessage(recs[i])
		if err != nil {
			errs[i] = err
			continue
		}
		b.cache.put(ls[i].m, msg)
		msgs[i] = msg
	}
	return msgs, errs
}

// recordKey is where index entry m of entity eid keeps its message
// record, as split says: in its index record's value while it is inline
// (inline true), else under its body key, where a rewrite puts it in the
// same commit that replaces or deletes the inline value.
func recordKey(eid uint64, m *msgIdx, split bool) (key []byte, inline bool) {
	if m.inline && !split {
		return msgKey(eid, m.home, m.seq), true
	}
	return key2(kBody, eid, m.bodyRef), false
}

// inlineRecord returns the message record inline in index record v, or
// moved when a rewrite split it off (to the message's body key).
func inlineRecord(v []byte) (rec []byte, moved bool, err error) {
	mm, rec, err := decodeMetaRecord(v)
	if err != nil || !mm.inline {
		return nil, err == nil, err
	}
	return rec, false, nil
}

// fill completes deliveries stamped without their bodies: outs[i] with
// ls[i]'s stored message, read together (loadBodies). errs[i] is nil for
// each one completed.
func (b *Broker) fill(outs []*Message, ls []*lazyBody) (errs []error) {
	bases, errs := b.loadBodies(context.Background(), ls)
	for i, base := range bases {
		if base == nil {
			continue
		}
		out := outs[i]
		full := *base
		full.SequenceNumber, full.EnqueuedTime = out.SequenceNumber, out.EnqueuedTime
		full.DeliveryCount, full.State, full.ExpiresAt = out.DeliveryCount, out.State, out.ExpiresAt
		full.LockToken, full.LockedUntil = out.LockToken, out.LockedUntil
		if !out.ScheduledEnqueueTime.IsZero() {
			full.ScheduledEnqueueTime = out.ScheduledEnqueueTime
		}
		*out = full
	}
	return errs
}

// stamp returns a copy of base with m's broker fields.
func (q *qstate) stamp(base *Message, m *msgIdx) *Message {
	return stampInto(new(Message), base, m)
}

// stampSlab is how many deliveries' messages deliver allocates at once:
// one allocation instead of sixteen, for copies a link drops once it has
// written them.
const stampSlab = 16

// deliveryCopy returns a Message for a delivery's copy; q.mu is held.
func (q *qstate) deliveryCopy() *Message {
	if len(q.slab) == 0 {
		q.slab = make([]Message, stampSlab)
	}
	out := &q.slab[0]
	q.slab = q.slab[1:]
	return out
}

// stampInto makes out a copy of base with m's broker fields.
func stampInto(out, base *Message, m *msgIdx) *Message {
	*out = *base
	out.SequenceNumber = int64(m.seq)
	out.EnqueuedTime = time.Unix(0, m.enqueued).UTC()
	out.DeliveryCount = m.deliveries
	out.State = m.state
	out.ExpiresAt = time.Time{}
	if m.expires != 0 {
		out.ExpiresAt = time.Unix(0, m.expires).UTC()
	}
	if m.state == StateScheduled && out.ScheduledEnqueueTime.IsZero() {
		out.ScheduledEnqueueTime = time.Unix(0, m.scheduled).UTC()
	}
	out.LockToken, out.LockedUntil = LockToken{}, time.Time{}
	return out
}

// finish completes w outside q.mu: commits receive-and-delete removals and
// moves, then delivers. It returns the first commit error.
func (b *Broker) finish(w *work) error {
	var firstErr error
	for len(w.rd) > 0 || len(w.moves) > 0 {
		if len(w.rd) > 0 {
			if err := b.finishRD(w); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		if len(w.moves) > 0 {
			mv := w.moves
			w.moves = nil
			if err := b.runMoves(w, mv); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	fl := w.flush
	w.flush = nil
	for _, c := range fl {
		c.flush()
	}
	return firstErr
}

func (b *Broker) finishRD(w *work) error {
	rd, pc := w.rd, w.pc
	bt := w.rdBt
	w.rd, w.pc, w.rdBt = nil, nil, batchBuf{}
	var err error
	var outs []*Message
	var lazies []*lazyBody
	for _, it := range rd {
		if it.lazy != nil {
			outs, lazies = append(outs, it.out), append(lazies, it.lazy)
		}
	}
	if len(lazies) > 0 {
		for _, ferr := range b.fill(outs, lazies) {
			if ferr != nil {
				err = ferr // none is deleted: the messages stay in the queue
				break
			}
		}
	}
	if err == nil {
		err = b.commit(context.Background(), &bt.Batch)
	}
	q := w.q
	q.mu.Lock()
	for _, it := range rd {
		it.m.pending = false
		if err == nil {
			q.remove(it.m)
			b.cache.drop(it.m)
		} else if q.msgs[it.m.seq] == it.m {
			// Back where it was: a deferred message (ReceiveDeferred)
			// stays deferred, an active one is available again with its
			// expiry armed (it may have come due, and been skipped, while
			// the deletion was committing).
			q.route(it.m)
			if it.c != nil && !it.c.closed {
				it.c.credit++
			}
		}
	}
	if err == nil {
		pc.state.Store(1)
	} else {
		pc.state.Store(2)
		b.log.Error("receive-and-delete commit failed; messages stay in the queue", "entity", q.ent.path(), "err", err)
	}
	for _, it := range rd {
		if it.c != nil {
			w.addFlush(it.c)
		}
	}
	if err == nil {
		// After a failure the messages wait for the next trigger (a send,
		// credit, a settlement) rather than being retried in a loop here.
		q.dispatch(w)
	}
	q.mu.Unlock()
	return err
}
