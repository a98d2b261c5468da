// Package amqptest provides an in-memory AMQP 1.0 broker built on package
// amqp, for tests of the engine and of AMQP clients: every address is a
// queue; links attached as sender enqueue, links attached as receiver
// consume, with credit, drain and both settlement modes honoured.
//
// It owns nothing but its queues; it is a test fixture, not the broker
// (package broker is), and must not grow Service Bus semantics.
package amqptest

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/frames"
)

// Broker is an in-memory broker listening on a loopback port.
type Broker struct {
	// Server is the engine serving the broker's connections.
	Server *amqp.Server
	// Addr is the listener's host:port.
	Addr string

	l      net.Listener
	served chan error

	mu     sync.Mutex
	queues map[string]*queue
	manual map[string]uint32 // address -> one-off credit for links sending to it
	reject map[string]bool   // address -> links sending to it reject oversized deliveries

	lost      atomic.Int64
	conns     atomic.Int64
	detached  atomic.Int64
	closeErrs chan error
}

// message is a queued delivery.
type message struct {
	format  uint32
	payload []byte
}

// queue is one address's messages and consumers.
type queue struct {
	b         *Broker
	name      string
	mu        sync.Mutex
	msgs      []message
	consumers []*consumer
	next      int
}

// Start listens on 127.0.0.1 (a free port) and serves with cfg; cfg.Handler
// is set to the broker. Stop it with Close.
func Start(cfg amqp.Config) (*Broker, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Broker{
		Addr:      l.Addr().String(),
		l:         l,
		served:    make(chan error, 1),
		queues:    make(map[string]*queue),
		manual:    make(map[string]uint32),
		reject:    make(map[string]bool),
		closeErrs: make(chan error, 1024),
	}
	cfg.Handler = handler{b}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = -1
	}
	b.Server = amqp.NewServer(cfg)
	go func() { b.served <- b.Server.Serve(l) }()
	return b, nil
}

// URL returns the broker's amqp:// URL.
func (b *Broker) URL() string { return "amqp://" + b.Addr }

// Close stops the server and waits for its connections to end.
func (b *Broker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Server.Close(ctx)
	if serr := <-b.served; !errors.Is(serr, amqp.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// Put enqueues a message on an address.
func (b *Broker) Put(addr string, payload []byte) {
	q := b.queue(addr)
	q.mu.Lock()
	q.msgs = append(q.msgs, message{payload: payload})
	q.dispatchLocked()
	q.mu.Unlock()
}

// SetManualCredit makes links that later attach to send to addr get n
// credit once, instead of an automatic credit window.
func (b *Broker) SetManualCredit(addr string, n uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.manual[addr] = n
}

// SetRejectOversize makes links that later attach to send to addr reject a
// delivery over the max-message-size instead of detaching
// (amqp.Receiver.SetRejectOversize).
func (b *Broker) SetRejectOversize(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reject[addr] = true
}

// Len returns the number of messages waiting on an address.
func (b *Broker) Len(addr string) int {
	q := b.queue(addr)
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// Take removes and returns the messages waiting on an address.
func (b *Broker) Take(addr string) [][]byte {
	q := b.queue(addr)
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([][]byte, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = m.payload
	}
	q.msgs = nil
	return out
}

// Lost returns how many deliveries the engine reported lost (the link ended
// while they were unsettled); they were put back on their queues.
func (b *Broker) Lost() int64 { return b.lost.Load() }

// Conns returns the number of connections currently open.
func (b *Broker) Conns() int64 { return b.conns.Load() }

// Detached returns how many links have ended.
func (b *Broker) Detached() int64 { return b.detached.Load() }

// CloseErrors delivers the error of every connection that ended (nil for a
// clean close), for tests that assert why.
func (b *Broker) CloseErrors() <-chan error { return b.closeErrs }

func (b *Broker) queue(addr string) *queue {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queues[addr]
	if q == nil {
		q = &queue{b: b, name: addr}
		b.queues[addr] = q
	}
	return q
}

// handler is the broker's amqp.Handler.
type handler struct{ b *Broker }

// Open implements amqp.Handler.
func (h handler) Open(*amqp.Conn) error {
	h.b.conns.Add(1)
	return nil
}

// Begin implements amqp.Handler.
func (h handler) Begin(*amqp.Session) error { return nil }

// End implements amqp.Handler.
func (h handler) End(*amqp.Session, error) {}

// Close implements amqp.Handler.
func (h handler) Close(_ *amqp.Conn, err error) {
	h.b.conns.Add(-1)
	select {
	case h.b.closeErrs <- err:
	default:
	}
}

// AttachReceiver implements amqp.Handler: the peer sends to Target.Address.
func (h handler) AttachReceiver(r *amqp.Receiver) (amqp.ReceiverHandler, error) {
	t := r.Remote().Target
	if t == nil || t.Address == "" {
		return nil, amqp.NewError(amqp.CondInvalidField, "a target address is required")
	}
	h.b.mu.Lock()
	n, manual := h.b.manual[t.Address]
	reject := h.b.reject[t.Address]
	h.b.mu.Unlock()
	if reject {
		r.SetRejectOversize()
	}
	if manual {
		r.SetCreditWindow(0)
		if err := r.AddCredit(n); err != nil {
			return nil, err
		}
	}
	return &producer{q: h.b.queue(t.Address)}, nil
}

// AttachSender implements amqp.Handler: the peer receives from
// Source.Address.
func (h handler) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	src := s.Remote().Source
	if src == nil || src.Address == "" {
		return nil, amqp.NewError(amqp.CondInvalidField, "a source address is required")
	}
	q := h.b.queue(src.Address)
	c := &consumer{q: q, s: s, inflight: make(map[uint32]message)}
	q.mu.Lock()
	q.consumers = append(q.consumers, c)
	q.mu.Unlock()
	return c, nil
}

// producer enqueues what the peer sends.
type producer struct{ q *queue }

// Transfer enqueues a copy of the message and accepts it.
func (p *producer) Transfer(r *amqp.Receiver, d amqp.Delivery) {
	q := p.q
	q.mu.Lock()
	q.msgs = append(q.msgs, message{format: d.Format, payload: append([]byte(nil), d.Payload...)})
	q.dispatchLocked()
	q.mu.Unlock()
	if !d.Settled {
		_ = d.Settle(&frames.Accepted{})
	}
}

// Detach counts the ended link.
func (p *producer) Detach(*amqp.Receiver, error) { p.q.b.detached.Add(1) }

// consumer delivers a queue's messages to the peer.
type consumer struct {
	q        *queue
	s        *amqp.Sender
	inflight map[uint32]message // unsettled deliveries, guarded by q.mu
	gone     bool
}

// Flow hands waiting messages to the new credit and answers a drain.
func (c *consumer) Flow(s *amqp.Sender, f amqp.Flow) {
	q := c.q
	q.mu.Lock()
	q.dispatchLocked()
	q.mu.Unlock()
	if f.Drain {
		_ = s.CompleteDrain()
	}
}

// Outcome forgets a settled delivery, or requeues it when released,
// modified or lost.
func (c *consumer) Outcome(_ *amqp.Sender, o amqp.Outcome) {
	if !o.Settled && !o.Lost {
		return
	}
	q := c.q
	q.mu.Lock()
	defer q.mu.Unlock()
	m, ok := c.inflight[o.ID]
	if !ok {
		return
	}
	delete(c.inflight, o.ID)
	requeue := o.Lost
	switch o.State.(type) {
	case *frames.Released, *frames.Modified:
		requeue = true
	}
	if o.Lost {
		q.b.lost.Add(1)
	}
	if requeue {
		q.msgs = append([]message{m}, q.msgs...)
		q.dispatchLocked()
	}
}

// Detach removes the consumer from its queue.
func (c *consumer) Detach(*amqp.Sender, error) {
	q := c.q
	q.mu.Lock()
	c.gone = true
	for i, x := range q.consumers {
		if x == c {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			break
		}
	}
	q.mu.Unlock()
	q.b.detached.Add(1)
}

// dispatchLocked hands waiting messages to consumers with credit, round
// robin.
func (q *queue) dispatchLocked() {
	for len(q.msgs) > 0 && len(q.consumers) > 0 {
		sent := false
		for range q.consumers {
			c := q.consumers[q.next%len(q.consumers)]
			q.next++
			m := q.msgs[0]
			id, err := c.s.TrySend(&amqp.Message{Format: m.format, Payload: m.payload})
			if err != nil {
				continue // no credit, or the link is going away
			}
			if !c.settledMode() {
				c.inflight[id] = m
			}
			q.msgs[0] = message{}
			q.msgs = q.msgs[1:]
			sent = true
			break
		}
		if !sent {
			return
		}
	}
}

// settledMode reports whether the consumer's deliveries go pre-settled.
func (c *consumer) settledMode() bool {
	return c.s.Reply().SndSettleMode == frames.SenderSettleSettled
}
