package servicebus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// This file forwards links between the nodes of a cluster. A link attached
// for a queue or topic that another node owns is relayed to that node over
// internal AMQP connections (go-amqp, pooled per peer, authenticated with
// SASL PLAIN and the shared root key): each client link gets a twin link,
// in its own session, on the owner,
// with the same name, addresses, settle modes, filters and properties, and
// the relay copies transfers, credit, drains, outcomes and the owner's
// verdicts between them. The client's claims are checked here, as for a
// local link, since the owner sees only the root key. When the twin ends
// (its owner dropped the entity, or died), the client's link is detached
// with the owner's error, or amqp:link:detach-forced, and the SDKs attach
// again: to this node, which then forwards to the new owner or serves the
// entity itself.

// Forwarding configures link forwarding (see NewHandler).
type Forwarding struct {
	// Owner returns the AMQP address (host:port) of the node serving the
	// queue or topic whose broker id is top, or an error
	// (broker.ErrNotOwned while it has no owner).
	Owner func(ctx context.Context, top uint64) (string, error)
	// KeyName and Key authenticate the node to its peers (SASL PLAIN): a
	// rule with Manage, Send and Listen on the whole namespace.
	KeyName, Key string
	// AttachTimeout bounds the attach of a twin link other than an
	// accept-next-session (which waits as long as the client asked);
	// default 30 s.
	AttachTimeout time.Duration
}

// linksPerConn is how many twin links (one session each) a connection to
// a peer carries before another is dialed; the engine accepts 1,024
// sessions per connection.
const linksPerConn = 512

// peers holds the connections to the peer nodes, by address.
type peers struct {
	f     Forwarding
	mu    sync.Mutex
	conns map[string][]*peerConn
}

type peerConn struct {
	ready chan struct{}
	c     *goamqp.Conn
	err   error
	links int // twins on it, under peers.mu
}

// usable reports whether pc is dialed, or being dialed, and not closed.
func (pc *peerConn) usable() bool {
	select {
	case <-pc.ready:
		return pc.err == nil && !isDone(pc.c.Done())
	default:
		return true
	}
}

// conn returns a connection to the node at addr for the client connection
// cc, and counts a twin link on it (see release). Every twin of one client
// connection goes over the same connection to a peer, as the owner routes
// $management replies and finds session receivers by link name within a
// connection; other client connections take the least used one with room,
// or a new one.
func (p *peers) conn(ctx context.Context, cc *conn, addr string) (*peerConn, error) {
	p.mu.Lock()
	pc := cc.peerConns[addr]
	if pc == nil || !pc.usable() {
		pc = nil
		live := p.conns[addr][:0]
		for _, x := range p.conns[addr] {
			if x.usable() {
				live = append(live, x)
				if x.links < linksPerConn && (pc == nil || x.links < pc.links) {
					pc = x
				}
			}
		}
		p.conns[addr] = live
		if pc == nil {
			pc = &peerConn{ready: make(chan struct{})}
			p.conns[addr] = append(p.conns[addr], pc)
			go p.dial(pc, addr)
		}
		cc.peerConns[addr] = pc
	}
	pc.links++
	p.mu.Unlock()
	select {
	case <-pc.ready:
		if pc.err != nil {
			p.release(pc)
			return nil, pc.err
		}
		return pc, nil
	case <-ctx.Done():
		p.release(pc)
		return nil, ctx.Err()
	}
}

// peerWriteTimeout bounds each write to a peer, as go-amqp's default does.
const peerWriteTimeout = 30 * time.Second

func (p *peers) dial(pc *peerConn, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer close(pc.ready)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		pc.err = err
		return
	}
	bc := amqp.BatchConn(nc, peerWriteTimeout)
	pc.c, pc.err = goamqp.NewConn(ctx, bc, &goamqp.ConnOptions{
		SASLType:    goamqp.SASLTypePlain(p.f.KeyName, p.f.Key),
		HostName:    addr,
		MaxSessions: 65535, // the peer's channel-max bounds it
	})
	if pc.err != nil {
		_ = bc.Close()
	}
}

// release uncounts a twin link of pc.
func (p *peers) release(pc *peerConn) {
	p.mu.Lock()
	pc.links--
	p.mu.Unlock()
}

// close closes every peer connection.
func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, pcs := range p.conns {
		for _, pc := range pcs {
			select {
			case <-pc.ready:
				if pc.c != nil {
					_ = pc.c.Close()
				}
			default:
			}
		}
		delete(p.conns, addr)
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// forwards reports whether a link for entity (an Address.Entity) is to be
// forwarded: a queue or topic this node knows but does not serve. An
// unknown entity is left to the local path, which reports it.
func (h *Handler) forwards(entity string) bool {
	if h.peers == nil {
		return false
	}
	p, err := broker.ParsePath(entity)
	if err != nil {
		return false
	}
	_, dormant := h.b.Dormant(p.Entity)
	return dormant
}

// twin is the session of one twin link, on a connection to the owner.
type twin struct {
	sess *goamqp.Session
	pc   *peerConn
	p    *peers
}

// close ends the twin's session (and its link).
func (t *twin) close() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = t.sess.Close(ctx)
	t.p.release(t.pc)
}

// twinSession opens a session, for one twin link, on the node serving
// entity.
func (c *conn) twinSession(ctx context.Context, entity string) (*twin, error) {
	p, err := broker.ParsePath(entity)
	if err != nil {
		return nil, err
	}
	top, dormant := c.h.b.Dormant(p.Entity)
	if !dormant {
		// Loaded here meanwhile (or deleted): the client attaches again.
		return nil, fmt.Errorf("%w: %q changed hands", broker.ErrNotOwned, p.Entity)
	}
	addr, err := c.h.peers.f.Owner(ctx, top)
	if err != nil {
		return nil, err
	}
	pc, err := c.h.peers.conn(ctx, c, addr)
	if err != nil {
		return nil, err
	}
	sess, err := pc.c.NewSession(ctx, nil)
	if err != nil {
		c.h.peers.release(pc)
		return nil, err
	}
	return &twin{sess: sess, pc: pc, p: c.h.peers}, nil
}

// fwdSend relays a client's sender (messages, or $management requests) to
// a twin sender on the owner.
type fwdSend struct {
	c     *conn
	r     *amqp.Receiver
	check func(payload []byte) error // per-delivery authorization
	node  string

	tw   *twin
	snd  *goamqp.Sender
	q    serial[amqp.Delivery]
	done chan struct{}
	once sync.Once
}

func (c *conn) forwardSender(r *amqp.Receiver, entity, node string, right sas.Right, check func([]byte) error) (amqp.ReceiverHandler, error) {
	tgt := r.Remote().Target.Address
	if check == nil {
		if err := c.authorize(entity, right); err != nil {
			return nil, amqpError(err)
		}
	}
	l := &fwdSend{c: c, r: r, check: check, node: node, done: make(chan struct{})}
	l.q.run = l.run
	r.SetCreditWindow(c.h.credit)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.h.attachTimeout())
		defer cancel()
		tw, err := c.twinSession(ctx, entity)
		if err != nil {
			_ = r.CompleteAttach(nil, nil, twinError(err))
			return
		}
		mode := goamqp.SenderSettleModeUnsettled
		snd, err := tw.sess.NewSender(ctx, tgt, &goamqp.SenderOptions{
			Name:           r.Name(),
			SettlementMode: &mode,
			Properties:     toGoFields(r.Remote().Properties),
		})
		if err != nil {
			tw.close()
			_ = r.CompleteAttach(nil, nil, twinError(err))
			return
		}
		l.tw, l.snd = tw, snd
		err = r.CompleteAttach(l, func(reply *frames.Attach) {
			reply.RcvSettleMode = frames.ReceiverSettleFirst
			if m := snd.MaxMessageSize(); m > 0 {
				reply.MaxMessageSize = m
			}
			reply.Properties = fromGoFields(snd.Properties())
		}, nil)
		if err == nil {
			c.h.metrics.LinkAttached(node, false)
			go l.watch(tw.pc.c)
		}
	}()
	return nil, amqp.ErrDeferAttach
}

// watch detaches the client's link when the peer connection ends.
func (l *fwdSend) watch(pc *goamqp.Conn) {
	if pc == nil {
		return
	}
	select {
	case <-pc.Done():
		l.r.Detach(amqp.NewError(amqp.CondDetachForced, "the node serving this entity is gone; attach again"))
	case <-l.done:
	}
}

// Transfer queues a delivery for the twin, in order.
func (l *fwdSend) Transfer(_ *amqp.Receiver, d amqp.Delivery) {
	d.Payload = append([]byte(nil), d.Payload...)
	d.Tag = append([]byte(nil), d.Tag...)
	l.q.push(d)
}

func (l *fwdSend) run(batch []amqp.Delivery) {
	for _, d := range batch {
		if l.check != nil {
			if err := l.check(d.Payload); err != nil {
				settle(d, &frames.Rejected{Error: amqpError(err)})
				continue
			}
		}
		m := &goamqp.Message{}
		if err := m.UnmarshalBinary(d.Payload); err != nil {
			settle(d, &frames.Rejected{Error: amqpError(badRequest("the message is not valid AMQP: %v", err))})
			continue
		}
		m.Format = d.Format
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rc, err := l.snd.SendWithReceipt(ctx, m, nil)
		cancel()
		if err != nil {
			e := twinError(err)
			settle(d, &frames.Rejected{Error: e})
			l.r.Detach(e)
			return
		}
		go func() {
			st, err := rc.Wait(context.Background())
			if err != nil {
				settle(d, &frames.Rejected{Error: twinError(err)})
				return
			}
			settle(d, fromGoState(st))
		}()
	}
}

// Detach closes the twin.
func (l *fwdSend) Detach(*amqp.Receiver, error) {
	l.once.Do(func() {
		close(l.done)
		l.c.h.metrics.LinkDetached(l.node, false)
		go func() {
			l.q.wait()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = l.snd.Close(ctx)
			l.tw.close()
		}()
	})
}

// fwdRecv relays a client's receiver (messages, sessions, or $management
// replies) from a twin receiver on the owner.
type fwdRecv struct {
	c        *conn
	s        *amqp.Sender
	node     string
	settled  bool // deliveries go out pre-settled
	isReply  bool
	tw       *twin
	rcv      *goamqp.Receiver
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	credit   relayCredit                // the twin's credit against the client's
	drain    bool                       // the client asked for a drain
	stopWait context.CancelFunc         // interrupts the pump's Receive
	msgs     map[string]*goamqp.Message // unsettled, by delivery tag
	once     sync.Once
}

func (c *conn) forwardReceiver(s *amqp.Sender, entity, node string, isReply bool) (amqp.SenderHandler, error) {
	remote := s.Remote()
	if !isReply {
		if err := c.authorize(entity, sas.Listen); err != nil {
			return nil, amqpError(err)
		}
	}
	l := &fwdRecv{c: c, s: s, node: node, isReply: isReply, msgs: map[string]*goamqp.Message{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.settled = isReply || remote.SndSettleMode == frames.SenderSettleSettled
	if !l.settled {
		s.SetManualSettlement()
	}
	sf, isSession := sessionFilter(remote.Source)
	opts := &goamqp.ReceiverOptions{
		Name:       s.Name(),
		Credit:     -1,
		Properties: toGoFields(remote.Properties),
	}
	ssm := goamqp.SenderSettleMode(remote.SndSettleMode)
	rsm := goamqp.ReceiverSettleMode(remote.RcvSettleMode)
	opts.RequestedSenderSettleMode, opts.SettlementMode = &ssm, &rsm
	if remote.Target != nil {
		opts.TargetAddress = remote.Target.Address
	}
	if isSession {
		var v any
		if !sf.next {
			v = sf.id
		}
		opts.Filters = append(opts.Filters, goamqp.NewLinkFilter(string(filterSession), descSessionFilter, v))
	}
	timeout := c.h.attachTimeout()
	if isSession && sf.next {
		timeout = attachTimeout(remote.Properties) + 5*time.Second
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		tw, err := c.twinSession(ctx, entity)
		if err != nil {
			_ = s.CompleteAttach(nil, nil, twinError(err))
			return
		}
		rcv, err := tw.sess.NewReceiver(ctx, remote.Source.Address, opts)
		if err != nil {
			tw.close()
			_ = s.CompleteAttach(nil, nil, twinError(err))
			return
		}
		l.tw, l.rcv = tw, rcv
		err = s.CompleteAttach(l, func(reply *frames.Attach) {
			reply.Properties = fromGoFields(rcv.Properties())
			if isSession {
				setSessionFilter(reply, sf, rcv.LinkSourceFilterValue(string(filterSession)))
			}
		}, nil)
		if err != nil {
			return // Detach closes the twin
		}
		c.h.metrics.LinkAttached(node, true)
		l.Flow(s, amqp.Flow{Credit: s.Credit(), Drain: s.Draining()})
		go l.pump()
	}()
	return nil, amqp.ErrDeferAttach
}

// Flow matches the twin's credit to the client's.
func (l *fwdRecv) Flow(s *amqp.Sender, f amqp.Flow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rcv == nil {
		return // before CompleteAttach: the attach goroutine calls Flow
	}
	l.matchCreditLocked()
	// A drain (the credit given with it, then none) is run by the pump on
	// the twin, which then completes the client's.
	if f.Drain {
		l.drain = true
		if l.stopWait != nil {
			l.stopWait()
		}
	}
}

// matchCreditLocked gives the twin the client's credit it lacks; l.mu is
// held.
func (l *fwdRecv) matchCreditLocked() {
	if !l.drain && l.ctx.Err() == nil {
		l.credit.grant(int(l.s.Credit()), l.rcv.IssueCredit)
	}
}

// pump copies the twin's deliveries to the client. It alone sends on the
// client's link, and runs the drains, so the order holds.
func (l *fwdRecv) pump() {
	for {
		l.mu.Lock()
		if l.drain {
			l.drain = false
			l.mu.Unlock()
			ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
			err := l.rcv.DrainCredit(ctx, nil)
			cancel()
			for m := l.rcv.Prefetched(); m != nil; m = l.rcv.Prefetched() {
				if !l.forward(m) {
					return
				}
			}
			l.mu.Lock()
			l.credit.issued = 0
			l.mu.Unlock()
			_ = l.s.CompleteDrain()
			if err != nil && l.ctx.Err() == nil {
				l.fail(err)
				return
			}
			l.Flow(l.s, amqp.Flow{})
			continue
		}
		ctx, cancel := context.WithCancel(l.ctx)
		l.stopWait = cancel
		l.mu.Unlock()
		m, err := l.rcv.Receive(ctx, nil)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			if ctx.Err() != nil {
				continue // a drain
			}
			l.fail(err)
			return
		}
		if !l.forward(m) {
			return
		}
	}
}

// forward sends one of the twin's deliveries to the client.
func (l *fwdRecv) forward(m *goamqp.Message) bool {
	l.mu.Lock()
	taken := l.credit.take()
	l.mu.Unlock()
	delivered := false
	if taken {
		defer func() {
			// The client's credit is used now: a flow that came meanwhile
			// may have been held back. When the send failed the client's
			// link is gone, and the twin gets no more credit.
			l.mu.Lock()
			l.credit.sent()
			if delivered {
				l.matchCreditLocked()
			}
			l.mu.Unlock()
		}()
	}
	payload, err := m.MarshalBinary()
	if err != nil {
		l.fail(err)
		return false
	}
	tag := append([]byte(nil), m.DeliveryTag...)
	if !l.settled {
		l.mu.Lock()
		l.msgs[string(tag)] = m
		l.mu.Unlock()
	}
	if _, err := l.s.Send(l.ctx, &amqp.Message{Tag: tag, Format: m.Format, Settled: l.settled, Payload: payload}); err != nil {
		return false
	}
	delivered = true
	return true
}

// fail detaches the client's link with the twin's error.
func (l *fwdRecv) fail(err error) { l.s.Detach(twinError(err)) }

// Outcome applies the client's outcome on the twin and answers with the
// owner's verdict.
func (l *fwdRecv) Outcome(s *amqp.Sender, o amqp.Outcome) {
	if o.Lost || o.State == nil {
		return
	}
	l.mu.Lock()
	m := l.msgs[string(o.Tag)]
	delete(l.msgs, string(o.Tag))
	l.mu.Unlock()
	if m == nil {
		if !o.Settled {
			_ = s.Settle(o.ID, &frames.Rejected{Error: amqp.NewError(condMessageLockLost, "%s", descLockLost)})
		}
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
		defer cancel()
		err := settleTwin(ctx, l.rcv, m, o.State)
		if o.Settled {
			return
		}
		var ae *goamqp.Error
		switch {
		case err == nil:
			_ = s.Settle(o.ID, o.State)
		case errors.As(err, &ae):
			_ = s.Settle(o.ID, &frames.Rejected{Error: fromGoError(ae)})
		default:
			_ = s.Settle(o.ID, &frames.Rejected{Error: twinError(err)})
		}
	}()
}

// settleTwin applies a client's outcome to the twin's delivery.
func settleTwin(ctx context.Context, r *goamqp.Receiver, m *goamqp.Message, st frames.DeliveryState) error {
	switch x := st.(type) {
	case *frames.Accepted:
		return r.AcceptMessage(ctx, m)
	case *frames.Rejected:
		var e *goamqp.Error
		if x.Error != nil {
			e = &goamqp.Error{Condition: goamqp.ErrCond(x.Error.Condition), Description: x.Error.Description, Info: toGoMap(x.Error.Info)}
		}
		return r.RejectMessage(ctx, m, e)
	case *frames.Released:
		return r.ReleaseMessage(ctx, m)
	case *frames.Modified:
		ann := goamqp.Annotations{}
		for k, v := range x.MessageAnnotations {
			ann[toGo(k)] = toGo(v)
		}
		return r.ModifyMessage(ctx, m, &goamqp.ModifyMessageOptions{DeliveryFailed: x.DeliveryFailed, UndeliverableHere: x.UndeliverableHere, Annotations: ann})
	}
	return r.ReleaseMessage(ctx, m)
}

// Detach closes the twin: the owner releases what it had locked for it.
func (l *fwdRecv) Detach(*amqp.Sender, error) {
	l.once.Do(func() {
		l.cancel()
		if l.rcv == nil {
			return
		}
		l.c.h.metrics.LinkDetached(l.node, true)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = l.rcv.Close(ctx)
			l.tw.close()
		}()
	})
}

func (h *Handler) attachTimeout() time.Duration {
	if h.peers.f.AttachTimeout > 0 {
		return h.peers.f.AttachTimeout
	}
	return 30 * time.Second
}

// twinError is the error a client's link gets when its twin failed: the
// owner's own error when it sent one, else amqp:link:detach-forced, which
// the SDKs retry.
func twinError(err error) *frames.Error {
	var le *goamqp.LinkError
	if errors.As(err, &le) && le.RemoteErr != nil {
		return fromGoError(le.RemoteErr)
	}
	var ae *goamqp.Error
	if errors.As(err, &ae) {
		return fromGoError(ae)
	}
	var fe *frames.Error
	if errors.As(err, &fe) {
		return fe
	}
	if errors.Is(err, broker.ErrNotOwned) || errors.Is(err, broker.ErrNotFound) {
		return amqpError(err)
	}
	return amqp.NewError(amqp.CondDetachForced, "forwarding to the node serving this entity failed: %v", err)
}

func fromGoError(e *goamqp.Error) *frames.Error {
	return &frames.Error{Condition: encoding.Symbol(e.Condition), Description: e.Description, Info: fromGoFields(e.Info)}
}

func fromGoState(st goamqp.DeliveryState) frames.DeliveryState {
	switch x := st.(type) {
	case *goamqp.StateRejected:
		if x.Error != nil {
			return &frames.Rejected{Error: fromGoError(x.Error)}
		}
		return &frames.Rejected{}
	case *goamqp.StateReleased:
		return &frames.Released{}
	case *goamqp.StateModified:
		return &frames.Modified{DeliveryFailed: x.DeliveryFailed, UndeliverableHere: x.UndeliverableHere}
	}
	return &frames.Accepted{}
}

// toGo converts a value of this repository's encoding to go-amqp's.
func toGo(v any) any {
	switch x := v.(type) {
	case encoding.Symbol:
		return goamqp.Symbol(x)
	case encoding.Fields:
		return toGoMap(x)
	}
	return v
}

func toGoMap(f encoding.Fields) map[string]any {
	if f == nil {
		return nil
	}
	m := make(map[string]any, len(f))
	for k, v := range f {
		m[string(k)] = toGo(v)
	}
	return m
}

func toGoFields(f encoding.Fields) map[string]any { return toGoMap(f) }

// fromGo converts a go-amqp value to this repository's encoding.
func fromGo(v any) any {
	switch x := v.(type) {
	case goamqp.Symbol:
		return encoding.Symbol(x)
	case map[string]any:
		return fromGoFields(x)
	}
	return v
}

func fromGoFields(m map[string]any) encoding.Fields {
	if m == nil {
		return nil
	}
	f := make(encoding.Fields, len(m))
	for k, v := range m {
		f[encoding.Symbol(k)] = fromGo(v)
	}
	return f
}

// forwardManagement relays a client's $management request link; each
// request is authorized here with the right its operation needs.
func (c *conn) forwardManagement(r *amqp.Receiver, addr Address) (amqp.ReceiverHandler, error) {
	target := r.Remote().Target.Address
	check := func(payload []byte) error {
		req, err := parseRequest(payload, target)
		if err != nil {
			return err
		}
		op, ok := operations[req.op]
		if !ok {
			return nil // the owner answers not-implemented
		}
		return c.authorize(addr.Entity, op.right)
	}
	return c.forwardSender(r, addr.Entity, addr.Path()+"/$management", 0, check)
}
