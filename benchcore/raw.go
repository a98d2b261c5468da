package benchcore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
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
//     message is one transfer frame: a template encoded once per key and
//     body size (only the delivery id and the tag are patched) followed by
//     the body; transfers are pipelined up to the link credit the broker
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
//     Each session costs few writes: the attach goes with its credit, the
//     credit's end (at the key's last message) with the last disposition,
//     and the detach, once the completes are answered, with the next
//     attach.
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
	if w.Keyed() && d.cfg.ReceiveAndDelete {
		// A session receiver leaves without waiting for the broker's
		// detach (rawLink.leave) and drops what arrives after: in
		// receive-and-delete mode those messages would be gone.
		return errors.New("--receive-and-delete cannot be used with sessions by the raw client: it drops deliveries that arrive after it leaves a session")
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
	l.name = fmt.Sprintf("bench-snd-%d-%08x", index, newRunID())
	frame, err := frames.Append(nil, frames.TypeAMQP, s.ch, &frames.Attach{Name: l.name, Handle: 0, Role: frames.RoleSender,
		SndSettleMode: frames.SenderSettleUnsettled, Source: &frames.Source{Address: l.name},
		Target: &frames.Target{Address: d.queue}})
	if err == nil {
		err = s.attach(ctx, l, frame, 0)
	}
	if err != nil {
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
	return &rawConsumer{d: d, c: c, prefix: fmt.Sprintf("bench-rcv-%08x-", newRunID())}, nil
}

type rawConsumer struct {
	d      *RawDriver
	c      *rawConn
	prefix string // of its link names
}

func (c *rawConsumer) Close() error { return c.c.Close() }

// rawAcceptTimeout is how long the broker may wait for a session to
// become available before it refuses a session receiver (a variable for
// tests).
var rawAcceptTimeout = 5 * time.Second

// session filter descriptor the Go SDK writes (see amqp.go).
var nextSessionFilter = encoding.Fields{sessionFilter: &encoding.Described{Descriptor: uint64(sessionFilterCode), Value: nil}}

// newReceiver returns a receiver link on s (of the next available session
// when keyed), for an attach by receiverAttach.
func (c *rawConsumer) newReceiver(s *rawSession, deliver DeliverFunc, keyed bool) *rawLink {
	cfg := &c.d.cfg
	l := newRawLink(s, false)
	l.deliver = deliver
	l.prefetch = uint32(cfg.Prefetch)
	l.keyed = keyed
	l.settle = !cfg.ReceiveAndDelete
	l.settleFirst = l.settle && cfg.SettleFirst
	return l
}

// receiverAttach returns the attach of a receiver link called name.
func (c *rawConsumer) receiverAttach(name string, keyed bool) *frames.Attach {
	cfg := &c.d.cfg
	a := &frames.Attach{Name: name, Handle: 0, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: c.d.queue}, Target: &frames.Target{Address: name}}
	switch {
	case cfg.ReceiveAndDelete:
		a.SndSettleMode = frames.SenderSettleSettled
	case cfg.SettleFirst:
		a.SndSettleMode, a.RcvSettleMode = frames.SenderSettleUnsettled, frames.ReceiverSettleFirst
	default:
		a.SndSettleMode, a.RcvSettleMode = frames.SenderSettleUnsettled, frames.ReceiverSettleSecond
	}
	if keyed {
		a.Source.Filter = nextSessionFilter
		a.Properties = encoding.Fields{"com.microsoft:timeout": uint32(rawAcceptTimeout / time.Millisecond)}
	}
	return a
}

// sessionAttach returns the attach frame of s's next session receiver and
// the link's name. Encoding an attach (its filter and properties) for
// every session cost more than the rest of the link's setup, so s encodes
// it once, with a name ending in a counter of rawNameDigits hex digits,
// and each link patches that counter where the name appears (as the link
// name and the target address). The frame is s's, reused by its next link.
func (c *rawConsumer) sessionAttach(s *rawSession) ([]byte, string, error) {
	if s.attachFrame == nil {
		name := fmt.Sprintf("%s%d-%0*x", c.prefix, s.ch, rawNameDigits, 0)
		f, err := frames.Append(nil, frames.TypeAMQP, s.ch, c.receiverAttach(name, true))
		if err != nil {
			return nil, "", err
		}
		var at []int
		for off := 0; ; {
			i := bytes.Index(f[off:], []byte(name))
			if i < 0 {
				break
			}
			off += i + len(name)
			at = append(at, off-rawNameDigits)
		}
		if len(at) != 2 {
			return nil, "", fmt.Errorf("raw: link name found %d times in its attach, not 2", len(at))
		}
		s.attachFrame, s.nameAt, s.nameLen = f, [2]int(at), len(name)
	}
	s.links++
	var n [rawNameDigits / 2]byte
	binary.BigEndian.PutUint32(n[:], s.links)
	for _, at := range s.nameAt {
		hex.Encode(s.attachFrame[at:at+rawNameDigits], n[:])
	}
	end := s.nameAt[0] + rawNameDigits
	return s.attachFrame, string(s.attachFrame[end-s.nameLen : end]), nil
}

// rawNameDigits is the length of the counter that ends a session receiver's
// name (hex, 32 bits).
const rawNameDigits = 8

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
		l := c.newReceiver(s, deliver, false)
		l.name = fmt.Sprintf("%s%d", c.prefix, s.ch)
		frame, err := frames.Append(nil, frames.TypeAMQP, s.ch, c.receiverAttach(l.name, false))
		if err == nil {
			err = s.attach(ctx, l, frame, l.prefetch)
		}
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
		defer c.c.flush() // the last detach (see rawLink.leave)
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
	// One timer per AMQP session, reused by its links. The broker's attach
	// starts the idle wait (rawLink.onAttach), so that this goroutine is
	// not woken for it: once per session (finished) is the common case.
	if s.idle == nil {
		s.idle = time.NewTimer(time.Hour)
		s.idle.Stop()
	}
	defer s.idle.Stop()
	l := c.newReceiver(s, deliver, true)
	l.idle, l.idleAfter = s.idle, c.d.cfg.SessionIdle
	frame, name, err := c.sessionAttach(s)
	if err == nil {
		l.name = name
		err = s.sendAttach(l, frame, l.prefetch)
	}
	if err != nil {
		return fmt.Errorf("accept next session: %w", err)
	}
	select {
	case <-l.finished: // the common case: nothing left to wait for
	case <-s.idle.C:
	case <-l.detached:
		if !l.isRefused() {
			return &rawLinkError{l.detErr}
		}
		err := l.refusal()
		var le *rawLinkError
		if errors.As(err, &le) && le.condition() == "com.microsoft:timeout" {
			return nil // no session available yet
		}
		return fmt.Errorf("accept next session: %w", err)
	case <-ctx.Done():
		return nil
	case <-c.c.done:
		return c.c.failure()
	}
	// Stop the flow of messages, have every complete applied, then leave.
	return l.leave(s.idle)
}
