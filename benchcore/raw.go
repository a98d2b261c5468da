package benchcore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// RawClientVersion names the raw client in reports.
const RawClientVersion = "raw AMQP 1.0 (busbar bench)"

// RawDriver drives a Service Bus–compatible broker with the bench's own
// AMQP 1.0 client (--client raw), which spends far less CPU per message
// than go-amqp or the SDK so that, on a small machine, a run measures the
// broker rather than the client:
//
//   - producers: one connection, session and sender link each; every
//     message is one transfer frame copied from a template encoded once
//     (only the delivery id, the tag and the engine's 32-byte header are
//     patched); transfers are pipelined up to the link credit the broker
//     grants, and concurrent Send calls share it;
//   - consumers: link credit of Prefetch renewed at half, each body handed
//     to the engine on the connection's reader goroutine, and peek-lock
//     deliveries accepted in ranges: one disposition (first..last) for
//     everything that arrived in one read;
//   - peek-lock (the default) attaches with rcv-settle-mode second, as the
//     SDKs do: the client's dispositions are unsettled and Busbar answers
//     each with its verdict once the complete is applied (committed); a
//     consumer leaving a session waits for those answers. With
//     SettleFirst the client sends settled dispositions instead, which
//     Busbar applies the same way but does not answer.
//   - receive-and-delete attaches with snd-settle-mode settled: Busbar
//     commits the removal when it grants the delivery and the client
//     settles nothing.
//   - keyed workloads accept the next available session (the
//     com.microsoft:session-filter with a null value, described as the Go
//     SDK writes it) on ConcurrentSessions AMQP sessions per consumer.
//
// Authentication: SASL PLAIN with the connection string's key name and key
// when the broker offers it (Busbar does: the connection is then
// authorized as that rule), otherwise SASL ANONYMOUS and a CBS put-token
// of a SAS token for the queue, the way the SDKs authorize.
type RawDriver struct {
	busbarBase
	// noPlain makes the driver use ANONYMOUS and CBS even when PLAIN is
	// offered (tests).
	noPlain bool
}

// NewRawDriver returns a raw-client driver for cfg, which needs an
// emulator-style (plain TCP) connection string.
func NewRawDriver(cfg BusbarConfig) (*RawDriver, error) {
	b, err := newBusbarBase(cfg, "raw")
	if err != nil {
		return nil, err
	}
	return &RawDriver{busbarBase: b}, nil
}

// Info implements Driver.
func (d *RawDriver) Info() Info {
	client := RawClientVersion
	if !d.cfg.ReceiveAndDelete {
		if d.cfg.SettleFirst {
			client += ", settle first"
		} else {
			client += ", settle second"
		}
	}
	return busbarInfo(d.cfg, client)
}

// Prepare implements Driver.
func (d *RawDriver) Prepare(ctx context.Context, w Workload) error {
	if w.Keyed() && d.cfg.SettleFirst && !d.cfg.ReceiveAndDelete {
		// Busbar applies settled completes asynchronously; leaving a
		// session right after them can release the session (and abandon
		// the messages) before they are applied, and with no answer the
		// client cannot wait for them.
		return errors.New("--settle-first cannot be used with sessions: the client could not know when to let a session go")
	}
	return d.busbarBase.Prepare(ctx, w)
}

// dial opens an authorized connection for the queue.
func (d *RawDriver) dial(ctx context.Context) (*rawConn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	host, addr := d.ci.host, d.ci.host
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	} else {
		addr = net.JoinHostPort(addr, "5672")
	}
	auth := rawAuth{host: host, user: d.ci.keyName, key: d.ci.key}
	if d.noPlain {
		auth.user = ""
	}
	c, err := dialRaw(ctx, addr, auth)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if c.mech != "PLAIN" {
		if err := c.putToken(ctx, "amqp://"+d.ci.host+"/"+d.queue, d.ci.keyName, d.ci.key); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// NewProducer implements Driver.
func (d *RawDriver) NewProducer(ctx context.Context, index int) (Producer, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.beginSession(ctx)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	l := newRawLink(s, true)
	name := fmt.Sprintf("bench-snd-%d-%08x", index, newRunID())
	if _, err := s.attach(ctx, l, &frames.Attach{Name: name, Handle: 0, Role: frames.RoleSender,
		SndSettleMode: frames.SenderSettleUnsettled, Source: &frames.Source{Address: name},
		Target: &frames.Target{Address: d.queue}}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("sender link: %w", err)
	}
	return &rawProducer{c: c, l: l}, nil
}

type rawProducer struct {
	c    *rawConn
	l    *rawLink
	tmpl atomic.Pointer[rawTemplate] // the last template used, shared read-only
}

// Send implements Producer.
func (p *rawProducer) Send(ctx context.Context, msgs []Outgoing) error {
	t, err := p.l.send(ctx, msgs, p.tmpl.Load())
	if t != nil {
		p.tmpl.Store(t)
	}
	return err
}

func (p *rawProducer) Close() error { return p.c.Close() }

// CopiesBodies implements BodyCopier: Send copies each body into a frame.
func (p *rawProducer) CopiesBodies() bool { return true }

// NewConsumer implements Driver.
func (d *RawDriver) NewConsumer(ctx context.Context, _ int) (Consumer, error) {
	c, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConsumer{d: d, c: c}, nil
}

type rawConsumer struct {
	d *RawDriver
	c *rawConn
}

func (c *rawConsumer) Close() error { return c.c.Close() }

// rawAcceptTimeout is how long the broker may wait for a session to
// become available before it refuses a session receiver (a variable for
// tests).
var rawAcceptTimeout = 5 * time.Second

// session filter descriptor the Go SDK writes (see amqp.go).
var nextSessionFilter = encoding.Fields{sessionFilter: &encoding.Described{Descriptor: uint64(sessionFilterCode), Value: nil}}

// openReceiver attaches a receiver (of the next available session when
// keyed) on s and grants it credit.
func (c *rawConsumer) openReceiver(ctx context.Context, s *rawSession, deliver DeliverFunc, keyed bool) (*rawLink, error) {
	cfg := &c.d.cfg
	l := newRawLink(s, false)
	l.deliver = deliver
	l.prefetch = uint32(cfg.Prefetch)
	name := fmt.Sprintf("bench-rcv-%08x", newRunID())
	a := &frames.Attach{Name: name, Handle: 0, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: c.d.queue}, Target: &frames.Target{Address: name}}
	switch {
	case cfg.ReceiveAndDelete:
		a.SndSettleMode = frames.SenderSettleSettled
	case cfg.SettleFirst:
		a.SndSettleMode, a.RcvSettleMode = frames.SenderSettleUnsettled, frames.ReceiverSettleFirst
		l.settle, l.settleFirst = true, true
	default:
		a.SndSettleMode, a.RcvSettleMode = frames.SenderSettleUnsettled, frames.ReceiverSettleSecond
		l.settle = true
	}
	if keyed {
		a.Source.Filter = nextSessionFilter
		a.Properties = encoding.Fields{"com.microsoft:timeout": uint32(rawAcceptTimeout / time.Millisecond)}
	}
	if _, err := s.attach(ctx, l, a); err != nil {
		return nil, err
	}
	conn := s.c
	conn.mu.Lock()
	l.creditLeft = l.prefetch
	credit := l.prefetch
	s.flowLocked(&credit, 0)
	conn.mu.Unlock()
	conn.flush()
	return l, nil
}

// Run implements Consumer. Once it returns, deliver is never called again.
func (c *rawConsumer) Run(ctx context.Context, deliver DeliverFunc) error {
	defer func() {
		c.c.mu.Lock()
		c.c.muted = true
		c.c.mu.Unlock()
	}()
	if !c.d.keyed {
		s, err := c.c.beginSession(ctx)
		if err != nil {
			return err
		}
		l, err := c.openReceiver(ctx, s, deliver, false)
		if err != nil {
			return fmt.Errorf("receiver link: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.detached:
			return &rawLinkError{l.detErr}
		case <-c.c.done:
			return c.c.failure()
		}
	}
	return runConcurrently(ctx, c.d.cfg.ConcurrentSessions, func(ctx context.Context) error {
		s, err := c.c.beginSession(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ctx.Err() == nil {
			if err := c.oneSession(ctx, s, deliver); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		return nil
	})
}

// oneSession accepts the next available session, receives it until its
// last message or SessionIdle without one, completes what it received and
// lets the session go.
func (c *rawConsumer) oneSession(ctx context.Context, s *rawSession, deliver DeliverFunc) error {
	l, err := c.openReceiver(ctx, s, deliver, true)
	if err != nil {
		var le *rawLinkError
		if errors.As(err, &le) && le.condition() == "com.microsoft:timeout" {
			return nil // no session available yet
		}
		return fmt.Errorf("accept next session: %w", err)
	}
	idle := time.NewTimer(c.d.cfg.SessionIdle)
	defer idle.Stop()
	select {
	case <-l.lastSeen:
	case <-idle.C:
	case <-l.detached:
		return &rawLinkError{l.detErr}
	case <-ctx.Done():
		return nil
	case <-c.c.done:
		return c.c.failure()
	}
	// Stop the flow of messages, have every complete applied, then leave.
	conn := s.c
	conn.mu.Lock()
	l.closing = true
	zero := uint32(0)
	s.flowLocked(&zero, l.received)
	conn.mu.Unlock()
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.waitAnswered(dctx); err != nil {
		return err
	}
	return l.detach(dctx)
}
