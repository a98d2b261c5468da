package peers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/busbar-io/busbar/benchcore"
)

// NATS drives NATS JetStream: a file-store work-queue stream, acknowledged
// (asynchronous, awaited) publishes and pull consumers with explicit acks.
type NATS struct {
	// URL is the server's URL, e.g. nats://127.0.0.1:24222.
	URL string
	// Prefetch is the most messages a pull consumer keeps buffered.
	Prefetch int
	// SyncAlways labels the run: whether the server was started with
	// sync_interval: always (the driver cannot see the server's setting).
	SyncAlways bool

	keyed   bool
	version string
}

const natsStream = "BENCH"

// Info implements benchcore.Driver.
func (n *NATS) Info() benchcore.Info {
	d := "no fsync before ack (file store, default sync_interval 2 min)"
	if n.SyncAlways {
		d = "fsync before ack (sync_interval: always)"
	}
	return benchcore.Info{Broker: "nats-server " + n.version, Client: "nats.go v1.55.0 (jetstream)",
		Durability: d, Ordering: "a subject per partition, one pull consumer each"}
}

func (n *NATS) subject(keyed bool, part int) string {
	if keyed {
		return "bench.p." + strconv.Itoa(part)
	}
	return "bench.q"
}

func (n *NATS) consumerName(index int) string {
	if n.keyed {
		return "p" + strconv.Itoa(index)
	}
	return "shared"
}

// Prepare implements benchcore.Driver: it recreates the stream and its consumers.
func (n *NATS) Prepare(ctx context.Context, w benchcore.Workload) error {
	nc, err := nats.Connect(n.URL)
	if err != nil {
		return err
	}
	defer nc.Close()
	n.version = nc.ConnectedServerVersion()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := js.DeleteStream(ctx, natsStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream: %w", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{"bench.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Replicas: 1}); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	n.keyed = w.Keyed()
	parts := 1
	if n.keyed {
		parts = w.Consumers
	}
	for i := 0; i < parts; i++ {
		cfg := jetstream.ConsumerConfig{Durable: n.consumerName(i), AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: n.subject(n.keyed, i), MaxAckPending: 20000}
		if _, err := js.CreateOrUpdateConsumer(ctx, natsStream, cfg); err != nil {
			return fmt.Errorf("create consumer: %w", err)
		}
	}
	return nil
}

// Close implements benchcore.Driver.
func (n *NATS) Close() error { return nil }

// NewProducer implements benchcore.Driver.
func (n *NATS) NewProducer(context.Context, int) (benchcore.Producer, error) {
	nc, err := nats.Connect(n.URL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsProducer{n: n, nc: nc, js: js}, nil
}

type natsProducer struct {
	n  *NATS
	nc *nats.Conn
	js jetstream.JetStream
}

// Send implements benchcore.Producer: asynchronous publishes, every ack awaited.
func (p *natsProducer) Send(ctx context.Context, msgs []benchcore.Outgoing) error {
	fs := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := p.js.PublishAsync(p.n.subject(p.n.keyed, m.Partition), m.Body)
		if err != nil {
			return err
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (p *natsProducer) Close() error { p.nc.Close(); return nil }

// NewConsumer implements benchcore.Driver.
func (n *NATS) NewConsumer(ctx context.Context, index int) (benchcore.Consumer, error) {
	nc, err := nats.Connect(n.URL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c, err := js.Consumer(ctx, natsStream, n.consumerName(index))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsConsumer{n: n, nc: nc, c: c}, nil
}

type natsConsumer struct {
	n  *NATS
	nc *nats.Conn
	c  jetstream.Consumer
}

// Run implements benchcore.Consumer: explicit ack after delivery.
func (c *natsConsumer) Run(ctx context.Context, deliver benchcore.DeliverFunc) error {
	it, err := c.c.Messages(jetstream.PullMaxMessages(c.n.Prefetch))
	if err != nil {
		return err
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		deliver(m.Data())
		if err := m.Ack(); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
}

func (c *natsConsumer) Close() error { c.nc.Close(); return nil }
