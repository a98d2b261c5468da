package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/busbar-io/busbar/internal/gopool"
	"github.com/busbar-io/busbar/store"
)

// txn collects the store operations and in-memory placements of one
// acknowledged operation: committed together, published after the commit.
type txn struct {
	b      *Broker
	ctx    context.Context
	bt     batchBuf
	now    time.Time
	places []*placement
	slab   []placement // where places are carved from (newPlacement)
	hint   int         // messages the txn is expected to place (0: unknown)
	gates  []gate      // sequence numbers entered in queues' publication order (order.go)
	vis    visibility
	dedupe []dedupeUndo
	marks  []seqMark
	// outcome is closed when the txn's message ids (dedupe) are durable or
	// forgotten; made with the first of them.
	outcome chan struct{}
	// inFlight is, when enqueueTop fails with errDuplicateInFlight, the
	// outcome of the send the message duplicates.
	inFlight chan struct{}
	// writing holds the queues whose records the txn writes (hold), once
	// or more each, until its commit ends; top is the queue or topic a
	// send is addressed to.
	writing []*qstate
	top     *entity
}

// errDuplicateInFlight is enqueueTop's answer for a message whose MessageID
// a send still committing has recorded: prepareSend decides the send again
// once that send's outcome is known.
var errDuplicateInFlight = errors.New("duplicate of a message still being committed")

// placement is a message written by a txn, inserted into its queue's index
// once the txn is committed.
type placement struct {
	q       *qstate
	m       *msgIdx
	session string
	msg     *Message
	reason  string      // dead-lettered on arrival, for the metric once committed
	vis     *visibility // its txn's (order.go)
	// activated: a scheduled message that became active, held in the
	// publication order behind a send (settle.go, runMoves); already
	// indexed, it is only made available.
	activated bool
}

type dedupeUndo struct {
	dd *dedupeWindow
	id string
	at int64
}

func (b *Broker) newTxn(ctx context.Context) *txn { return &txn{b: b, ctx: ctx, now: b.now()} }

// newPlacement adds a placement to the txn. Placements are carved from
// slabs sized by the txn's hint (one allocation for a send's messages
// rather than one each); a placement lives only until its publication, so
// a slab is not kept long.
func (tx *txn) newPlacement() *placement {
	if len(tx.slab) == cap(tx.slab) {
		n := max(tx.hint, 4)
		if c := cap(tx.slab); c > 0 {
			n = 2 * c
		}
		tx.slab = make([]placement, 0, n)
		if tx.places == nil {
			tx.places = make([]*placement, 0, n)
		}
	}
	tx.slab = tx.slab[:len(tx.slab)+1]
	p := &tx.slab[len(tx.slab)-1]
	tx.places = append(tx.places, p)
	return p
}

// seq takes n sequence numbers of e's counter (a topic's for its
// subscriptions), writing a new high-water mark in the txn when they pass
// the durable one.
func (tx *txn) seq(e *entity, n int) uint64 {
	first, mark := e.seq.take(n)
	tx.addMark(e.seq, mark)
	return first
}

// addMark records that the txn must write mark for c. A txn writes one
// mark per counter, its largest, when it commits: a batch of n messages
// past the durable mark would otherwise write n marks and n overlapping
// range deletions, which the store must fragment (quadratic memory at
// flush).
func (tx *txn) addMark(c *seqCounter, mark uint64) {
	if mark == 0 {
		return
	}
	for i := range tx.marks {
		if tx.marks[i].c == c {
			tx.marks[i].mark = max(tx.marks[i].mark, mark)
			return
		}
	}
	tx.marks = append(tx.marks, seqMark{c, mark})
}

// commit writes the txn and publishes its placements, or undoes its
// reservations.
func (tx *txn) commit() error {
	if err := tx.write(); err != nil {
		return err
	}
	tx.publish()
	return nil
}

// write commits the txn's batch; on failure it undoes the reservations.
func (tx *txn) write() error {
	for _, m := range tx.marks {
		m.c.markOps(&tx.bt, m.mark)
	}
	if err := tx.b.commit(tx.ctx, &tx.bt.Batch); err != nil {
		tx.abort()
		return err
	}
	for _, m := range tx.marks {
		m.c.marked(m.mark)
	}
	tx.endDedupe(true)
	tx.endWrites()
	return nil
}

func (tx *txn) abort() {
	tx.end(tx.places, tx.gates, false)
	tx.endDedupe(false)
	tx.endWrites()
	tx.places, tx.gates = nil, nil
}

// hold registers the txn as writing records of q's entity, or refuses when
// the entity is being deleted; q.mu is held. A txn holds an entity from
// when it takes sequence numbers for it (place, a forwarding queue's
// number, a topic's number and its subscriptions' publication order in
// fanout) until its commit ends, so a delete that began before waits for
// the commit (stopWrites), and one that began after refuses the send.
// Holding an entity twice is harmless: each hold is released.
func (tx *txn) hold(q *qstate) error {
	if slices.Contains(tx.writing, q) {
		return nil // the delete, if one began, waits for this txn
	}
	if err := q.beginWrite(); err != nil {
		return err
	}
	tx.writing = append(tx.writing, q)
	return nil
}

// endWrites releases the txn's holds once its commit has ended.
func (tx *txn) endWrites() {
	for _, q := range tx.writing {
		q.endWrite()
	}
	tx.writing = nil
}

// deletedMeanwhile is the outcome of a send whose commit succeeded but whose
// queue or topic was deleted before the send was answered: its messages
// went with the entity. Service Bus answers a send racing a delete either
// way; answering it with success after the delete returned would
// acknowledge messages already gone. (An entity that moved to another node
// of the cluster is not deleted: its messages are there.)
func (tx *txn) deletedMeanwhile() error {
	e := tx.top
	if e.deleted.Load() && e.q != nil && e.q.deleting.Load() {
		return errorf(ErrNotFound, "%s %q was deleted", e.kind, e.path())
	}
	return nil
}

// endDedupe settles the message ids the txn recorded for duplicate
// detection: committed, they stay in the window; not, they are forgotten.
// Either way the sends that found one of them in flight and wait for its
// outcome decide again.
func (tx *txn) endDedupe(committed bool) {
	for _, u := range tx.dedupe {
		u.dd.mu.Lock()
		if at, ok := u.dd.seen[u.id]; ok && at == u.at && !committed {
			delete(u.dd.seen, u.id)
		}
		if u.dd.flight[u.id] == tx.outcome {
			delete(u.dd.flight, u.id)
		}
		u.dd.mu.Unlock()
	}
	if tx.outcome != nil {
		close(tx.outcome)
	}
	tx.dedupe, tx.outcome = nil, nil
}

// publish makes the committed txn's messages available, and returns once
// they all are: a message held behind a lower sequence number another send
// is still committing (order.go) waits for it, at most about one group
// commit. It must not be called with a queue lock held.
func (tx *txn) publish() {
	tx.vis.n.Store(1)
	tx.end(tx.places, tx.gates, true)
	tx.places, tx.gates = nil, nil
	tx.vis.done()
	if tx.vis.n.Load() != 0 {
		<-tx.vis.ch
	}
}

// dropSince undoes the placements and gates a failed step added after the
// first np and ng of them, before anything was committed.
func (tx *txn) dropSince(np, ng int) {
	tx.end(tx.places[np:], tx.gates[ng:], false)
	tx.places, tx.gates = tx.places[:np], tx.gates[:ng]
}

// end finishes places and gates queue by queue: committed, the messages
// become available, in sequence order (order.go); not committed, their
// reservations are returned. Either way, messages of other txns held behind
// these sequence numbers become available when nothing earlier is pending.
func (tx *txn) end(places []*placement, gates []gate, committed bool) {
	var qs []*qstate
	add := func(q *qstate) {
		for i := len(qs) - 1; i >= 0; i-- {
			if qs[i] == q {
				return
			}
		}
		qs = append(qs, q)
	}
	for _, p := range places {
		add(p.q)
	}
	for _, g := range gates {
		add(g.q)
	}
	for _, q := range qs {
		w := &work{q: q}
		in := 0
		q.mu.Lock()
		for _, g := range gates {
			if g.q == q {
				q.order.leave(g.seq)
			}
		}
		for _, p := range places {
			switch {
			case p.q != q:
			case !committed:
				q.reserved -= int64(p.m.size)
				q.undecided(p.m.sub, p.m.seq)
			case p.m.sub == SubqueueMain && q.order.waits(p.m.seq):
				q.order.hold(p)
			default:
				in += q.publishPlacement(p)
			}
		}
		for _, p := range q.order.due() {
			in += q.publishPlacement(p)
			p.vis.done()
		}
		q.dispatch(w)
		q.mu.Unlock()
		tx.b.finish(w)
		if in > 0 {
			tx.b.obs.MessagesIn(q.ent.path(), in)
		}
	}
}

// publishPlacement indexes a committed message and routes it; it returns 1
// for a message of the main subqueue (counted as in), else 0; q.mu is held.
func (q *qstate) publishPlacement(p *placement) int {
	if p.activated {
		if q.msgs[p.m.seq] == p.m && !q.ent.deleted.Load() { // not purged meanwhile
			q.publishActivated(p.m)
		}
		return 0
	}
	q.reserved -= int64(p.m.size)
	q.undecided(p.m.sub, p.m.seq)
	if q.ent.deleted.Load() {
		return 0
	}
	if p.m.sub == SubqueueMain && q.sessionful() {
		p.m.sess = q.session(p.session, true)
	}
	if q.wantsCold(p.m) {
		q.addCold(p.m)
	} else {
		q.insert(p.m)
		q.b.cache.put(p.m, p.msg)
	}
	if p.reason != "" {
		q.b.obs.DeadLettered(q.ent.path(), p.reason)
	}
	if p.m.sub == SubqueueMain {
		return 1
	}
	return 0
}

// Send enqueues msgs on a queue or topic as one atomic batch: when it
// returns nil every message is durable (duplicates detected by MessageID are
// accepted and dropped, as Service Bus does, once their original is).
// Messages with a future ScheduledEnqueueTime are scheduled. The broker keeps msgs' Body and
// Properties: the caller must not modify them afterwards.
func (b *Broker) Send(ctx context.Context, path string, msgs []*Message) error {
	_, err := b.send(ctx, path, msgs)
	return err
}

// Schedule enqueues msgs to become active at at, and returns their
// sequence numbers for CancelScheduled. A topic keeps its scheduled
// messages and fans them out when they become active (under new sequence
// numbers), to the subscriptions that exist then.
func (b *Broker) Schedule(ctx context.Context, path string, at time.Time, msgs []*Message) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if at.IsZero() {
		return nil, errorf(ErrInvalidArgument, "schedule time is zero")
	}
	sched := make([]*Message, len(msgs))
	for i, m := range msgs {
		if m == nil {
			return nil, errorf(ErrInvalidArgument, "message %d is nil", i)
		}
		c := *m
		c.ScheduledEnqueueTime = at
		sched[i] = &c
	}
	return b.ScheduleEach(ctx, path, sched)
}

// ScheduleEach schedules msgs atomically, each at its own
// ScheduledEnqueueTime (which must be set), and returns their sequence
// numbers in order: all are scheduled, durably, or none is.
func (b *Broker) ScheduleEach(ctx context.Context, path string, msgs []*Message) ([]int64, error) {
	for i, m := range msgs {
		if m == nil {
			return nil, errorf(ErrInvalidArgument, "message %d is nil", i)
		}
		if m.ScheduledEnqueueTime.IsZero() {
			return nil, errorf(ErrInvalidArgument, "message %d has no scheduled enqueue time", i)
		}
	}
	return b.send(ctx, path, msgs)
}

func (b *Broker) send(ctx context.Context, path string, msgs []*Message) ([]int64, error) {
	tx, seqs, err := b.prepareSend(ctx, path, msgs)
	if err != nil || tx == nil {
		return nil, err
	}
	if err := tx.commit(); err != nil {
		return nil, err
	}
	if err := tx.deletedMeanwhile(); err != nil {
		return nil, err
	}
	return seqs, nil
}

// prepareSend decides a send: it checks every message, detects
// duplicates, assigns sequence numbers and builds the txn, without any
// store I/O. A nil txn with a nil error is an empty send.
//
// A message whose MessageID was recorded by a send still committing can be
// neither dropped as its duplicate (acknowledged, it would be lost if that
// send failed) nor stored (a second copy if it succeeds). The send is then
// undone and decided again once that send's outcome is known, at most a
// group commit later: the message is dropped if the original is durable,
// stored otherwise.
func (b *Broker) prepareSend(ctx context.Context, path string, msgs []*Message) (*txn, []int64, error) {
	for {
		tx, seqs, err := b.decideSend(ctx, path, msgs)
		if !errors.Is(err, errDuplicateInFlight) {
			return tx, seqs, err
		}
		select {
		case <-tx.inFlight:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// decideSend is one attempt of prepareSend. When it fails with
// errDuplicateInFlight, its undone txn is returned for its inFlight.
func (b *Broker) decideSend(ctx context.Context, path string, msgs []*Message) (*txn, []int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	p, err := ParsePath(path)
	if err != nil {
		return nil, nil, err
	}
	if p.Subscription != "" || p.Subqueue != SubqueueMain {
		return nil, nil, errorf(ErrInvalidArgument, "cannot send to %q: send to a queue or a topic", path)
	}
	e, err := b.lookup(p.Entity)
	if err != nil {
		return nil, nil, err
	}
	ep := e.props()
	if !ep.Status.canSend() {
		return nil, nil, errorf(ErrEntityDisabled, "%s %q is %s", e.kind, e.name, ep.Status)
	}
	if len(msgs) == 0 {
		return nil, nil, nil
	}
	if err := b.checkSpace(); err != nil {
		return nil, nil, err
	}
	tx := b.newTxn(ctx)
	tx.hint = len(msgs)
	tx.top = e
	tx.bt.Ops = make([]store.Op, 0, 2*len(msgs)+1) // index and body records, and a mark
	e.touch(tx.now)
	// Every message is checked before any is enqueued: a batch with one bad
	// message is refused whole and changes nothing.
	for i, m := range msgs {
		if err := b.validateMessage(e, ep, m); err != nil {
			if len(msgs) > 1 {
				return nil, nil, fmt.Errorf("message %d of the batch: %w", i, err)
			}
			return nil, nil, err
		}
	}
	seqs := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		seq, err := tx.enqueueTop(e, m)
		if err != nil {
			tx.abort()
			if errors.Is(err, errDuplicateInFlight) {
				return tx, nil, err
			}
			return nil, nil, err
		}
		seqs = append(seqs, int64(seq))
	}
	return tx, seqs, nil
}

// Pending is a send whose commit may still be in flight (SendAsync).
type Pending struct {
	seqs []int64
	err  error
	done chan struct{} // closed when finished and every earlier send of the chain has finished
}

// Wait returns the send's outcome once it is durable and published (or
// failed): Send's results.
func (p *Pending) Wait() ([]int64, error) {
	<-p.done
	return p.seqs, p.err
}

// SendAsync is Send for a producer that keeps several sends in flight, as
// an AMQP sender link does: it decides the send at once — checks,
// duplicate detection, sequence numbers — and returns while the commit
// waits for its fsync, so the producer's next send is decided meanwhile and
// can join the next group commit (a message whose MessageID a send still
// committing has recorded makes it wait for that send's outcome first, see
// prepareSend). after, when not nil, is the producer's
// previous send: this send's outcome is reported only after after's, so a
// link answers its deliveries in order. (Availability needs no chain: every
// queue publishes its new messages in sequence-number order, order.go.) done, when not nil, is called once with the outcome, after the
// messages are available, on a goroutine of the broker's; it must not
// block for long. Every send is all-or-nothing, as with Send. SendAsync reads
// msgs before it returns and keeps no reference to the slice.
func (b *Broker) SendAsync(ctx context.Context, path string, msgs []*Message, after *Pending, done func(seqs []int64, err error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	tx, seqs, err := b.prepareSend(ctx, path, msgs)
	p.seqs, p.err = seqs, err
	finish := func() {
		if after != nil {
			<-after.done
		}
		if p.err == nil && tx != nil {
			tx.publish()
			if err := tx.deletedMeanwhile(); err != nil {
				p.seqs, p.err = nil, err
			}
		}
		if done != nil {
			done(p.seqs, p.err)
		}
		close(p.done)
	}
	if err != nil || tx == nil {
		gopool.Go(finish)
		return p
	}
	gopool.Go(func() {
		if err := tx.write(); err != nil {
			p.seqs, p.err = nil, err
		}
		finish()
	})
	return p
}

func (b *Broker) validateMessage(e *entity, ep *props, m *Message) error {
	if m == nil {
		return errorf(ErrInvalidArgument, "nil message")
	}
	if max := ep.MaxMessageSizeKB * 1024; int64(len(m.Body)) > max {
		return errorf(ErrMessageSizeExceeded, "message of %d bytes is larger than the %d bytes %q allows", len(m.Body), max, e.name)
	}
	if len(m.MessageID) > MaxIDLength {
		return errorf(ErrInvalidArgument, "MessageID is %d characters, more than %d", len(m.MessageID), MaxIDLength)
	}
	if len(m.SessionID) > MaxIDLength {
		return errorf(ErrInvalidArgument, "SessionID is %d characters, more than %d", len(m.SessionID), MaxIDLength)
	}
	if m.PartitionKey != "" && m.SessionID != "" && m.PartitionKey != m.SessionID {
		return errorf(ErrInvalidArgument, "PartitionKey %q differs from SessionID %q", m.PartitionKey, m.SessionID)
	}
	if m.TimeToLive < 0 {
		return errorf(ErrInvalidArgument, "TimeToLive %v is negative", m.TimeToLive)
	}
	if e.kind == kindQueue && ep.RequiresSession && m.SessionID == "" && !m.EmptySessionID {
		return errorf(ErrSessionRequired, "queue %q requires sessions: set a SessionID on every message", e.name)
	}
	if err := checkValues(m.Properties); err != nil {
		return errorf(ErrInvalidArgument, "application properties: %v", err)
	}
	return nil
}

// enqueueTop handles a message sent by a client to queue or topic e:
// message id, duplicate detection, then routing. It returns the sequence
// number the message got in e (0 for a dropped duplicate).
func (tx *txn) enqueueTop(e *entity, in *Message) (uint64, error) {
	m := *in
	m.hops = 0
	m.PropertiesModified, m.SystemPropertiesModified = false, false
	m.DeadLetterSource, m.EnqueueSequenceNumber = "", 0
	if m.MessageID == "" {
		// Service Bus assigns "N"-formatted GUIDs: 32 hex digits.
		tok := tx.b.newToken()
		m.MessageID = hex.EncodeToString(tok[:])
	}
	ep := e.props()
	if ep.DupDetection {
		dup, inFlight := tx.checkDuplicate(e, ep, m.MessageID)
		if inFlight != nil {
			tx.inFlight = inFlight
			return 0, errDuplicateInFlight
		}
		if dup {
			return 0, nil
		}
	}
	return tx.deliverTo(e, &m, 0)
}

// checkDuplicate reports whether id was sent to e within the window, and
// records it otherwise. When the send that recorded it (another txn) is
// still committing, it returns that send's outcome channel instead.
func (tx *txn) checkDuplicate(e *entity, ep *props, id string) (dup bool, inFlight chan struct{}) {
	d := e.dd
	now := tx.now.UnixNano()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, old := range d.expire(now-int64(ep.DupWindow), 64) {
		tx.bt.Delete(keyS(kDedupe, e.id, old))
	}
	if at, ok := d.seen[id]; ok && now-at < int64(ep.DupWindow) {
		if ch := d.flight[id]; ch != nil && ch != tx.outcome {
			return false, ch
		}
		return true, nil // durable, or recorded earlier in this batch
	}
	d.add(id, now)
	if tx.outcome == nil {
		tx.outcome = make(chan struct{})
	}
	if d.flight == nil {
		d.flight = map[string]chan struct{}{}
	}
	d.flight[id] = tx.outcome
	tx.dedupe = append(tx.dedupe, dedupeUndo{d, id, now})
	tx.bt.Set(keyS(kDedupe, e.id, id), encodeUint(uint64(now)))
	return false, nil
}

// deliverTo routes m into entity e: a topic fans out, a forwarding entity
// forwards, anything else stores it. It returns the sequence number in e.
// Like place, it keeps and changes m.
func (tx *txn) deliverTo(e *entity, m *Message, seq uint64) (uint64, error) {
	scheduled := !m.ScheduledEnqueueTime.IsZero() && m.ScheduledEnqueueTime.After(tx.now)
	if e.kind == kindTopic {
		if scheduled {
			return tx.place(e, m, SubqueueMain, 0, "", "")
		}
		return tx.fanout(e, m)
	}
	ep := e.props()
	if ep.ForwardTo == "" || scheduled {
		return tx.place(e, m, SubqueueMain, seq, "", "")
	}
	if seq == 0 {
		e.q.mu.Lock()
		err := tx.hold(e.q)
		if err == nil {
			seq = tx.seq(e, 1)
		}
		e.q.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	if m.hops >= MaxForwardHops {
		return tx.place(e, m, SubqueueTransferDeadLetter, seq, ReasonMaxTransferHopCountExceeded,
			fmt.Sprintf("The message was forwarded %d times, the limit.", MaxForwardHops))
	}
	dest, err := tx.b.lookup(ep.ForwardTo)
	if err == nil && !dest.props().Status.canSend() {
		err = errorf(ErrEntityDisabled, "%q is %s", dest.name, dest.props().Status)
	}
	if err == nil {
		f := *m
		f.hops++
		f.EnqueueSequenceNumber = int64(seq)
		n, np, ng := len(tx.bt.Ops), len(tx.places), len(tx.gates)
		if _, err = tx.deliverTo(dest, &f, 0); err == nil {
			return seq, nil
		}
		// A fan-out that failed part way (a subscription over the topic's
		// quota) may have placed some of its copies: they are taken back,
		// so the message is either forwarded whole or dead-lettered here.
		tx.bt.Ops = tx.bt.Ops[:n]
		tx.dropSince(np, ng)
	}
	return tx.place(e, m, SubqueueTransferDeadLetter, seq, ReasonForwardingFailed,
		fmt.Sprintf("Forwarding to %q failed: %v", ep.ForwardTo, err))
}

// fanout copies m to every subscription of topic t whose rules match.
func (tx *txn) fanout(t *entity, m *Message) (uint64, error) {
	tp := t.props()
	size := int64(len(m.Body))
	t.mu.Lock()
	subs := make([]*entity, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	t.q.mu.Lock()
	total := t.q.size + t.q.reserved
	t.q.mu.Unlock()
	for _, s := range subs {
		s.q.mu.Lock()
		total += s.q.size + s.q.reserved
		s.q.mu.Unlock()
	}
	if len(subs) > 0 && total+size > tp.MaxSizeMB<<20 {
		return 0, errorf(ErrQuotaExceeded, "topic %q holds %d bytes; its limit is %d MB", t.name, total, tp.MaxSizeMB)
	}
	// The number is taken and entered in every subscription's publication
	// order under the topic queue's lock, so each subscription sees the
	// numbers of concurrent sends enter in ascending order.
	t.q.mu.Lock()
	if err := tx.hold(t.q); err != nil {
		t.q.mu.Unlock()
		return 0, err
	}
	seq := tx.seq(t, 1)
	live := subs[:0]
	for _, s := range subs {
		s.q.mu.Lock()
		// A subscription being deleted gets no copy, as if already gone.
		if tx.hold(s.q) == nil {
			tx.enterOrder(s.q, seq)
			live = append(live, s)
		}
		s.q.mu.Unlock()
	}
	subs = live
	t.q.mu.Unlock()
	m.SequenceNumber = int64(seq)
	m.EnqueuedTime = tx.now
	for _, s := range subs {
		sp := s.props()
		if sp.Status == StatusDisabled {
			continue
		}
		copies, ferr := s.matchRules(m)
		if ferr != nil {
			if !sp.DLOnFilterException {
				continue
			}
			dl := *m // m goes to every subscription: each takes a copy
			if _, err := tx.place(s, &dl, SubqueueDeadLetter, seq, ReasonFilterEvaluation, ferr.Error()); err != nil {
				return 0, err
			}
			continue
		}
		for i, c := range copies {
			if c == m { // the copy of the rules without an action: every subscription sees m
				own := *m
				c = &own
			}
			// The first copy has the topic's sequence number; further
			// copies (rules with actions) take sequence numbers of their
			// own from the topic, so they never collide in the subscription.
			cseq := seq
			if i > 0 {
				t.q.mu.Lock()
				cseq = tx.seq(t, 1)
				s.q.mu.Lock()
				tx.enterOrder(s.q, cseq)
				s.q.mu.Unlock()
				t.q.mu.Unlock()
			}
			if sp.RequiresSession && c.SessionID == "" && !c.EmptySessionID {
				if _, err := tx.place(s, c, SubqueueDeadLetter, cseq, "SessionIdIsNull", "Session id is null."); err != nil {
					return 0, err
				}
				continue
			}
			if _, err := tx.deliverTo(s, c, cseq); err != nil {
				return 0, err
			}
		}
	}
	return seq, nil
}

// effectiveTTL returns the message's time to live, with the entity's
// default as a ceiling; InfiniteTTL means none.
func effectiveTTL(m *Message, p *props) time.Duration {
	ttl := m.TimeToLive
	if ttl <= 0 || ttl > p.DefaultTTL {
		ttl = p.DefaultTTL
	}
	return ttl
}

func expiry(enqueued int64, ttl time.Duration) int64 {
	if ttl >= InfiniteTTL || enqueued > 1<<62 || int64(ttl) > (1<<63-1)-enqueued {
		return 0
	}
	return enqueued + int64(ttl)
}

// place stores m in queue/subscription e's subqueue sub (dead-lettered with
// reason when sub is not main). seq 0 allocates a sequence number. m is the
// txn's: place changes and keeps it (callers pass a copy of their own).
func (tx *txn) place(e *entity, m *Message, sub Subqueue, seq uint64, reason, desc string) (uint64, error) {
	q := e.q
	ep := e.props()
	limit := ep.MaxSizeMB << 20
	if e.kind == kindSubscription {
		limit = e.parent.props().MaxSizeMB << 20
	}
	if reason != "" {
		setDeadLetterProps(m, reason, desc)
	}
	size := int64(len(m.Body))
	now := tx.now.UnixNano()
	if sub == SubqueueMain {
		if max := ep.MaxMessageSizeKB * 1024; e.kind == kindQueue && size > max {
			return 0, errorf(ErrMessageSizeExceeded, "message of %d bytes is larger than the %d bytes %q allows", size, max, e.path())
		}
		if ep.RequiresSession && m.SessionID == "" && !m.EmptySessionID {
			return 0, errorf(ErrSessionRequired, "%q requires sessions: the message has no SessionID", e.path())
		}
	}
	// The quota reservation and the sequence number are decided under the
	// queue's lock (a page-in must know the message is on its way);
	// encoding happens outside it.
	q.mu.Lock()
	if sub == SubqueueMain && q.size+q.reserved+size > limit {
		held := q.size + q.reserved
		q.mu.Unlock()
		return 0, errorf(ErrQuotaExceeded, "%s %q holds %d bytes; its limit is %d MB", e.kind, e.path(), held, limit>>20)
	}
	if seq == 0 {
		// A number given by the caller was taken under a hold of e already.
		if err := tx.hold(q); err != nil {
			q.mu.Unlock()
			return 0, err
		}
		seq = tx.seq(e, 1)
		if sub == SubqueueMain {
			tx.enterOrder(q, seq)
		}
	}
	q.reserved += size
	q.decided(sub, seq)
	q.mu.Unlock()
	unreserve := func() {
		q.mu.Lock()
		q.reserved -= size
		q.undecided(sub, seq)
		q.mu.Unlock()
	}
	mi := &msgIdx{seq: seq, bodyRef: seq, enqueued: now, size: int32(size), sub: sub, hidx: -1, once: true}
	if sub == SubqueueMain && !m.ScheduledEnqueueTime.IsZero() && m.ScheduledEnqueueTime.After(tx.now) {
		mi.state = StateScheduled
		mi.scheduled = satNano(m.ScheduledEnqueueTime)
		mi.expires = expiry(mi.scheduled, effectiveTTL(m, ep))
	} else if sub == SubqueueMain {
		mi.expires = expiry(now, effectiveTTL(m, ep))
	}
	m.SequenceNumber = int64(seq)
	m.EnqueuedTime = time.Unix(0, now).UTC()
	mm := mi.meta()
	mm.sessionID = m.SessionID
	rec, err := encodeMessage(m)
	if err != nil {
		unreserve()
		return 0, errorf(ErrInvalidArgument, "%v", err)
	}
	// An active message is one key for both records (metaRecordInline); a
	// scheduled one is not, as its activation moves it to a new key.
	mi.inline = mi.state == StateActive
	mi.home, mm.inline = sub, mi.inline
	meta := appendMeta(tx.bt.alloc(metaRecordLen(&mm))[:0], &mm)
	if mi.inline {
		tx.bt.SetJoined(tx.bt.msgKey(e.id, sub, seq), meta, rec)
	} else {
		tx.bt.Set(tx.bt.msgKey(e.id, sub, seq), meta)
		tx.bt.Set(tx.bt.bodyKey(e.id, seq), rec)
	}
	*tx.newPlacement() = placement{q: q, m: mi, session: m.SessionID, msg: m, reason: reason, vis: &tx.vis}
	return seq, nil
}

func setDeadLetterProps(m *Message, reason, desc string) {
	p := make(map[string]any, len(m.Properties)+2)
	for k, v := range m.Properties {
		p[k] = v
	}
	if reason != "" {
		p[PropDeadLetterReason] = reason
	}
	if desc != "" {
		p[PropDeadLetterErrorDescription] = desc
	}
	m.Properties = p
	m.PropertiesModified = true
}

// CancelScheduled cancels scheduled messages of a queue or topic by the
// sequence numbers Schedule returned. An unknown (or already active)
// sequence number is ErrMessageNotFound and cancels nothing.
func (b *Broker) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := ParsePath(path)
	if err != nil {
		return err
	}
	if p.Subscription != "" || p.Subqueue != SubqueueMain {
		return errorf(ErrInvalidArgument, "cancel scheduled messages on a queue or topic, not %q", path)
	}
	e, err := b.lookup(p.Entity)
	if err != nil {
		return err
	}
	qs := []*entity{e} // a topic holds its scheduled messages itself
	if p.Subqueue == SubqueueMain && e.q.paged(SubqueueMain) {
		if err := e.q.fetchUncounted(ctx, seqs); err != nil {
			return err
		}
	}
	var bt batchBuf
	type hit struct {
		q *qstate
		m *msgIdx
	}
	var hits []hit
	found := make(map[int64]bool, len(seqs))
	for _, s := range qs {
		q := s.q
		q.mu.Lock()
		for _, seq := range seqs {
			m := q.msgs[uint64(seq)]
			if m == nil || m.state != StateScheduled || m.sub != SubqueueMain || m.pending {
				continue
			}
			m.pending = true
			found[seq] = true
			hits = append(hits, hit{q, m})
			deleteMessageKeys(&bt, s.id, m)
		}
		q.mu.Unlock()
	}
	var missing []int64
	for _, seq := range seqs {
		if !found[seq] {
			missing = append(missing, seq)
		}
	}
	if len(missing) > 0 {
		err = errorf(ErrMessageNotFound, "no scheduled message with sequence number %v in %q", missing, path)
	} else {
		err = b.commit(ctx, &bt.Batch)
	}
	for _, h := range hits {
		h.q.mu.Lock()
		h.m.pending = false
		if err == nil {
			h.q.remove(h.m)
			b.cache.drop(h.m)
		} else if h.q.msgs[h.m.seq] == h.m {
			// Its activation may have come due while it was pending, and
			// been dropped: arm it again (at once when it is due).
			h.q.route(h.m)
		}
		h.q.mu.Unlock()
	}
	return err
}

// deleteMessageKeys deletes the records of message m of entity eid: with
// the store's delete-once when this process wrote them once and never
// again (m.once), so that on the embedded store a message sent and
// completed within one memtable leaves nothing behind, not even a
// tombstone to flush and compact.
func deleteMessageKeys(bt *batchBuf, eid uint64, m *msgIdx) {
	if m.once {
		bt.DeleteOnce(bt.msgKey(eid, m.sub, m.seq))
		if !m.inline {
			bt.DeleteOnce(bt.bodyKey(eid, m.bodyRef))
		}
		return
	}
	bt.Delete(bt.msgKey(eid, m.sub, m.seq))
	if !m.inline || m.split {
		bt.Delete(bt.bodyKey(eid, m.bodyRef))
	}
}

// wroteAgain records that m's records are written again (a rewrite, a
// move): their deletion must be a plain one from now on.
func (m *msgIdx) wroteAgain() { m.once = false }
