package benchcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// SDKClientVersion names the official SDK the SDK driver uses.
const SDKClientVersion = "azservicebus v1.11.0"

// SDKDriver drives a Service Bus–compatible broker with the official Go SDK,
// azservicebus: one client (one AMQP connection) per producer and consumer.
// Keyed workloads use sessions: the session id is the key, and consumers
// accept the next available session until it is drained.
type SDKDriver struct{ busbarBase }

// NewSDKDriver returns a driver for cfg.
func NewSDKDriver(cfg BusbarConfig) (*SDKDriver, error) {
	b, err := newBusbarBase(cfg, "")
	if err != nil {
		return nil, err
	}
	return &SDKDriver{b}, nil
}

// Info implements Driver.
func (d *SDKDriver) Info() Info {
	return busbarInfo(d.cfg, SDKClientVersion)
}

func busbarInfo(cfg BusbarConfig, client string) Info {
	mode := "peek-lock"
	if cfg.ReceiveAndDelete {
		mode = "receive-and-delete"
	}
	return Info{Broker: cfg.BrokerVersion, Client: client + ", " + mode,
		Durability: "fsync before ack (group commit)", Ordering: "sessions (any consumer takes any session)"}
}

// Queue returns the queue the driver uses (after Prepare).
func (d *SDKDriver) Queue() string { return d.queue }

func (d *SDKDriver) newClient() (*azservicebus.Client, error) {
	return azservicebus.NewClientFromConnectionString(d.cfg.ConnectionString, nil)
}

// NewProducer implements Driver.
func (d *SDKDriver) NewProducer(ctx context.Context, _ int) (Producer, error) {
	c, err := d.newClient()
	if err != nil {
		return nil, err
	}
	s, err := c.NewSender(d.queue, nil)
	if err != nil {
		_ = c.Close(ctx)
		return nil, err
	}
	return &sdkProducer{c: c, s: s}, nil
}

type sdkProducer struct {
	c *azservicebus.Client
	s *azservicebus.Sender
}

func sdkMessage(o Outgoing) *azservicebus.Message {
	m := &azservicebus.Message{Body: o.Body}
	if o.Key != "" {
		k := o.Key
		m.SessionID = &k
	}
	return m
}

// Send implements Producer: one message with SendMessage, more as a batch.
func (p *sdkProducer) Send(ctx context.Context, msgs []Outgoing) error {
	if len(msgs) == 1 {
		return p.s.SendMessage(ctx, sdkMessage(msgs[0]), nil)
	}
	b, err := p.s.NewMessageBatch(ctx, nil)
	if err != nil {
		return err
	}
	for _, o := range msgs {
		if err := b.AddMessage(sdkMessage(o), nil); err != nil {
			return fmt.Errorf("batch of %d: %w", len(msgs), err)
		}
	}
	return p.s.SendMessageBatch(ctx, b, nil)
}

func (p *sdkProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.s.Close(ctx)
	return p.c.Close(ctx)
}

// NewConsumer implements Driver.
func (d *SDKDriver) NewConsumer(_ context.Context, _ int) (Consumer, error) {
	c, err := d.newClient()
	if err != nil {
		return nil, err
	}
	return &sdkConsumer{d: d, c: c}, nil
}

type sdkConsumer struct {
	d *SDKDriver
	c *azservicebus.Client
}

// sdkReceiver is what Receiver and SessionReceiver have in common.
type sdkReceiver interface {
	ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	Close(ctx context.Context) error
}

func (c *sdkConsumer) mode() azservicebus.ReceiveMode {
	if c.d.cfg.ReceiveAndDelete {
		return azservicebus.ReceiveModeReceiveAndDelete
	}
	return azservicebus.ReceiveModePeekLock
}

// Without sessions, ReceiveMessages gathers for BusbarConfig.ReceiveWait
// after the first message instead of the SDK's default (20 ms in peek-lock
// and 1 s in receive-and-delete), which would add up to that much to every
// latency at low rates.
//
// Sessions are different. In peek-lock the SDK releases every message that
// reaches the link between two ReceiveMessages calls (its "releaser"), and a
// released session message comes back after those already on the wire, so
// the application sees the session out of order (seen here: a few in
// 20,000). Asking for one message per call (SessionPrefetch 1, the default)
// leaves no spare credit and so nothing to release; above 1 the SDK's 20 ms
// gathering time is kept to make it rare.
var sessionReceiveOpts = &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: 20 * time.Millisecond}

// Run implements Consumer.
func (c *sdkConsumer) Run(ctx context.Context, deliver DeliverFunc) error {
	if !c.d.keyed {
		st := newSettler(c.d.cfg.Prefetch)
		defer func() { _ = st.wait() }()
		r, err := c.c.NewReceiverForQueue(c.d.queue, &azservicebus.ReceiverOptions{ReceiveMode: c.mode()})
		if err != nil {
			return err
		}
		defer closeQuietly(r)
		_, err = c.drain(ctx, r, st, deliver, 0)
		return err
	}
	return runConcurrently(ctx, c.d.cfg.ConcurrentSessions, func(ctx context.Context) error {
		for ctx.Err() == nil {
			if err := c.oneSession(ctx, deliver); err != nil {
				return err
			}
		}
		return nil
	})
}

// oneSession accepts the next available session and drains it.
func (c *sdkConsumer) oneSession(ctx context.Context, deliver DeliverFunc) error {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	r, err := c.c.AcceptNextSessionForQueue(actx, c.d.queue, &azservicebus.SessionReceiverOptions{ReceiveMode: c.mode()})
	cancel()
	if err != nil {
		var sbErr *azservicebus.Error
		if ctx.Err() != nil || (errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return nil // no session available yet
		}
		return fmt.Errorf("accept next session: %w", err)
	}
	st := newSettler(c.d.cfg.Prefetch)
	_, err = c.drain(ctx, r, st, deliver, c.d.cfg.SessionIdle)
	// Settlements go over the session's link: finish them before closing it.
	serr := st.wait()
	closeQuietly(r)
	if err != nil {
		return err
	}
	if serr != nil && ctx.Err() == nil {
		return fmt.Errorf("complete: %w", serr)
	}
	return nil
}

// drain receives from r until ctx ends or, when idle > 0, until the last
// message of the session's key was delivered or nothing arrives for idle.
func (c *sdkConsumer) drain(ctx context.Context, r sdkReceiver, st *settler, deliver DeliverFunc, idle time.Duration) (int, error) {
	n := 0
	receiveOpts := &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: c.d.cfg.ReceiveWait}
	for ctx.Err() == nil {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if idle > 0 {
			rctx, cancel = context.WithTimeout(ctx, idle)
		}
		opts, n := receiveOpts, c.d.cfg.Prefetch
		if idle > 0 {
			opts, n = sessionReceiveOpts, c.d.cfg.SessionPrefetch
		}
		msgs, err := r.ReceiveMessages(rctx, n, opts)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return n, nil
			}
			if idle > 0 && errors.Is(err, context.DeadlineExceeded) {
				return n, nil
			}
			return n, fmt.Errorf("receive: %w", err)
		}
		if idle > 0 && len(msgs) == 0 {
			return n, nil
		}
		last := false
		for _, m := range msgs {
			dl := deliver(m.Body)
			last = last || dl.Last
			n++
			if c.d.cfg.ReceiveAndDelete {
				continue
			}
			st.do(func() error {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				return r.CompleteMessage(sctx, m, nil)
			})
		}
		if idle > 0 && last {
			return n, nil
		}
	}
	return n, nil
}

func (c *sdkConsumer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.c.Close(ctx)
}

func closeQuietly(r interface{ Close(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.Close(ctx)
}
