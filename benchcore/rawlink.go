package benchcore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
)

// rawLink is the link on handle 0 of a rawSession: a sender that
// pipelines pre-encoded transfers, or a receiver that settles in ranges.
// Its fields are guarded by the connection's mu.
type rawLink struct {
	s        *rawSession
	sender   bool
	name     string
	remote   uint32 // the broker's handle for the link
	remoteOK bool
	attached chan struct{} // closed by the broker's attach
	detached chan struct{} // closed by the broker's detach
	refused  bool          // the broker's attach had no terminus: a detach with the reason follows
	detErr   *frames.Error
	closing  bool           // leaving: no more credit
	detSent  bool           // we sent our detach: later deliveries are left to the broker to release
	replyTo  *frames.Attach // where the broker's attach goes

	// Sender.
	credit        uint32
	deliveryCount uint32
	unsettled     int
	ring          []*rawWaiter // unsettled deliveries by id mod rawRing
	creditWake    chan struct{}

	// Receiver.
	deliver     DeliverFunc
	settle      bool // peek-lock: the client settles each delivery
	settleFirst bool // ... with settled dispositions the broker does not answer
	prefetch    uint32
	received    uint32 // delivery-count: transfers received on this link
	creditLeft  uint32
	pendFirst   uint32 // deliveries received, not yet in a disposition
	pendLast    uint32
	pendN       int
	awaiting    int // completes sent, not yet answered by the broker
	answered    chan struct{}
	lastSeen    chan struct{} // the key's last message was delivered
	rejectErr   error
	partial     []byte // a delivery split over several transfers
	// pendingID and pendingSettled describe the delivery being received.
	pendingID      uint32
	pendingSettled bool
}

// rawWaiter is one Send call waiting for its dispositions.
type rawWaiter struct {
	left int
	err  error
	done chan struct{}
}

// rawSettleBatch bounds the deliveries one disposition covers before it is
// sent without waiting for the reader to run dry.
const rawSettleBatch = 512

func newRawLink(s *rawSession, sender bool) *rawLink {
	l := &rawLink{s: s, sender: sender, attached: make(chan struct{}), detached: make(chan struct{})}
	if sender {
		l.ring = make([]*rawWaiter, rawRing)
		l.creditWake = make(chan struct{}, 1)
	} else {
		l.answered = make(chan struct{}, 1)
		l.lastSeen = make(chan struct{}, 1)
	}
	return l
}

// attach sends a on s, waits for the broker's attach and returns the link;
// a refused attach returns the broker's detach error.
func (s *rawSession) attach(ctx context.Context, l *rawLink, a *frames.Attach) (*frames.Attach, error) {
	c := s.c
	reply := new(frames.Attach)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	s.link = l
	l.name = a.Name
	l.replyTo = reply
	c.appendLocked(s.ch, a)
	c.mu.Unlock()
	c.flush()
	if err := c.wait(ctx, l.attached); err != nil {
		return nil, err
	}
	c.mu.Lock()
	refused := l.refused
	c.mu.Unlock()
	if refused {
		if err := c.wait(ctx, l.detached); err != nil {
			return nil, err
		}
		c.mu.Lock()
		s.link = nil
		c.mu.Unlock()
		return nil, &rawLinkError{l.detErr}
	}
	return reply, nil
}

// wait waits for ch to be closed (or to deliver), the connection to fail
// or ctx to end.
func (c *rawConn) wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-c.done:
		return c.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawLinkError is a link the broker refused or detached.
type rawLinkError struct{ e *frames.Error }

func (e *rawLinkError) Error() string { return "raw: link detached: " + frameError(e.e) }

// condition returns the AMQP error condition, "" if none.
func (e *rawLinkError) condition() string {
	if e.e == nil {
		return ""
	}
	return string(e.e.Condition)
}

func (l *rawLink) onAttach(f *frames.Attach) error {
	if l.replyTo == nil {
		return errors.New("raw: unexpected second attach")
	}
	*l.replyTo = *f
	l.replyTo = nil
	if l.sender {
		l.refused = f.Target == nil
	} else {
		l.refused = f.Source == nil
	}
	close(l.attached)
	return nil
}

func (l *rawLink) onDetach(f *frames.Detach) error {
	select {
	case <-l.detached:
		return nil
	default:
	}
	l.detErr = f.Error
	if !l.detSent {
		// The broker ended the link: answer its detach.
		l.s.c.appendLocked(l.s.ch, &frames.Detach{Handle: 0, Closed: true})
	}
	close(l.detached)
	if l.sender {
		for i, w := range l.ring {
			if w != nil {
				l.ring[i] = nil
				if w.err == nil {
					w.err = &rawLinkError{f.Error}
				}
				if w.left > 0 {
					w.left = 0
					close(w.done)
				}
			}
		}
	}
	return nil
}

func (l *rawLink) onFlow(f *frames.Flow) {
	if !l.sender || f.LinkCredit == nil {
		return
	}
	dc := uint32(0)
	if f.DeliveryCount != nil {
		dc = *f.DeliveryCount
	}
	l.credit = dc + *f.LinkCredit - l.deliveryCount
	l.wakeSenders()
}

func (l *rawLink) wakeSenders() {
	select {
	case l.creditWake <- struct{}{}:
	default:
	}
}

// onDisposition applies the broker's settlement of deliveries first..last:
// of our sends (role receiver) or of our completes (role sender).
func (l *rawLink) onDisposition(role frames.Role, first, last uint32, settled bool, st frames.DeliveryState) error {
	_, accepted := st.(*frames.Accepted)
	n := int(last - first + 1)
	if l.sender {
		if role != frames.RoleReceiver {
			return nil
		}
		for id := first; ; id++ {
			if w := l.ring[id&(rawRing-1)]; w != nil {
				l.ring[id&(rawRing-1)] = nil
				l.unsettled--
				if !accepted && w.err == nil {
					w.err = fmt.Errorf("raw: send not accepted: %s", stateText(st))
				}
				if w.left--; w.left == 0 {
					close(w.done)
				}
			}
			if id == last {
				break
			}
		}
		l.wakeSenders()
		return nil
	}
	if role != frames.RoleSender || !settled {
		return nil
	}
	if !accepted && l.rejectErr == nil {
		l.rejectErr = fmt.Errorf("raw: complete refused: %s", stateText(st))
	}
	l.awaiting -= n
	if l.awaiting <= 0 {
		l.awaiting = 0
		select {
		case l.answered <- struct{}{}:
		default:
		}
	}
	return nil
}

func stateText(st frames.DeliveryState) string {
	if r, ok := st.(*frames.Rejected); ok {
		return "rejected: " + frameError(r.Error)
	}
	return fmt.Sprintf("%T", st)
}

// onTransfer hands a delivery's body to the engine and queues its
// settlement.
func (l *rawLink) onTransfer(f *frames.Transfer) error {
	if l.s.c.muted || l.detSent {
		// After Run, or after our detach: not delivered, not settled; the
		// broker releases it when the link (or connection) ends.
		return nil
	}
	if f.Aborted {
		l.partial = l.partial[:0]
		return nil
	}
	if f.DeliveryID != nil {
		l.pendingID = *f.DeliveryID
		l.pendingSettled = f.Settled
	}
	payload := f.Payload
	if f.More || len(l.partial) > 0 {
		l.partial = append(l.partial, f.Payload...)
		if f.More {
			return nil
		}
		payload = l.partial
	}
	body, err := dataBody(payload)
	if err != nil {
		body = nil // the engine counts it as foreign
	}
	dl := l.deliver(body)
	l.partial = l.partial[:0]
	l.received++
	l.creditLeft--
	if dl.Last {
		select {
		case l.lastSeen <- struct{}{}:
		default:
		}
	}
	id := l.pendingID
	if l.settle && !l.pendingSettled {
		if l.pendN > 0 && id == l.pendLast+1 {
			l.pendLast = id
		} else {
			l.flushSettlementsLocked()
			l.pendFirst, l.pendLast = id, id
		}
		l.pendN++
		if l.pendN >= rawSettleBatch {
			l.flushSettlementsLocked()
		}
	}
	if !l.closing && l.creditLeft <= l.prefetch/2 {
		l.creditLeft = l.prefetch
		credit := l.prefetch
		l.s.flowLocked(&credit, l.received)
	}
	return nil
}

// flushSettlementsLocked sends one disposition accepting every delivery
// received since the last one (a contiguous range).
func (l *rawLink) flushSettlementsLocked() {
	if l.sender || l.pendN == 0 {
		return
	}
	last := l.pendLast
	l.s.c.appendLocked(l.s.ch, &frames.Disposition{Role: frames.RoleReceiver, First: l.pendFirst, Last: &last,
		Settled: l.settleFirst, State: &frames.Accepted{}})
	if !l.settleFirst {
		l.awaiting += l.pendN
	}
	l.pendN = 0
}

// detach closes the link and waits for the broker's detach.
func (l *rawLink) detach(ctx context.Context) error {
	c := l.s.c
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	l.flushSettlementsLocked()
	select {
	case <-l.detached:
	default:
		l.closing, l.detSent = true, true
		c.appendLocked(l.s.ch, &frames.Detach{Handle: 0, Closed: true})
	}
	c.mu.Unlock()
	c.flush()
	if err := c.wait(ctx, l.detached); err != nil {
		return err
	}
	c.mu.Lock()
	if l.s.link == l {
		l.s.link = nil
	}
	c.mu.Unlock()
	return nil
}

// waitAnswered waits until the broker has answered every complete sent so
// far (peek-lock, settle mode second) and returns the first refusal.
func (l *rawLink) waitAnswered(ctx context.Context) error {
	c := l.s.c
	for {
		c.mu.Lock()
		l.flushSettlementsLocked()
		n, err := l.awaiting, l.rejectErr
		c.mu.Unlock()
		c.flush()
		if err != nil || n == 0 {
			return err
		}
		select {
		case <-l.answered:
		case <-l.detached:
			return &rawLinkError{l.detErr}
		case <-c.done:
			return c.failure()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// rawTemplate is one pre-encoded transfer frame: only the delivery id and
// tag, and the engine's header inside the body, change from message to
// message.
type rawTemplate struct {
	frame  []byte
	key    string
	body   []byte // the body the frame was built from
	hdrOff int    // where the body's first byte lies in frame
}

// Offsets in a template frame: an 8-byte frame header, the transfer's
// descriptor (3 bytes) and list8 header (3 bytes), then the fields.
const (
	tmplChannelOff = 6
	tmplIDOff      = 8 + 3 + 3 + 5 + 1 // after handle, past the uint constructor
	tmplTagOff     = tmplIDOff + 4 + 2 // past the vbin8 constructor and length
	tmplPerfSize   = 8 + 3 + 3 + 5 + 5 + 10 + 1 + 1
)

// newRawTemplate encodes a transfer of body (with group-id key when key is
// not empty) on channel ch, handle 0, unsettled.
func newRawTemplate(ch uint16, key string, body []byte) (*rawTemplate, error) {
	f := make([]byte, tmplPerfSize, tmplPerfSize+len(body)+64)
	f[4], f[5] = 2, frames.TypeAMQP
	binary.BigEndian.PutUint16(f[tmplChannelOff:], ch)
	p := f[8:8]
	p = append(p, 0x00, 0x53, 0x14)      // transfer
	p = append(p, 0xc0, 1+5+5+10+1+1, 5) // list8: size, count
	p = append(p, 0x70, 0, 0, 0, 0)      // handle 0
	p = append(p, 0x70, 0, 0, 0, 0)      // delivery-id (patched)
	p = append(p, 0xa0, 8, 0, 0, 0, 0, 0, 0, 0, 0)
	p = append(p, 0x43) // message-format 0
	p = append(p, 0x42) // settled false
	if len(p) != tmplPerfSize-8 {
		return nil, errors.New("raw: transfer template miscounted")
	}
	var err error
	if key != "" {
		if f, err = message.AppendProperties(f, &message.Properties{GroupID: key}); err != nil {
			return nil, err
		}
	}
	f = message.AppendData(f, body)
	binary.BigEndian.PutUint32(f, uint32(len(f)))
	return &rawTemplate{frame: f, key: key, body: append([]byte(nil), body...), hdrOff: len(f) - len(body)}, nil
}

// fits reports whether t encodes o apart from the engine's header.
func (t *rawTemplate) fits(o *Outgoing) bool {
	return t != nil && t.key == o.Key && len(t.body) == len(o.Body) && bytes.Equal(t.body[HeaderSize:], o.Body[HeaderSize:])
}

// appendTo appends t's frame for delivery id with o's header.
func (t *rawTemplate) appendTo(dst []byte, id uint32, o *Outgoing) []byte {
	start := len(dst)
	dst = append(dst, t.frame...)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[tmplIDOff:], id)
	binary.BigEndian.PutUint64(f[tmplTagOff:], uint64(id))
	copy(f[t.hdrOff:t.hdrOff+HeaderSize], o.Body[:HeaderSize])
	return dst
}

// send transfers msgs (one frame each, from templates) as credit allows
// and waits until the broker has settled every one.
func (l *rawLink) send(ctx context.Context, msgs []Outgoing, cache *rawTemplate) (*rawTemplate, error) {
	c := l.s.c
	w := &rawWaiter{left: len(msgs), done: make(chan struct{})}
	t := cache
	for i := 0; i < len(msgs); {
		// Templates are built outside the lock.
		if !t.fits(&msgs[i]) {
			var err error
			if t, err = newRawTemplate(l.s.ch, msgs[i].Key, msgs[i].Body); err != nil {
				return t, err
			}
			if uint32(len(t.frame)) > c.peerMax {
				return nil, fmt.Errorf("raw: a %d-byte transfer exceeds the broker's frame size %d (the raw client sends one frame per message)", len(t.frame), c.peerMax)
			}
		}
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return t, c.err
		}
		select {
		case <-l.detached:
			c.mu.Unlock()
			return t, &rawLinkError{l.detErr}
		default:
		}
		s := l.s
		for i < len(msgs) && l.credit > 0 && s.remoteIncoming > 0 && l.unsettled < rawRing && t.fits(&msgs[i]) {
			id := s.nextOutgoing
			c.out = t.appendTo(c.out, id, &msgs[i])
			l.ring[id&(rawRing-1)] = w
			s.nextOutgoing++
			s.remoteIncoming--
			l.credit--
			l.deliveryCount++
			l.unsettled++
			i++
		}
		more := l.credit > 0 && s.remoteIncoming > 0 && l.unsettled < rawRing
		c.mu.Unlock()
		c.flush()
		if more {
			l.wakeSenders() // let another sender use what is left
		}
		if i < len(msgs) && !more {
			select {
			case <-l.creditWake:
			case <-c.done:
				return t, c.failure()
			case <-ctx.Done():
				return t, ctx.Err()
			}
		}
	}
	select {
	case <-w.done:
		return t, w.err
	case <-c.done:
		return t, c.failure()
	case <-ctx.Done():
		return t, ctx.Err()
	}
}

// dataBody returns the first data section of an encoded message, skipping
// every other section without decoding it.
func dataBody(msg []byte) ([]byte, error) {
	d := encoding.NewDecoder(msg)
	for d.Len() > 0 {
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return nil, err
		}
		if sym != nil {
			return nil, errors.New("raw: section with a symbolic descriptor")
		}
		if code == message.DescData {
			return d.ReadBinary()
		}
		if err := d.Skip(); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("raw: message without a data section")
}

// rawCBS authorizes a connection that used SASL ANONYMOUS: a put-token of
// a SAS token for the queue on $cbs, as the Service Bus SDKs do, on its own
// session (handles 1 and 2).
type rawCBS struct {
	sndName  string
	sndH     uint32 // the broker's handle of our $cbs sender
	sndSeen  bool
	attached int
	credit   bool
	ready    chan struct{} // both links attached and the sender has credit
	reply    chan []byte   // the put-token response
	failed   chan *frames.Error
}

func (b *rawCBS) onAttach(f *frames.Attach) error {
	if f.Source == nil || f.Target == nil {
		return nil // refused: the detach that follows reports why
	}
	if f.Name == b.sndName {
		b.sndH, b.sndSeen = f.Handle, true
	}
	b.attached++
	b.check()
	return nil
}

func (b *rawCBS) onFlow(f *frames.Flow) {
	if f.Handle != nil && b.sndSeen && *f.Handle == b.sndH && f.LinkCredit != nil && *f.LinkCredit > 0 {
		b.credit = true
		b.check()
	}
}

func (b *rawCBS) check() {
	if b.attached == 2 && b.credit {
		select {
		case b.ready <- struct{}{}:
		default:
		}
	}
}

func (b *rawCBS) onDetach(f *frames.Detach) error {
	select {
	case b.failed <- f.Error:
	default:
	}
	return nil
}

func (b *rawCBS) onTransfer(f *frames.Transfer) error {
	select {
	case b.reply <- append([]byte(nil), f.Payload...):
	default:
	}
	return nil
}

// putToken authorizes the connection for audience (an amqp:// URI of the
// entity) with a SAS token signed by keyName/key.
func (c *rawConn) putToken(ctx context.Context, audience, keyName, key string) error {
	s, err := c.beginSession(ctx)
	if err != nil {
		return err
	}
	replyTo := fmt.Sprintf("cbs-reply-%08x", newRunID())
	b := &rawCBS{sndName: replyTo + "-snd", ready: make(chan struct{}, 1), reply: make(chan []byte, 1), failed: make(chan *frames.Error, 1)}
	props, token := putTokenRequest(audience, keyName, key)
	id := fmt.Sprintf("put-token-%08x", newRunID())
	payload, err := message.AppendBare(nil, &message.Properties{MessageID: id, ReplyTo: replyTo},
		props, message.Body{Kind: message.BodyValue, Value: token})
	if err != nil {
		return err
	}
	one, zero := uint32(1), uint32(0)
	c.mu.Lock()
	s.cbs = b
	c.appendLocked(s.ch, &frames.Attach{Name: replyTo + "-snd", Handle: 1, Role: frames.RoleSender,
		Source: &frames.Source{Address: replyTo}, Target: &frames.Target{Address: "$cbs"}})
	c.appendLocked(s.ch, &frames.Attach{Name: replyTo + "-rcv", Handle: 2, Role: frames.RoleReceiver,
		SndSettleMode: frames.SenderSettleSettled, Source: &frames.Source{Address: "$cbs"}, Target: &frames.Target{Address: replyTo}})
	h := uint32(2)
	next := s.nextIncoming
	c.appendLocked(s.ch, &frames.Flow{NextIncomingID: &next, IncomingWindow: rawWindow, NextOutgoingID: s.nextOutgoing,
		OutgoingWindow: rawWindow, Handle: &h, DeliveryCount: &zero, LinkCredit: &one})
	c.mu.Unlock()
	c.flush()
	select {
	case <-b.ready:
	case e := <-b.failed:
		return fmt.Errorf("raw: $cbs link refused: %s", frameError(e))
	case <-c.done:
		return c.failure()
	case <-ctx.Done():
		return fmt.Errorf("raw: attaching to $cbs: %w", ctx.Err())
	}
	// A put-token is one small transfer, within any session window.
	c.mu.Lock()
	did := s.nextOutgoing
	s.nextOutgoing++
	c.appendLocked(s.ch, &frames.Transfer{Handle: 1, DeliveryID: &did, DeliveryTag: []byte{1}, MessageFormat: &zero, Payload: payload})
	c.mu.Unlock()
	c.flush()
	var resp []byte
	select {
	case resp = <-b.reply:
	case e := <-b.failed:
		return fmt.Errorf("raw: $cbs link detached: %s", frameError(e))
	case <-c.done:
		return c.failure()
	case <-ctx.Done():
		return fmt.Errorf("raw: waiting for the put-token response: %w", ctx.Err())
	}
	m, err := message.Parse(resp)
	if err != nil {
		return fmt.Errorf("raw: put-token response: %w", err)
	}
	return putTokenStatus(audience, m.ApplicationProperties)
}
