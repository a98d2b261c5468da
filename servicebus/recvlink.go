package servicebus

import (
	"context"
	"errors"
	"sync"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/internal/gopool"
	"github.com/busbar-io/busbar/sas"
)

// recvLink is a client receiver on a queue, subscription or dead-letter
// sub-queue (or one session of them). A broker consumer feeds it with as
// much credit as the client grants the link. The consumer's deliveries are
// queued for the link's own goroutine (pump), which encodes and sends them,
// and applies credit changes and drains (a receive-and-delete consumer
// commits to the store when given credit): the broker's goroutine that
// delivers, and the connection's reader, never wait for this client. Peek-
// lock dispositions are applied by a worker and answered with the broker's
// verdict.
type recvLink struct {
	c    *conn
	s    *amqp.Sender
	path string // the broker path, with any sub-queue
	mode broker.ReceiveMode
	cons *broker.Consumer

	wake    chan struct{}
	settleQ serial[amqp.Outcome]
	// releaseQ applies released outcomes, which write nothing, apart from
	// settleQ, so that they are not answered only after the commit of
	// completions queued before them: the Go SDK releases what reaches a
	// link between two ReceiveMessages calls and its next call waits for
	// those answers.
	releaseQ serial[amqp.Outcome]

	mu      sync.Mutex
	pending []*broker.Message // delivered by the broker, not yet sent
	avgSize int               // moving average of the delivered bodies' sizes
	buf     []byte            // encoding scratch of the pump
	closed  bool
}

// aheadBytes bounds what a link takes from the broker ahead of its socket:
// the broker's consumer gets at most about this many bytes' worth of the
// client's credit beyond what is queued, so a client that grants a large
// credit and stops reading pins this much, not its whole credit in bodies.
const aheadBytes = 1 << 20

// assumedSize is the body size assumed before a link has seen any.
const assumedSize = 64 << 10

// aheadLocked returns how many messages the broker may deliver ahead of
// the socket: aheadBytes of the link's average message, at least one.
func (l *recvLink) aheadLocked() int {
	size := l.avgSize
	if size == 0 {
		size = assumedSize
	}
	return max(1, aheadBytes/max(size, 1))
}

func (c *conn) attachReceiver(s *amqp.Sender, addr Address) (amqp.SenderHandler, error) {
	if err := c.authorize(addr.Entity, sas.Listen); err != nil {
		return nil, amqpError(err)
	}
	l := &recvLink{c: c, s: s, path: addr.Path(), wake: make(chan struct{}, 1)}
	l.settleQ.run = l.settleBatch
	l.releaseQ.run = l.settleBatch
	remote := s.Remote()
	if remote.SndSettleMode == frames.SenderSettleSettled {
		l.mode = broker.ReceiveAndDelete
	}
	if l.mode == broker.PeekLock {
		// Dispositions are answered with the broker's verdict, once it has
		// applied them (see answer).
		s.SetManualSettlement()
	}
	opts := broker.ConsumerOptions{Mode: l.mode, Deliver: l.deliver, OnLost: l.lost}
	if sf, ok := sessionFilter(remote.Source); ok {
		return l.attachSession(sf, opts)
	}
	var err error
	l.cons, err = c.h.b.NewConsumer(context.Background(), l.path, opts)
	if errors.Is(err, broker.ErrSessionRequired) {
		return nil, amqp.NewError(amqp.CondNotAllowed, "%s", descSessionRequired)
	}
	if err != nil {
		return nil, amqpError(err)
	}
	l.start()
	return l, nil
}

// start runs the link once its consumer exists.
func (l *recvLink) start() {
	gopool.Go(l.pump)
	l.c.h.metrics.LinkAttached(l.path, true)
}

// Flow wakes the pump, which matches the consumer's credit to the link's.
// (The wake channel is never closed: Flow may race with a Detach that
// another goroutine started.)
func (l *recvLink) Flow(*amqp.Sender, amqp.Flow) { l.wakeUp() }

// pump sends deliveries and applies credit changes and drains until the
// link ends. It alone writes to the link, so a client that reads slowly
// holds up only its own link, never the broker's goroutine that delivers.
func (l *recvLink) pump() {
	var batch []*broker.Message
	bp := encodeBufs.Get().(*[]byte)
	l.buf = (*bp)[:0]
	defer func() {
		if cap(l.buf) <= maxPooledBuf {
			*bp = l.buf[:0]
			encodeBufs.Put(bp)
		}
		l.buf = nil
	}()
	for range l.wake {
		l.mu.Lock()
		closed, queued := l.closed, len(l.pending)
		l.mu.Unlock()
		if closed {
			return
		}
		if queued > 0 {
			batch = l.sendPending(batch)
		}
		l.grant()
		if l.s.Draining() {
			batch = l.drain(batch)
			_ = l.s.CompleteDrain()
		}
	}
}

// encodeBufs passes the pumps' encoding buffers from link to link: a
// session's link lives for a few deliveries, and growing a new buffer to
// the messages' size for each link showed in allocation profiles.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf is the largest buffer encodeBufs keeps.
const maxPooledBuf = 256 << 10

// grant matches the consumer's credit to the link's, within the look-ahead
// bound. Deliveries it makes are queued, and wake the pump again.
func (l *recvLink) grant() {
	l.mu.Lock()
	queued, ahead := len(l.pending), l.aheadLocked()
	l.mu.Unlock()
	if want := min(int(l.s.Credit())-queued, ahead) - l.cons.Credit(); want > 0 {
		l.cons.AddCredit(want)
	}
}

// drain delivers what is available up to the link's credit, in steps of
// the look-ahead bound (each step's deliveries are sent before the next is
// taken), and stops when the broker has no more (or no credit: its
// consumer ended) or the link's credit is used.
func (l *recvLink) drain(batch []*broker.Message) []*broker.Message {
	for {
		l.grant()
		had := l.cons.Credit()
		dropped := l.cons.Drain()
		batch = l.sendPending(batch)
		l.mu.Lock()
		closed, queued := l.closed, len(l.pending)
		l.mu.Unlock()
		if closed || had == 0 || dropped > 0 || int(l.s.Credit())-queued <= 0 {
			return batch
		}
	}
}

// wakeUp signals the pump.
func (l *recvLink) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// deliver is the consumer's Deliver: it queues m for the pump.
func (l *recvLink) deliver(m *broker.Message) {
	l.mu.Lock()
	if l.closed {
		l.dropLocked(m)
		l.mu.Unlock()
		return
	}
	if l.pending == nil {
		// A session's link lives for a few deliveries: start with room for
		// them rather than growing 1, 2, 4, 8.
		l.pending = make([]*broker.Message, 0, 16)
	}
	l.pending = append(l.pending, m)
	if l.avgSize == 0 {
		l.avgSize = len(m.Body)
	} else {
		l.avgSize += (len(m.Body) - l.avgSize) / 8
	}
	l.mu.Unlock()
	l.wakeUp()
}

// sendPending sends the queued messages while there is credit; what finds
// none goes back to the front of the queue. It returns batch for reuse.
func (l *recvLink) sendPending(batch []*broker.Message) []*broker.Message {
	l.mu.Lock()
	batch, l.pending = l.pending, batch[:0] // the two buffers take turns
	l.mu.Unlock()
	for i, m := range batch {
		if l.send(m) {
			continue
		}
		l.mu.Lock()
		if l.closed {
			for _, r := range batch[i:] {
				l.dropLocked(r)
			}
		} else {
			l.pending = append(append(make([]*broker.Message, 0, len(batch)-i+len(l.pending)), batch[i:]...), l.pending...)
		}
		l.mu.Unlock()
		break
	}
	clear(batch)
	return batch[:0]
}

// send encodes and sends m; false when the link has no credit.
func (l *recvLink) send(m *broker.Message) bool {
	locked := l.mode == broker.PeekLock
	var err error
	l.buf, err = encodeMessage(l.buf[:0], m, locked)
	if err == nil {
		am := amqp.Message{Payload: l.buf, Settled: !locked}
		if locked {
			am.Tag = dotnetTag(m.LockToken)
		}
		if _, err = l.s.TrySend(&am); errors.Is(err, amqp.ErrNoCredit) {
			return false
		}
	}
	if err != nil {
		l.c.h.log.Debug("cannot deliver a message", "entity", l.path, "seq", m.SequenceNumber, "err", err)
		l.mu.Lock()
		l.dropLocked(m)
		l.mu.Unlock()
	}
	return true
}

// dropLocked gives up a message that cannot be delivered: a locked one is
// unlocked at once rather than when its lock expires, and, never having
// reached the client, it is not counted as a delivery.
func (l *recvLink) dropLocked(m *broker.Message) {
	if l.mode == broker.PeekLock {
		tok := m.LockToken
		go func() { _ = l.c.h.b.Release(context.Background(), l.path, tok) }()
	}
}

// lost ends the link when the broker ends the consumer.
func (l *recvLink) lost(err error) {
	go l.s.Detach(amqpError(err))
}

// Outcome settles a peek-lock delivery with the broker.
func (l *recvLink) Outcome(_ *amqp.Sender, o amqp.Outcome) {
	if o.Lost || o.State == nil || l.mode != broker.PeekLock {
		return
	}
	// o.Tag is the tag send made for this delivery (amqp hands back the
	// Message's Tag): nothing else holds or reuses it, so it needs no copy.
	if _, ok := o.State.(*frames.Released); ok {
		l.releaseQ.push(o)
		return
	}
	l.settleQ.push(o)
}

// settleBatch applies a batch of outcomes in order. Consecutive completes
// go to the broker in one call (one commit); when that fails each is
// retried alone, so that every delivery gets its own answer.
func (l *recvLink) settleBatch(batch []amqp.Outcome) {
	ctx := context.Background()
	for i := 0; i < len(batch); {
		j := i
		var toks []broker.LockToken
		for ; j < len(batch); j++ {
			_, acc := batch[j].State.(*frames.Accepted)
			tok, ok := tokenOfTag(batch[j].Tag)
			if !acc || !ok {
				break
			}
			toks = append(toks, tok)
		}
		if len(toks) > 1 && l.c.h.b.Complete(ctx, l.path, toks...) == nil {
			for _, o := range batch[i:j] {
				l.answer(o, nil)
			}
			i = j
			continue
		}
		if j == i {
			j = i + 1
		}
		for _, o := range batch[i:j] {
			tok, ok := tokenOfTag(o.Tag)
			err := error(broker.ErrLockLost)
			if ok {
				err = l.c.settle(ctx, l.path, tok, o.State)
			}
			l.answer(o, err)
		}
		i = j
	}
}

// answer settles the client's delivery with the broker's verdict: its own
// outcome when the broker applied it (a dead-letter rejection without its
// error, which the SDKs would raise), or a rejection carrying the mapped
// error (com.microsoft:message-lock-lost for a lost lock).
func (l *recvLink) answer(o amqp.Outcome, err error) {
	if err != nil {
		l.c.h.log.Debug("settlement failed", "entity", l.path, "err", err)
	}
	if o.Settled {
		return // the client settled first and expects no answer
	}
	st := o.State
	switch {
	case err != nil:
		st = &frames.Rejected{Error: amqpError(err)}
	case isRejected(st):
		st = &frames.Rejected{}
	}
	_ = l.s.Settle(o.ID, st)
}

func isRejected(st frames.DeliveryState) bool {
	_, ok := st.(*frames.Rejected)
	return ok
}

// settle applies a disposition outcome to a locked message: accepted
// completes, released returns the message without counting a delivery,
// modified abandons (modified with undeliverable-here defers), rejected
// dead-letters.
func (c *conn) settle(ctx context.Context, path string, tok broker.LockToken, st frames.DeliveryState) error {
	b := c.h.b
	switch s := st.(type) {
	case *frames.Accepted:
		return b.Complete(ctx, path, tok)
	case *frames.Released:
		return b.Release(ctx, path, tok)
	case *frames.Modified:
		props, err := annotationProps(s.MessageAnnotations)
		if err != nil {
			return err
		}
		if s.UndeliverableHere {
			return b.Defer(ctx, path, props, tok)
		}
		return b.Abandon(ctx, path, props, tok)
	case *frames.Rejected:
		reason, desc := "", ""
		var props map[string]any
		if s.Error != nil {
			desc = s.Error.Description
			for k, v := range s.Error.Info {
				switch string(k) {
				case broker.PropDeadLetterReason:
					reason, _ = v.(string)
				case broker.PropDeadLetterErrorDescription:
					desc, _ = v.(string)
				default:
					if pv, ok := propertyValue(v); ok {
						if props == nil {
							props = map[string]any{}
						}
						props[string(k)] = pv
					}
				}
			}
		}
		return b.DeadLetter(ctx, path, reason, desc, props, tok)
	}
	return badRequest("unsupported delivery state %T", st)
}

// annotationProps converts the annotations of a modified outcome to
// properties to merge into the message's application properties.
func annotationProps(a map[any]any) (map[string]any, error) {
	if len(a) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(a))
	for k, v := range a {
		var name string
		switch k := k.(type) {
		case encoding.Symbol:
			name = string(k)
		case string:
			name = k
		default:
			continue
		}
		pv, ok := propertyValue(v)
		if !ok {
			return nil, badRequest("property %q to modify has unsupported type %T", name, v)
		}
		out[name] = pv
	}
	return out, nil
}

// Detach ends the consumer. Messages it locked stay locked until settled
// (by the management link) or expired, as in Service Bus. Outcomes the
// client sent before detaching are applied first: a session is released
// only after its settlements, so they do not fail for a lost session lock.
func (l *recvLink) Detach(*amqp.Sender, error) {
	l.mu.Lock()
	l.closed = true
	pending := l.pending
	l.pending = nil
	for _, m := range pending {
		l.dropLocked(m)
	}
	l.mu.Unlock()
	l.wakeUp() // the pump sees closed and exits
	l.c.mu.Lock()
	if l.c.sessLinks[l.s.Name()] == l {
		delete(l.c.sessLinks, l.s.Name())
	}
	l.c.mu.Unlock()
	if l.cons != nil {
		// The outcomes queued before the detach are applied first; only
		// then is the consumer ended (and its session released), before the
		// connection's reader takes the next frame, so that a client that
		// attaches again at once finds the session free.
		l.settleQ.wait()
		l.releaseQ.wait()
		_ = l.cons.Close()
	}
	l.c.h.metrics.LinkDetached(l.path, true)
}
