package benchcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/go-amqp"
)

// AMQPClientVersion names the client the lean driver uses.
const AMQPClientVersion = "go-amqp v1.7.0 (lean)"

// AMQPDriver drives a Service Bus–compatible broker with go-amqp directly:
// SASL ANONYMOUS, a CBS put-token with a SAS token, then plain links. It
// pipelines sends (every message of a batch is its own transfer, and the
// producer waits for all dispositions) and settles asynchronously, so it
// shows what the broker can do with a client that adds little.
type AMQPDriver struct{ busbarBase }

// NewAMQPDriver returns a driver for cfg.
func NewAMQPDriver(cfg BusbarConfig) (*AMQPDriver, error) {
	b, err := newBusbarBase(cfg, "amqp")
	if err != nil {
		return nil, err
	}
	return &AMQPDriver{b}, nil
}

// Info implements Driver.
func (d *AMQPDriver) Info() Info { return busbarInfo(d.cfg, AMQPClientVersion) }

// dial opens a connection and authorizes it for the queue with CBS.
func (d *AMQPDriver) dial(ctx context.Context) (*amqp.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+d.ci.host, &amqp.ConnOptions{
		SASLType: amqp.SASLTypeAnonymous(), HostName: d.ci.host})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", d.ci.host, err)
	}
	if err := d.putToken(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// putToken sends a CBS put-token for the queue on its own session, the way
// the Service Bus SDKs do, and checks the 2xx status.
func (d *AMQPDriver) putToken(ctx context.Context, conn *amqp.Conn) error {
	audience := "amqp://" + d.ci.host + "/" + d.queue
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		return fmt.Errorf("cbs session: %w", err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	reply := fmt.Sprintf("$cbs-reply-%08x", newRunID())
	snd, err := s.NewSender(ctx, "$cbs", nil)
	if err != nil {
		return fmt.Errorf("cbs sender: %w", err)
	}
	rcv, err := s.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: reply, Credit: 1,
		SettlementMode: amqp.ReceiverSettleModeFirst.Ptr(), RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr()})
	if err != nil {
		return fmt.Errorf("cbs receiver: %w", err)
	}
	id := fmt.Sprintf("put-token-%08x", newRunID())
	props, token := putTokenRequest(audience, d.ci.keyName, d.ci.key)
	req := &amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: id, ReplyTo: &reply},
		ApplicationProperties: props,
		Value:                 token,
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		return fmt.Errorf("cbs put-token: %w", err)
	}
	resp, err := rcv.Receive(ctx, nil)
	if err != nil {
		return fmt.Errorf("cbs put-token response: %w", err)
	}
	return putTokenStatus(audience, resp.ApplicationProperties)
}

// NewProducer implements Driver.
func (d *AMQPDriver) NewProducer(ctx context.Context, _ int) (Producer, error) {
	conn, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	snd, err := s.NewSender(ctx, d.queue, nil)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("sender link: %w", err)
	}
	return &amqpProducer{conn: conn, snd: snd}, nil
}

type amqpProducer struct {
	conn *amqp.Conn
	snd  *amqp.Sender
}

// Send implements Producer: every message is its own transfer, all in
// flight at once; it returns when every disposition is in.
func (p *amqpProducer) Send(ctx context.Context, msgs []Outgoing) error {
	receipts := make([]amqp.SendReceipt, 0, len(msgs))
	for _, o := range msgs {
		m := amqp.NewMessage(o.Body)
		if o.Key != "" {
			k := o.Key
			m.Properties = &amqp.MessageProperties{GroupID: &k}
		}
		r, err := p.snd.SendWithReceipt(ctx, m, nil)
		if err != nil {
			return err
		}
		receipts = append(receipts, r)
	}
	for _, r := range receipts {
		st, err := r.Wait(ctx)
		if err != nil {
			return err
		}
		if _, ok := st.(*amqp.StateAccepted); !ok {
			return fmt.Errorf("send not accepted: %#v", st)
		}
	}
	return nil
}

func (p *amqpProducer) Close() error { return p.conn.Close() }

// NewConsumer implements Driver.
func (d *AMQPDriver) NewConsumer(ctx context.Context, _ int) (Consumer, error) {
	conn, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &amqpConsumer{d: d, conn: conn}, nil
}

type amqpConsumer struct {
	d    *AMQPDriver
	conn *amqp.Conn
}

// sessionFilter is the Service Bus session filter's descriptor, as the Go SDK writes it.
const sessionFilter = "com.microsoft:session-filter"
const sessionFilterCode = 0x00000137000000C

func (c *amqpConsumer) receiverOptions(session bool) *amqp.ReceiverOptions {
	o := &amqp.ReceiverOptions{Credit: int32(c.d.cfg.Prefetch)}
	if c.d.cfg.ReceiveAndDelete {
		o.SettlementMode = amqp.ReceiverSettleModeFirst.Ptr()
		o.RequestedSenderSettleMode = amqp.SenderSettleModeSettled.Ptr()
	} else {
		o.SettlementMode = amqp.ReceiverSettleModeSecond.Ptr()
	}
	if session {
		o.Filters = []amqp.LinkFilter{amqp.NewLinkFilter(sessionFilter, sessionFilterCode, nil)}
		o.Properties = map[string]any{"com.microsoft:timeout": uint32(5000)}
	}
	return o
}

// Run implements Consumer.
func (c *amqpConsumer) Run(ctx context.Context, deliver DeliverFunc) error {
	if !c.d.keyed {
		s, err := c.conn.NewSession(ctx, nil)
		if err != nil {
			return err
		}
		r, err := s.NewReceiver(ctx, c.d.queue, c.receiverOptions(false))
		if err != nil {
			return fmt.Errorf("receiver link: %w", err)
		}
		return c.drain(ctx, r, deliver, 0)
	}
	return runConcurrently(ctx, c.d.cfg.ConcurrentSessions, func(ctx context.Context) error {
		s, err := c.conn.NewSession(ctx, nil)
		if err != nil {
			return err
		}
		for ctx.Err() == nil {
			r, err := s.NewReceiver(ctx, c.d.queue, c.receiverOptions(true))
			if err != nil {
				var ae *amqp.Error
				if ctx.Err() != nil || (errors.As(err, &ae) && ae.Condition == "com.microsoft:timeout") {
					continue // no session available yet
				}
				return fmt.Errorf("accept next session: %w", err)
			}
			err = c.drain(ctx, r, deliver, c.d.cfg.SessionIdle)
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.Close(cctx)
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// drain receives from r until ctx ends or, when idle > 0, until the key's
// last message was delivered or nothing arrives for idle. Peek-lock
// settlements run concurrently and are all confirmed before it returns.
func (c *amqpConsumer) drain(ctx context.Context, r *amqp.Receiver, deliver DeliverFunc, idle time.Duration) (err error) {
	st := newSettler(c.d.cfg.Prefetch)
	defer func() {
		if serr := st.wait(); serr != nil && err == nil && ctx.Err() == nil {
			err = fmt.Errorf("accept: %w", serr)
		}
	}()
	for ctx.Err() == nil {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if idle > 0 {
			rctx, cancel = context.WithTimeout(ctx, idle)
		}
		m, err := r.Receive(rctx, nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil || (idle > 0 && errors.Is(err, context.DeadlineExceeded)) {
				return nil
			}
			return fmt.Errorf("receive: %w", err)
		}
		dl := deliver(m.GetData())
		if !c.d.cfg.ReceiveAndDelete {
			st.do(func() error {
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				return r.AcceptMessage(sctx, m)
			})
		}
		if idle > 0 && dl.Last {
			return nil
		}
	}
	return nil
}

func (c *amqpConsumer) Close() error { return c.conn.Close() }
