package amqp

import (
	"github.com/busbar-io/busbar/amqp/frames"
)

// Receiver is a link on which the peer sends and this end receives. The
// engine creates it on the peer's attach (Handler.AttachReceiver).
type Receiver struct {
	link
	h ReceiverHandler

	// Guarded by the connection's mutex.
	deliveryCount uint32
	credit        uint32
	window        uint32 // automatic credit window; 0 = the application issues credit
	unsettled     uint32 // deliveries awaiting settlement
	maxMessage    uint64
	second        bool // receiver settle mode second
	available     uint32
	// rejectOversize rejects a delivery over maxMessage instead of
	// detaching the link; discard drops the rest of such a delivery.
	rejectOversize bool
	discard        bool

	// The delivery being reassembled from several transfer frames.
	partial  bool
	curID    uint32
	curFmt   uint32
	curSettl bool
	curState frames.DeliveryState
	tag      []byte
	buf      []byte
}

// SetCreditWindow chooses how the link gets credit: n > 0 keeps the peer's
// credit topped up so that credit plus unsettled deliveries stays within n
// (renewed when it falls to half); 0 leaves credit to AddCredit. The
// default is Config.LinkCredit; it may be changed at any time.
func (r *Receiver) SetCreditWindow(n uint32) {
	c := r.sess.c
	c.mu.Lock()
	r.window = n
	r.refillLocked()
	c.mu.Unlock()
}

// AddCredit grants the peer n more deliveries and sends the new credit. It
// is meant for links whose credit window is 0.
func (r *Receiver) AddCredit(n uint32) error {
	c := r.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.detachSent || r.torn {
		return ErrLinkClosed
	}
	r.credit = uint32(min(uint64(r.credit)+uint64(n), 0xFFFFFFFF))
	if r.attached {
		r.sess.flowLocked(&r.link, false)
	}
	return nil
}

// Credit returns the credit the peer has left.
func (r *Receiver) Credit() uint32 {
	c := r.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return r.credit
}

// Available returns the peer's last available count (its backlog hint).
func (r *Receiver) Available() uint32 {
	c := r.sess.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return r.available
}

// MaxMessageSize returns the largest delivery the link accepts (0: no limit),
// from the attach reply.
func (r *Receiver) MaxMessageSize() uint64 { return r.reply.MaxMessageSize }

// SetRejectOversize makes a delivery larger than the link's max-message-size
// settle as rejected with amqp:link:message-size-exceeded (never reaching
// the handler) while the link stays attached; by default the engine
// detaches the link with that error, as AMQP specifies. Service Bus rejects
// the delivery, and the Python SDK reports the size error only that way.
// Call it from the Handler's AttachReceiver.
func (r *Receiver) SetRejectOversize() {
	c := r.sess.c
	c.mu.Lock()
	r.rejectOversize = true
	c.mu.Unlock()
}

// Settle settles an unsettled delivery with a state (usually an outcome:
// &frames.Accepted{}, &frames.Rejected{...}, &frames.Released{},
// &frames.Modified{...}). In receiver settle mode first the delivery is
// settled at once; in mode second the outcome is sent unsettled and the
// delivery settles when the peer settles it. It may be called from any
// goroutine, once per delivery.
func (r *Receiver) Settle(id uint32, state frames.DeliveryState) error {
	s := r.sess
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.detachSent || r.torn {
		return ErrLinkClosed
	}
	if in, ok := s.unsettledIn[id]; !ok || in.r != r || in.outcomeSent {
		return ErrUnknownDelivery
	}
	err := s.settleLocked(frames.RoleReceiver, id, !r.second, state)
	if r.second {
		s.unsettledIn[id] = inDelivery{r: r, outcomeSent: true} // the peer settles next
		return err
	}
	delete(s.unsettledIn, id)
	r.unsettled--
	r.refillLocked()
	return err
}

// settleLocked queues this end's disposition for an incoming delivery
// (role receiver) or for one it sent (role sender). Consecutive deliveries
// settled alike are coalesced into one disposition covering their range:
// while the reader is handling a batch of frames (Settle called from a
// Transfer callback) it is sent when the batch ends; otherwise (Settle
// called from another goroutine, typically once the store has the
// delivery) the writer goroutine sends it right before its next write, so
// that a worker settling a run of deliveries costs the peer one frame.
func (s *Session) settleLocked(role frames.Role, id uint32, settled bool, state frames.DeliveryState) error {
	c := s.c
	dp := &s.dp
	if role == frames.RoleSender {
		dp = &s.sdp
	}
	if dp.active && id == dp.last+1 && settled == dp.settled && sameState(state, dp.state) {
		dp.last = id
		return nil
	}
	s.flushOneLocked(role, dp)
	*dp = pendingDisp{active: true, first: id, last: id, settled: settled, state: state}
	if c.busy.Load() {
		c.batchLocked(s)
	} else {
		c.deferLocked(s)
	}
	return nil
}

// flushDispLocked sends the coalesced dispositions, if any. It must run
// before any frame that ends the link or session the deliveries are on.
func (s *Session) flushDispLocked() {
	s.flushOneLocked(frames.RoleReceiver, &s.dp)
	s.flushOneLocked(frames.RoleSender, &s.sdp)
}

func (s *Session) flushOneLocked(role frames.Role, dp *pendingDisp) {
	if !dp.active {
		return
	}
	s.disp = frames.Disposition{Role: role, First: dp.first, Settled: dp.settled, State: dp.state}
	if dp.last != dp.first {
		s.dispLast = dp.last
		s.disp.Last = &s.dispLast
	}
	*dp = pendingDisp{}
	_ = s.c.send(s.outCh, &s.disp)
}

// pendingDisp is a range of deliveries settled alike, not yet sent.
type pendingDisp struct {
	active      bool
	settled     bool
	first, last uint32
	state       frames.DeliveryState
}

// sameState reports whether two delivery states can share a disposition:
// the same value, or both of a type without fields.
func sameState(a, b frames.DeliveryState) bool {
	if a == b {
		return true
	}
	switch a.(type) {
	case *frames.Accepted:
		_, ok := b.(*frames.Accepted)
		return ok
	case *frames.Released:
		_, ok := b.(*frames.Released)
		return ok
	}
	return false
}

// attachedLocked runs once the reply is sent: the first credit.
func (r *Receiver) attachedLocked() {
	r.maxMessage = r.reply.MaxMessageSize
	r.second = r.reply.RcvSettleMode == frames.ReceiverSettleSecond
	if r.window > 0 {
		r.credit = r.window
	}
	if r.credit > 0 { // automatic window, or AddCredit during the attach
		r.sess.flowLocked(&r.link, false)
	}
}

// refillLocked renews automatic credit once credit plus unsettled
// deliveries has fallen to half the window.
func (r *Receiver) refillLocked() {
	if r.window == 0 || r.detachSent || !r.attached {
		return
	}
	if uint64(r.credit)+uint64(r.unsettled) > uint64(r.window/2) {
		return
	}
	r.credit = r.window - min(r.unsettled, r.window)
	if r.credit > 0 {
		r.sess.flowLocked(&r.link, false)
	}
}

// flowLocked applies a flow from the peer (the sender): its delivery-count
// may have advanced past ours (it drained), consuming credit.
func (r *Receiver) flowLocked(f *frames.Flow) {
	if f.DeliveryCount != nil {
		if d := serialDiff(*f.DeliveryCount, r.deliveryCount); d > 0 {
			r.credit = uint32(max(int64(r.credit)-d, 0))
			r.deliveryCount = *f.DeliveryCount
		}
	}
	if f.Available != nil {
		r.available = *f.Available
	}
	if f.Echo && r.attached {
		r.sess.flowLocked(&r.link, false)
	}
	r.refillLocked() // an automatic window outlives a drain by the peer
}

// onTransfer handles one transfer frame.
func (s *Session) onTransfer(t *frames.Transfer) {
	c := s.c
	c.mu.Lock()
	if s.endSent {
		c.mu.Unlock()
		return
	}
	if s.inLeft == 0 {
		s.failLocked(NewError(CondWindowViolation, "transfer %d exceeds the incoming-window of %d granted at next-incoming-id %d",
			s.nextIncomingID, s.inWindow, s.nextIncomingID-s.inWindow))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	s.inLeft--
	s.nextIncomingID++
	l := s.links[t.Handle]
	if l == nil {
		s.failLocked(NewError(CondUnattachedHandle, "transfer on handle %d, which is not attached", t.Handle))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	if l.detachSent || !l.attached {
		c.mu.Unlock()
		return // detached by this end: discard until the peer's detach
	}
	r := l.rcv
	if r == nil {
		l.failLocked(NewError(CondNotAllowed, "transfer on link %q, on which the peer is the receiver", l.remote.Name))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	d, ready, e := r.transferLocked(t)
	if e != nil {
		if e.Condition == CondInvalidField {
			s.failLocked(e)
		} else {
			l.failLocked(e)
		}
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	if ready && !d.Settled {
		if _, dup := s.unsettledIn[d.ID]; dup {
			s.failLocked(NewError(CondInvalidField, "transfer.delivery-id %d is already in use by an unsettled delivery", d.ID))
			c.mu.Unlock()
			c.flushEvents()
			return
		}
		s.unsettledIn[d.ID] = inDelivery{r: r}
		r.unsettled++
	}
	if s.inLeft <= s.inWindow/2 {
		c.batchLocked(s)
	}
	c.mu.Unlock()
	if !ready {
		return
	}
	if d.oversize != nil {
		if !d.Settled {
			_ = r.Settle(d.ID, &frames.Rejected{Error: d.oversize})
		}
		return
	}
	r.h.Transfer(r, d)
	c.mu.Lock()
	r.refillLocked()
	if !r.partial && cap(r.buf) > 1<<20 {
		r.buf = nil // keep a reassembly buffer only while it is small
	}
	c.mu.Unlock()
}

// transferLocked adds a transfer frame to the delivery in progress. It
// returns the delivery when complete; e is a link error (credit or size) or
// a session error (invalid-field).
func (r *Receiver) transferLocked(t *frames.Transfer) (d Delivery, ready bool, e *frames.Error) {
	if !r.partial {
		if t.DeliveryID == nil {
			return d, false, NewError(CondInvalidField, "transfer.delivery-id is absent on the first frame of a delivery on link %q", r.remote.Name)
		}
		if r.credit == 0 {
			return d, false, NewError(CondTransferLimitExceeded, "delivery %d on link %q arrived without link credit", *t.DeliveryID, r.remote.Name)
		}
		r.credit--
		r.deliveryCount++
		if t.Aborted {
			return d, false, nil
		}
		if !t.More {
			if r.maxMessage > 0 && uint64(len(t.Payload)) > r.maxMessage {
				if r.rejectOversize {
					return Delivery{ID: *t.DeliveryID, Settled: t.Settled, r: r, oversize: r.tooBig(uint64(len(t.Payload)))}, true, nil
				}
				return d, false, r.tooBig(uint64(len(t.Payload)))
			}
			format := uint32(0)
			if t.MessageFormat != nil {
				format = *t.MessageFormat
			}
			return Delivery{ID: *t.DeliveryID, Tag: t.DeliveryTag, Format: format, Settled: t.Settled,
				State: t.State, Payload: t.Payload, r: r}, true, nil
		}
		r.partial = true
		r.curID = *t.DeliveryID
		r.curFmt = 0
		if t.MessageFormat != nil {
			r.curFmt = *t.MessageFormat
		}
		r.curSettl = t.Settled
		r.curState = t.State
		r.tag = append(r.tag[:0], t.DeliveryTag...)
		r.buf = r.buf[:0]
	} else {
		if t.DeliveryID != nil && *t.DeliveryID != r.curID {
			return d, false, NewError(CondInvalidField, "continuation transfer on link %q carries delivery-id %d, but delivery %d is in progress",
				r.remote.Name, *t.DeliveryID, r.curID)
		}
		if t.Aborted {
			r.partial, r.discard = false, false
			r.buf = r.buf[:0]
			return d, false, nil
		}
		r.curSettl = r.curSettl || t.Settled
		if t.State != nil {
			r.curState = t.State
		}
	}
	if r.discard {
		if t.More {
			return d, false, nil
		}
		r.partial, r.discard = false, false
		return Delivery{ID: r.curID, Settled: r.curSettl, r: r, oversize: r.tooBig(r.maxMessage + 1)}, true, nil
	}
	if size := uint64(len(r.buf)) + uint64(len(t.Payload)); r.maxMessage > 0 && size > r.maxMessage {
		if r.rejectOversize {
			r.buf = r.buf[:0]
			if t.More {
				r.discard = true
				return d, false, nil
			}
			r.partial = false
			return Delivery{ID: r.curID, Settled: r.curSettl, r: r, oversize: r.tooBig(size)}, true, nil
		}
		r.partial = false
		return d, false, r.tooBig(size)
	}
	r.buf = append(r.buf, t.Payload...)
	if t.More {
		return d, false, nil
	}
	r.partial = false
	return Delivery{ID: r.curID, Tag: r.tag, Format: r.curFmt, Settled: r.curSettl, State: r.curState, Payload: r.buf, r: r}, true, nil
}

func (r *Receiver) tooBig(size uint64) *frames.Error {
	return NewError(CondMessageSizeExceeded, "delivery of %d bytes or more exceeds the max-message-size of %d on link %q",
		size, r.maxMessage, r.remote.Name)
}
