package servicebus

import (
	"context"
	"errors"
	"slices"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// sendLink is a client sender to a queue or topic. Deliveries are parsed on
// the reader goroutine and sent to the broker in order by a worker, so that
// the connection never waits for the store; each is settled when the broker
// has it durably. The engine's credit window (credit plus unsettled
// deliveries) bounds the work in flight.
type sendLink struct {
	c     *conn
	path  string
	q     serial[inbound]
	slots chan struct{}     // one per send in flight, at most linkPipeline
	last  *broker.Pending   // the link's latest send: the next one publishes after it
	msgs  []*broker.Message // run's buffer for a send's messages, reused
	auth  sendAuth          // Transfer's (the reader goroutine's)
}

// linkPipeline is how many sends (each one commit) a sender link keeps in
// flight: while one waits for its fsync the next is decided and queued for
// the following group commit. The broker publishes them in the link's
// order.
const linkPipeline = 4

// inbound is one delivery on its way to the broker.
type inbound struct {
	d    amqp.Delivery
	one  *broker.Message   // a single message's delivery
	msgs []*broker.Message // a batch's
	err  error             // refused before reaching the broker
}

// messages returns the delivery's messages.
func (in *inbound) messages() []*broker.Message {
	if in.one != nil {
		return []*broker.Message{in.one}
	}
	return in.msgs
}

// propMaxBatchSize is the attach property telling the SDKs the largest batch.
const propMaxBatchSize encoding.Symbol = "com.microsoft:max-message-batch-size"

func (c *conn) attachSender(r *amqp.Receiver, addr Address) (amqp.ReceiverHandler, error) {
	if addr.SubQueue != SubQueueNone {
		return nil, amqp.NewError(amqp.CondNotAllowed, "cannot send to the dead-letter sub-queue %q", addr.Path())
	}
	if err := c.authorize(addr.Entity, sas.Send); err != nil {
		return nil, amqpError(err)
	}
	ctx := context.Background()
	maxKB := int64(0)
	if p, err := broker.ParsePath(addr.Entity); err != nil || p.Subscription != "" {
		return nil, amqp.NewError(amqp.CondNotAllowed, "cannot send to %q: send to a queue or topic", addr.Entity)
	}
	if q, err := c.h.b.GetQueue(ctx, addr.Entity); err == nil {
		maxKB = q.Properties.MaxMessageSizeInKilobytes
	} else if !errors.Is(err, broker.ErrNotFound) {
		return nil, amqpError(err)
	} else if t, err := c.h.b.GetTopic(ctx, addr.Entity); err == nil {
		maxKB = t.Properties.MaxMessageSizeInKilobytes
	} else {
		return nil, amqpError(err)
	}
	if maxKB <= 0 {
		maxKB = broker.DefaultMaxMessageSizeInKilobytes
	}
	reply := r.Reply()
	reply.MaxMessageSize = uint64(maxKB) * 1024
	// Service Bus senders: the client settles mixed and the broker settles
	// first, whatever the client asked. The Python SDK (pyamqp) asks for
	// rcv-settle-mode second but ignores an unsettled disposition, so its
	// sends would never complete; a broker settling first says so here.
	reply.RcvSettleMode = frames.ReceiverSettleFirst
	if reply.Properties == nil {
		reply.Properties = encoding.Fields{}
	}
	reply.Properties[propMaxBatchSize] = uint64(maxKB) * 1024
	r.SetCreditWindow(c.h.credit)
	// Service Bus rejects a message over the size limit and keeps the link.
	r.SetRejectOversize()
	l := &sendLink{c: c, path: addr.Entity, slots: make(chan struct{}, linkPipeline)}
	l.q.run = l.run
	c.h.metrics.LinkAttached(addr.Entity, false)
	return l, nil
}

// Transfer parses the delivery and queues it for the broker.
func (l *sendLink) Transfer(_ *amqp.Receiver, d amqp.Delivery) {
	in := inbound{d: d}
	in.d.Tag = nil
	in.d.Payload = nil
	if err := l.auth.check(l.c, l.path); err != nil {
		in.err = err
	} else {
		in.one, in.msgs, in.err = ingestDelivery(d.Format, d.Payload)
	}
	l.q.push(in)
}

// ingestDelivery maps a delivery's payload to broker messages: a single
// message to one, a batch to batch.
func ingestDelivery(format uint32, payload []byte) (one *broker.Message, batch []*broker.Message, err error) {
	if format != message.FormatBatch {
		m, err := ingest(payload)
		return m, nil, err
	}
	parts, err := message.SplitBatch(payload)
	if err != nil {
		return nil, nil, badRequest("the batch is not valid: %v", err)
	}
	msgs := make([]*broker.Message, len(parts))
	for i, p := range parts {
		if msgs[i], err = ingest(p); err != nil {
			return nil, nil, badRequest("batch message %d: %v", i, err)
		}
	}
	return nil, msgs, nil
}

// run sends a batch of deliveries to the broker: consecutive valid
// deliveries go in one send (one commit), falling back to one send each when
// that fails, so that every delivery gets its own outcome. Sends are
// pipelined (linkPipeline): run returns once they are decided, and each is
// settled when it is durable and published.
func (l *sendLink) run(batch []inbound) {
	start := 0 // batch[start:i] are valid deliveries not yet sent
	for i := range batch {
		if batch[i].err != nil {
			l.sendGroup(batch[start:i])
			start = i + 1
			l.settle(batch[i])
		}
	}
	l.sendGroup(batch[start:])
}

// sendGroup sends the messages of valid deliveries in one send.
func (l *sendLink) sendGroup(group []inbound) {
	if len(group) == 0 {
		return
	}
	ctx := context.Background()
	ins := slices.Clone(group) // the caller's batch is reused once run returns
	msgs := l.msgs[:0]
	for i := range ins {
		if ins[i].one != nil {
			msgs = append(msgs, ins[i].one)
		} else {
			msgs = append(msgs, ins[i].msgs...)
		}
	}
	l.slots <- struct{}{}
	l.last = l.c.h.b.SendAsync(ctx, l.path, msgs, l.last, func(_ []int64, err error) {
		defer func() { <-l.slots }()
		if err != nil && len(ins) > 1 {
			for i := range ins {
				ins[i].err = l.c.h.b.Send(ctx, l.path, ins[i].messages())
			}
		} else {
			for i := range ins {
				ins[i].err = err
			}
		}
		for _, in := range ins {
			l.settle(in)
		}
	})
	clear(msgs) // SendAsync keeps no reference to the slice
	l.msgs = msgs[:0]
}

// settle answers a delivery: accepted, or rejected with the mapped error.
func (l *sendLink) settle(in inbound) {
	if in.err != nil {
		l.c.h.log.Debug("send refused", "entity", l.path, "err", in.err)
		settle(in.d, &frames.Rejected{Error: amqpError(in.err)})
		return
	}
	settle(in.d, &frames.Accepted{})
}

// Detach counts the link's end; queued deliveries still reach the broker
// (their settlement then fails quietly, as the client will resend them).
func (l *sendLink) Detach(*amqp.Receiver, error) { l.c.h.metrics.LinkDetached(l.path, false) }
