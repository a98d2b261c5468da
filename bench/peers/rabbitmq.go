package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/busbar-io/busbar/benchcore"
)

// RabbitMQ drives RabbitMQ over AMQP 0.9.1: durable quorum queues,
// persistent messages, publisher confirms and manual acknowledgements.
type RabbitMQ struct {
	// URL is the broker's AMQP URL, e.g. amqp://guest:guest@127.0.0.1:25673/.
	URL string
	// Prefetch is the consumer's QoS prefetch count.
	Prefetch int

	queues  []string
	keyed   bool
	version string
}

// Info implements benchcore.Driver.
func (r *RabbitMQ) Info() benchcore.Info {
	return benchcore.Info{Broker: "rabbitmq " + r.version, Client: "amqp091-go v1.16.0",
		Durability: "quorum queue: fsync (Raft WAL) before confirm",
		Ordering:   "a quorum queue per partition, one consumer each"}
}

// Prepare implements benchcore.Driver: it (re)declares the queues.
func (r *RabbitMQ) Prepare(_ context.Context, w benchcore.Workload) error {
	conn, err := amqp.Dial(r.URL)
	if err != nil {
		return err
	}
	defer conn.Close()
	if v, ok := conn.Properties["version"].(string); ok {
		r.version = v
	}
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	r.keyed = w.Keyed()
	r.queues = []string{"bench"}
	if r.keyed {
		r.queues = r.queues[:0]
		for i := 0; i < w.Consumers; i++ {
			r.queues = append(r.queues, fmt.Sprintf("bench.p%d", i))
		}
	}
	for _, q := range r.queues {
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			return fmt.Errorf("delete %s: %w", q, err)
		}
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			return fmt.Errorf("declare %s: %w", q, err)
		}
	}
	return nil
}

// Close implements benchcore.Driver.
func (r *RabbitMQ) Close() error { return nil }

// NewProducer implements benchcore.Driver.
func (r *RabbitMQ) NewProducer(context.Context, int) (benchcore.Producer, error) {
	conn, err := amqp.Dial(r.URL)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	return &rabbitProducer{r: r, conn: conn, ch: ch}, nil
}

type rabbitProducer struct {
	r    *RabbitMQ
	conn *amqp.Connection
	ch   *amqp.Channel
	mu   sync.Mutex // publishes on a channel are serialized; confirms are awaited outside
}

// Send implements benchcore.Producer: publish all, then wait for every confirm.
func (p *rabbitProducer) Send(ctx context.Context, msgs []benchcore.Outgoing) error {
	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	p.mu.Lock()
	for _, m := range msgs {
		q := p.r.queues[0]
		if p.r.keyed {
			q = p.r.queues[m.Partition]
		}
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: m.Body})
		if err != nil {
			p.mu.Unlock()
			return err
		}
		confirms = append(confirms, dc)
	}
	p.mu.Unlock()
	for _, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("publish nacked")
		}
	}
	return nil
}

func (p *rabbitProducer) Close() error { return p.conn.Close() }

// NewConsumer implements benchcore.Driver.
func (r *RabbitMQ) NewConsumer(_ context.Context, index int) (benchcore.Consumer, error) {
	conn, err := amqp.Dial(r.URL)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := ch.Qos(r.Prefetch, 0, false); err != nil {
		conn.Close()
		return nil, err
	}
	q := r.queues[0]
	if r.keyed {
		q = r.queues[index]
	}
	return &rabbitConsumer{conn: conn, ch: ch, queue: q}, nil
}

type rabbitConsumer struct {
	conn  *amqp.Connection
	ch    *amqp.Channel
	queue string
}

// Run implements benchcore.Consumer: manual ack after delivery.
func (c *rabbitConsumer) Run(ctx context.Context, deliver benchcore.DeliverFunc) error {
	ds, err := c.ch.ConsumeWithContext(ctx, c.queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-ds:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("delivery channel closed")
			}
			deliver(d.Body)
			if err := d.Ack(false); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		}
	}
}

func (c *rabbitConsumer) Close() error { return c.conn.Close() }
