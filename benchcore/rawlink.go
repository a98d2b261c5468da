package benchcore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

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
	closing  bool // leaving: no more credit

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
	keyed       bool        // a session receiver: its key's last message ends it
	idle        *time.Timer // reset to idleAfter by the broker's attach (session receivers)
	idleAfter   time.Duration
	last        bool          // the key's last message was delivered
	finished    chan struct{} // last, and every complete answered: the link may go
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
		l.finished = make(chan struct{}, 1)
	}
	return l
}

// attach sends l's attach frame on s (see sendAttach) and waits for the
// broker's attach; a refused attach returns the broker's detach error.
func (s *rawSession) attach(ctx context.Context, l *rawLink, frame []byte, credit uint32) error {
	if err := s.sendAttach(l, frame, credit); err != nil {
		return err
	}
	if err := s.c.wait(ctx, l.attached); err != nil {
		return err
	}
	if !l.isRefused() {
		return nil
	}
	if err := s.c.wait(ctx, l.detached); err != nil {
		return err
	}
	return l.refusal()
}

// sendAttach makes l the session's link and sends its attach frame (on
// handle 0, with the name l has) and, when credit is not 0 (a receiver), a
// flow granting it, in one write: a flow may follow our attach at once,
// and the broker keeps the credit until it answers.
func (s *rawSession) sendAttach(l *rawLink, frame []byte, credit uint32) error {
	c := s.c
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	s.link = l
	c.out = append(c.out, frame...)
	if credit > 0 {
		l.creditLeft = credit
		l.creditLocked(credit)
	}
	c.mu.Unlock()
	c.flush()
	return nil
}

// isRefused reports whether the broker's attach (which must have arrived)
// refused the link.
func (l *rawLink) isRefused() bool {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return l.refused
}

// refusal forgets a refused link once the broker's detach has arrived, and
// returns the reason.
func (l *rawLink) refusal() error {
	c := l.s.c
	c.mu.Lock()
	if l.s.link == l {
		l.s.link = nil
	}
	c.mu.Unlock()
	return &rawLinkError{l.detErr}
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
	select {
	case <-l.attached:
		return errors.New("raw: unexpected second attach")
	default:
	}
	if l.sender {
		l.refused = f.Target == nil
	} else {
		l.refused = f.Source == nil
		l.received = f.InitialDeliveryCount // the sender's delivery-count, which our flows echo
	}
	if l.idle != nil && !l.refused {
		l.idle.Reset(l.idleAfter)
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
	// The broker ended the link: answer its detach. (A link that sent its
	// own detach is forgotten at once, rawLink.leave: its answer never
	// reaches it.)
	l.s.c.appendLocked(l.s.ch, &frames.Detach{Handle: 0, Closed: true})
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
		l.checkFinishedLocked()
	}
	return nil
}

// checkFinishedLocked signals finished once the key's last message was
// delivered and every complete of the link answered: the consumer can then
// let the session go without waiting for anything more.
func (l *rawLink) checkFinishedLocked() {
	if l.last && l.pendN == 0 && l.awaiting == 0 {
		select {
		case l.finished <- struct{}{}:
		default:
		}
	}
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
	if l.s.c.muted {
		// After Run: not delivered, not settled; the broker releases it
		// when the connection ends.
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
	if dl.Last && l.keyed && !l.last {
		// The session has nothing more for us: stop its flow now, so that
		// the flow goes out with the last disposition, in one write.
		l.last = true
		if !l.closing {
			l.closing = true
			l.creditLocked(0)
		}
		l.checkFinishedLocked()
	}
	if !l.closing && l.creditLeft <= l.prefetch/2 {
		l.creditLeft = l.prefetch
		l.creditLocked(l.prefetch)
	}
	return nil
}

// creditLocked appends a flow that sets the link's credit and renews the
// session window. Its delivery-count is the broker's as last known; before
// the broker's attach it is unknown and must be left out (AMQP 1.0, 2.7.4).
func (l *rawLink) creditLocked(credit uint32) {
	s := l.s
	next, h, dc := s.nextIncoming, uint32(0), l.received
	f := &frames.Flow{NextIncomingID: &next, IncomingWindow: rawWindow, NextOutgoingID: s.nextOutgoing, OutgoingWindow: rawWindow,
		Handle: &h, LinkCredit: &credit}
	if l.remoteOK {
		f.DeliveryCount = &dc
	}
	s.c.appendLocked(s.ch, f)
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

// leave stops the link's credit, waits until the broker has answered every
// complete sent on it (peek-lock, settle mode second: the completes are
// applied before the link goes) and queues its detach; it returns the first
// refusal. The wait is bounded by t, which it resets only when it has to
// wait.
//
// leave neither writes the detach nor waits for the broker's: the caller's
// next attach (or its final flush) carries it in the same write, and the
// session forgets the link at once. Nothing the broker sends for it after
// that matters: every complete was answered, deliveries it sent before our
// flow(0) are dropped unsettled (peek-lock: it releases them;
// receive-and-delete is refused for sessions, RawDriver.Prepare), and its
// detach answers ours. This relies on a peer that handles a link's frames in
// order: handle 0 is attached again, in the same write, before the broker's
// detach has closed it on its side (Busbar answers the detach first).
func (l *rawLink) leave(t *time.Timer) error {
	c := l.s.c
	timing := false
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return c.err
		}
		queued := len(c.out)
		if !l.closing {
			l.closing = true
			l.creditLocked(0)
		}
		l.flushSettlementsLocked()
		n, err := l.awaiting, l.rejectErr
		gone := false
		select {
		case <-l.detached:
			gone = true
		default:
		}
		if err == nil && n == 0 {
			// Decided under the lock the reader delivers under: no
			// delivery can slip in between the last answer and the detach.
			if !gone {
				c.appendLocked(l.s.ch, &frames.Detach{Handle: 0, Closed: true})
			}
			l.s.link = nil
		}
		wrote := len(c.out) > queued
		c.mu.Unlock()
		switch {
		case err != nil || n == 0:
			return err
		case gone:
			return &rawLinkError{l.detErr}
		}
		if wrote {
			c.flush()
		}
		if !timing {
			timing = true
			t.Reset(rawLeaveTimeout)
		}
		select {
		case <-l.answered:
		case <-l.detached:
		case <-c.done:
			return c.failure()
		case <-t.C:
			return fmt.Errorf("raw: %d completes not answered in %v", n, rawLeaveTimeout)
		}
	}
}

// rawLeaveTimeout bounds a consumer's wait for the answers to its completes
// (a variable for tests).
var rawLeaveTimeout = 30 * time.Second

// rawTemplate is the pre-encoded start of a transfer frame, everything up
// to the body: only the delivery id and tag change from message to
// message, and each message's body follows as it is.
type rawTemplate struct {
	frame []byte // header, transfer, properties and the data section's constructor
	key   string
	size  int // the body size it was built for (the frame size depends on it)
}

// Offsets in a template frame: an 8-byte frame header, the transfer's
// descriptor (3 bytes) and list8 header (3 bytes), then the fields.
const (
	tmplChannelOff = 6
	tmplIDOff      = 8 + 3 + 3 + 5 + 1 // after handle, past the uint constructor
	tmplTagOff     = tmplIDOff + 4 + 2 // past the vbin8 constructor and length
	tmplPerfSize   = 8 + 3 + 3 + 5 + 5 + 10 + 1 + 1
)

// newRawTemplate encodes a transfer of a size-byte body (with group-id key
// when key is not empty) on channel ch, handle 0, unsettled.
func newRawTemplate(ch uint16, key string, size int) (*rawTemplate, error) {
	f := make([]byte, tmplPerfSize, tmplPerfSize+64+len(key))
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
	// The data section: its descriptor and a binary of size bytes.
	f = encoding.AppendDescriptor(f, message.DescData)
	f = encoding.AppendBinaryHeader(f, size)
	binary.BigEndian.PutUint32(f, uint32(len(f)+size))
	return &rawTemplate{frame: f, key: key, size: size}, nil
}

// fits reports whether t can carry o.
func (t *rawTemplate) fits(o *Outgoing) bool {
	return t != nil && t.key == o.Key && t.size == len(o.Body)
}

// appendTo appends the frame of o as delivery id.
func (t *rawTemplate) appendTo(dst []byte, id uint32, o *Outgoing) []byte {
	start := len(dst)
	dst = append(dst, t.frame...)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[tmplIDOff:], id)
	binary.BigEndian.PutUint64(f[tmplTagOff:], uint64(id))
	return append(dst, o.Body...)
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
			if t, err = newRawTemplate(l.s.ch, msgs[i].Key, len(msgs[i].Body)); err != nil {
				return t, err
			}
			if n := uint64(len(t.frame) + t.size); n > uint64(c.peerMax) {
				return nil, fmt.Errorf("raw: a %d-byte transfer exceeds the broker's frame size %d (the raw client sends one frame per message)", n, c.peerMax)
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
