package amqp

import (
	"context"
	"fmt"

	"github.com/busbar-io/busbar/amqp/frames"
)

// maxTagSize is the largest delivery-tag the specification allows.
const maxTagSize = 32

// Sender is a link on which this end sends and the peer receives. The engine
// creates it on the peer's attach (Handler.AttachSender).
type Sender struct {
	link
	h SenderHandler

	// Guarded by the connection's mutex.
	deliveryCount uint32
	initialDC     uint32 // the reply's initial-delivery-count
	credit        uint32
	drain         bool // the peer asked to drain and it is not yet done
	unsettled     uint32
	mode          frames.SenderSettleMode
	peerMax       uint64 // the peer's max-message-size; 0 = none
	manual        bool   // the application answers terminal outcomes (Settle)
	creditWait    notifier
}

// notifier lets goroutines wait for a state change guarded by a mutex:
// wait and broadcast are called with the mutex held. It allocates a channel
// only when someone waits.
type notifier struct{ ch chan struct{} }

func (n *notifier) wait() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// attachedLocked runs once the reply is sent.
func (s *Sender) attachedLocked() {
	s.mode = s.reply.SndSettleMode
	s.peerMax = s.remote.MaxMessageSize
}

// SetManualSettlement makes the application answer the peer's outcomes on
// this link: when the peer sends a terminal outcome without settling the
// delivery (its receiver settle mode is second), the engine reports it to
// Outcome with Settled false, keeps the delivery unsettled and sends
// nothing until the application calls Settle with the state to answer: for
// example once the outcome is durable, or a rejection when it could not be
// applied. Call it in Handler.AttachSender.
func (s *Sender) SetManualSettlement() {
	c := s.sess.c
	c.mu.Lock()
	s.manual = true
	c.mu.Unlock()
}

// Settle settles an unsettled delivery this end sent: it sends a settled
// disposition carrying state, usually in answer to the peer's outcome (see
// SetManualSettlement). It returns ErrUnknownDelivery for a delivery that is
// not unsettled on this link and ErrLinkClosed once the link has ended. It
// may be called from any goroutine, once per delivery.
func (s *Sender) Settle(id uint32, state frames.DeliveryState) error {
	sess := s.sess
	c := sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.detachSent || s.torn {
		return ErrLinkClosed
	}
	if od, ok := sess.unsettledOut[id]; !ok || od.snd != s {
		return ErrUnknownDelivery
	}
	delete(sess.unsettledOut, id)
	s.unsettled--
	return sess.settleLocked(frames.RoleSender, id, true, state)
}

// Credit returns the credit the peer has granted and this end not yet used.
func (s *Sender) Credit() uint32 {
	c := s.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.credit
}

// Draining reports whether the peer asked for a drain not yet completed.
func (s *Sender) Draining() bool {
	c := s.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.drain
}

// PeerMaxMessageSize returns the max-message-size the peer set on attach (0:
// no limit); TrySend refuses larger payloads.
func (s *Sender) PeerMaxMessageSize() uint64 { return s.remote.MaxMessageSize }

// TrySend sends one delivery if the peer has granted credit, without ever
// waiting for the peer: it returns ErrNoCredit when there is none. Frames the
// peer's session window cannot take yet are queued (bounded by credit) and
// sent as the window opens; frames are split at the peer's max-frame-size.
// The only wait is for room in the connection's bounded write buffer, which
// the writer goroutine drains to the socket. It returns the delivery-id,
// which Outcome reports. Safe to call from Handler callbacks and any
// goroutine.
func (s *Sender) TrySend(m *Message) (uint32, error) {
	sess := s.sess
	c := sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.detachSent || s.torn {
		return 0, ErrLinkClosed
	}
	if len(m.Tag) > maxTagSize {
		return 0, fmt.Errorf("amqp: delivery-tag of %d bytes exceeds %d", len(m.Tag), maxTagSize)
	}
	if s.peerMax > 0 && uint64(len(m.Payload)) > s.peerMax {
		return 0, NewError(CondMessageSizeExceeded, "message of %d bytes exceeds the peer's max-message-size of %d", len(m.Payload), s.peerMax)
	}
	if s.credit == 0 || !s.attached { // no credit can precede the attach reply
		return 0, ErrNoCredit
	}
	settled := m.Settled
	switch s.mode {
	case frames.SenderSettleSettled:
		settled = true
	case frames.SenderSettleUnsettled:
		settled = false
	}
	id := sess.nextDeliveryID
	sess.nextDeliveryID++
	s.credit--
	s.deliveryCount++
	tag := m.Tag
	if tag == nil {
		// delivery-tag is mandatory: derive one from the delivery-id.
		sess.tagScratch = [4]byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
		tag = sess.tagScratch[:]
	}
	if !settled {
		sess.unsettledOut[id] = outDelivery{snd: s, tag: m.Tag}
		s.unsettled++
	}
	pt := pendingTransfer{snd: s, id: id, format: m.Format, settled: settled, first: true, tag: tag, data: m.Payload}
	var err error
	done := false
	if len(sess.pending) == 0 {
		done, err = sess.writeLocked(&pt)
	}
	if !done && err == nil {
		if pt.first {
			pt.tag = append([]byte(nil), pt.tag...)
		}
		pt.data = append([]byte(nil), pt.data...)
		sess.pending = append(sess.pending, pt)
	}
	if s.drain && s.credit == 0 {
		s.drain = false
		sess.flowLocked(&s.link, true)
	}
	return id, err
}

// Send is TrySend that waits for credit until ctx is done. Do not call it
// from Handler callbacks: credit arrives on the goroutine that runs them.
func (s *Sender) Send(ctx context.Context, m *Message) (uint32, error) {
	for {
		id, err := s.TrySend(m)
		if err != ErrNoCredit {
			return id, err
		}
		c := s.sess.c
		c.mu.Lock()
		if s.credit > 0 || s.detachSent || s.torn {
			c.mu.Unlock()
			continue
		}
		ch := s.creditWait.wait()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// CompleteDrain ends a drain the peer asked for: the unused credit is given
// up (delivery-count advances by it, credit becomes 0) and a flow with drain
// set tells the peer. It does nothing when no drain is pending.
func (s *Sender) CompleteDrain() error {
	c := s.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.detachSent || s.torn {
		return ErrLinkClosed
	}
	if !s.drain {
		return nil
	}
	s.completeDrainLocked()
	return nil
}

func (s *Sender) completeDrainLocked() {
	s.deliveryCount += s.credit
	s.credit = 0
	s.drain = false
	s.sess.flowLocked(&s.link, true)
}

// flowLocked applies the peer's flow (as receiver) to the link credit
// (§2.6.7): credit = delivery-count(receiver) + link-credit(receiver) -
// delivery-count(sender). It returns what the handler is told.
func (s *Sender) flowLocked(f *frames.Flow) Flow {
	dc := s.initialDC // the peer had not seen our attach yet
	if f.DeliveryCount != nil {
		dc = *f.DeliveryCount
	}
	if f.LinkCredit != nil {
		s.credit = windowFrom(dc, *f.LinkCredit, s.deliveryCount)
	}
	s.drain = f.Drain
	if s.credit > 0 {
		s.creditWait.broadcast()
	}
	fl := Flow{Credit: s.credit, Drain: s.drain}
	if f.Available != nil {
		fl.Available = *f.Available
	}
	switch {
	case !s.attached:
		// The attach reply is deferred: no frame for this link may precede
		// it; finishing the attach reports (or answers) this flow.
	case s.drain && s.credit == 0:
		// Nothing to give up: answer the drain at once.
		s.drain = false
		s.sess.flowLocked(&s.link, true)
		fl.Drain = false
	case f.Echo:
		s.sess.flowLocked(&s.link, false)
	}
	return fl
}
