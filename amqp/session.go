package amqp

import (
	"sync/atomic"

	"github.com/busbar-io/busbar/amqp/frames"
)

// maxWindow is the outgoing-window this end advertises: it never limits its
// own sending beyond what the peer's incoming-window allows.
const maxWindow = 0xFFFFFFFF

// Session is one AMQP session. The engine creates it when the peer begins;
// the application sees it in Handler callbacks.
type Session struct {
	c      *Conn
	inCh   uint16 // the peer's channel
	outCh  uint16 // ours
	remote *frames.Begin
	reply  frames.Begin
	value  atomic.Value

	// Everything below is guarded by c.mu.
	accepted bool        // Handler.Begin accepted: End is due
	batched  bool        // in c.batched
	deferred bool        // in c.deferred
	dp       pendingDisp // our dispositions as receiver, being coalesced
	sdp      pendingDisp // ... as sender
	endSent  bool
	torn     bool

	// Incoming transfers (§2.5.6): the peer may send inLeft more frames
	// before our next flow; every flow we send restores it to inWindow.
	nextIncomingID uint32
	inWindow       uint32
	inLeft         uint32

	// Outgoing transfers.
	initialOutgoingID uint32
	nextOutgoingID    uint32
	remoteIncoming    uint32 // frames the peer can still take
	nextDeliveryID    uint32
	pending           []pendingTransfer // deliveries waiting for the peer's window

	peerHandleMax uint32
	links         map[uint32]*link // by the peer's handle
	// detached holds the peer's handles whose links the peer detached and
	// that no new attach has reused yet: a flow the peer sent on one just
	// after its detach (go-amqp may) is stale, not an error.
	detached     map[uint32]bool
	outHandles   []*link // by our handle
	unsettledOut map[uint32]outDelivery
	unsettledIn  map[uint32]inDelivery

	// Scratch performatives and the values their pointer fields point at.
	flow                     frames.Flow
	tr                       frames.Transfer
	disp                     frames.Disposition
	fNext, fHandle, fDC, fCr uint32
	trID, trFmt, dispLast    uint32
	tagScratch               [4]byte
}

// outDelivery is an unsettled delivery this end sent.
type outDelivery struct {
	snd *Sender
	tag []byte
}

// inDelivery is an unsettled delivery this end received.
type inDelivery struct {
	r           *Receiver
	outcomeSent bool // receiver settle mode second: waiting for the peer
}

// pendingTransfer is a delivery (or its rest) waiting for window.
type pendingTransfer struct {
	snd     *Sender
	id      uint32
	format  uint32
	settled bool
	first   bool // the first frame is not yet sent
	tag     []byte
	data    []byte
}

// Conn returns the session's connection.
func (s *Session) Conn() *Conn { return s.c }

// RemoteBegin returns the peer's begin performative. Do not modify it.
func (s *Session) RemoteBegin() *frames.Begin { return s.remote }

// Reply returns the begin performative that answers the peer's; edit it only
// during Handler.Begin (window and id fields are the engine's).
func (s *Session) Reply() *frames.Begin { return &s.reply }

// SetValue attaches an application value to the session.
func (s *Session) SetValue(v any) { s.value.Store(valueBox{v}) }

// Value returns what SetValue stored, or nil.
func (s *Session) Value() any {
	b, _ := s.value.Load().(valueBox)
	return b.v
}

// End ends the session with an error (nil for a clean end): the engine sends
// end and detaches every link, calling the handlers before it returns.
func (s *Session) End(e *frames.Error) {
	c := s.c
	c.mu.Lock()
	s.failLocked(e)
	c.mu.Unlock()
	c.flushEvents()
}

// onBegin starts a session the peer began on channel ch.
func (c *Conn) onBegin(ch uint16, b *frames.Begin) {
	c.mu.Lock()
	if c.closeSent {
		c.mu.Unlock()
		return
	}
	if int(ch) < len(c.inChans) && c.inChans[ch] != nil {
		c.closeLocked(NewError(CondNotAllowed, "begin on channel %d, which already has a session", ch))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	if b.RemoteChannel != nil {
		c.closeLocked(NewError(CondNotAllowed, "begin.remote-channel is set (%d) but this end began no session", *b.RemoteChannel))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	out := -1
	for i, x := range c.outChans {
		if x == nil {
			out = i
			break
		}
	}
	if out < 0 {
		out = len(c.outChans)
		c.outChans = append(c.outChans, nil)
	}
	for int(ch) >= len(c.inChans) {
		c.inChans = append(c.inChans, nil)
	}
	w := c.cfg.SessionWindow
	s := &Session{
		c:              c,
		inCh:           ch,
		outCh:          uint16(out),
		remote:         b,
		nextIncomingID: b.NextOutgoingID,
		inWindow:       w,
		inLeft:         w,
		remoteIncoming: b.IncomingWindow,
		peerHandleMax:  b.HandleMax,
		links:          make(map[uint32]*link),
		unsettledOut:   make(map[uint32]outDelivery),
		unsettledIn:    make(map[uint32]inDelivery),
	}
	peerCh := ch
	s.reply = frames.Begin{
		RemoteChannel:  &peerCh,
		NextOutgoingID: s.nextOutgoingID,
		IncomingWindow: w,
		OutgoingWindow: maxWindow,
		HandleMax:      c.cfg.HandleMax,
	}
	c.inChans[ch] = s
	c.outChans[out] = s
	c.mu.Unlock()

	err := c.h.Begin(s)

	c.mu.Lock()
	if s.torn { // the connection closed meanwhile
		c.mu.Unlock()
		return
	}
	s.reply.NextOutgoingID = s.nextOutgoingID
	s.reply.IncomingWindow = w
	_ = c.send(s.outCh, &s.reply)
	if err != nil {
		s.failLocked(asAMQPError(err))
	} else {
		s.accepted = true
	}
	c.mu.Unlock()
	c.flushEvents()
}

// dispatch handles a frame on the session's channel.
func (s *Session) dispatch(body frames.Body) {
	switch b := body.(type) {
	case *frames.Transfer:
		s.onTransfer(b)
	case *frames.Flow:
		s.onFlow(b)
	case *frames.Disposition:
		s.onDisposition(b)
	case *frames.Attach:
		s.onAttach(b)
	case *frames.Detach:
		s.onDetach(b)
	case *frames.End:
		s.onEnd(b)
	}
}

// failLocked ends the session from this end with an error.
func (s *Session) failLocked(e *frames.Error) {
	if s.endSent {
		return
	}
	s.flushDispLocked()
	s.endSent = true
	if e != nil {
		s.c.log.Info("ending session", "channel", s.outCh, "condition", string(e.Condition), "description", e.Description)
	}
	_ = s.c.send(s.outCh, &frames.End{Error: e})
	var err error
	if e != nil {
		err = e
	}
	s.teardownLocked(err)
}

// teardownLocked detaches every link and queues the callbacks.
func (s *Session) teardownLocked(err error) {
	if s.torn {
		return
	}
	s.torn = true
	for _, l := range s.outHandles {
		if l != nil {
			l.teardownLocked(err)
		}
	}
	s.pending = nil
	if s.accepted {
		s.c.events = append(s.c.events, event{kind: evEnd, sess: s, err: err})
	}
}

// release frees the session's channels once both ends have ended it.
func (s *Session) releaseLocked() {
	c := s.c
	if int(s.inCh) < len(c.inChans) && c.inChans[s.inCh] == s {
		c.inChans[s.inCh] = nil
	}
	if int(s.outCh) < len(c.outChans) && c.outChans[s.outCh] == s {
		c.outChans[s.outCh] = nil
	}
}

// onEnd handles the peer's end: the answer to ours, or its own.
func (s *Session) onEnd(e *frames.End) {
	c := s.c
	c.mu.Lock()
	if !s.endSent {
		s.flushDispLocked()
		s.endSent = true
		_ = c.send(s.outCh, &frames.End{})
		s.teardownLocked(peerErr(e.Error))
	}
	s.releaseLocked()
	c.mu.Unlock()
	c.flushEvents()
}

// sessionFlowLocked sends a flow carrying the session state and, when l is
// set, the link's; it renews the peer's view of our incoming window.
func (s *Session) flowLocked(l *link, drain bool) {
	s.inLeft = s.inWindow
	f := &s.flow
	*f = frames.Flow{
		IncomingWindow: s.inWindow,
		NextOutgoingID: s.nextOutgoingID,
		OutgoingWindow: maxWindow,
		Drain:          drain,
	}
	s.fNext = s.nextIncomingID
	f.NextIncomingID = &s.fNext
	if l != nil {
		s.fHandle = l.outHandle
		f.Handle = &s.fHandle
		if l.snd != nil {
			s.fDC, s.fCr = l.snd.deliveryCount, l.snd.credit
		} else {
			s.fDC, s.fCr = l.rcv.deliveryCount, l.rcv.credit
		}
		f.DeliveryCount = &s.fDC
		f.LinkCredit = &s.fCr
	}
	_ = s.c.send(s.outCh, f)
}

// onFlow applies the peer's flow to the session and, with a handle, to a link.
func (s *Session) onFlow(f *frames.Flow) {
	c := s.c
	c.mu.Lock()
	if s.endSent {
		c.mu.Unlock()
		return
	}
	next := s.initialOutgoingID // the peer had not seen our begin yet
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	if serialLess(s.nextOutgoingID, next) {
		s.failLocked(NewError(CondInvalidField, "flow.next-incoming-id %d is ahead of this end's next-outgoing-id %d", next, s.nextOutgoingID))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	s.remoteIncoming = windowFrom(next, f.IncomingWindow, s.nextOutgoingID)
	var snd *Sender
	var fl Flow
	if f.Handle == nil {
		if f.Echo {
			s.flowLocked(nil, false)
		}
	} else {
		l := s.links[*f.Handle]
		if l == nil && s.detached[*f.Handle] {
			c.mu.Unlock()
			c.flushEvents()
			return
		}
		if l == nil {
			s.failLocked(NewError(CondUnattachedHandle, "flow on handle %d, which is not attached", *f.Handle))
			c.mu.Unlock()
			c.flushEvents()
			return
		}
		if !l.detachSent && (l.attached || l.pending) {
			if l.snd != nil {
				fl = l.snd.flowLocked(f)
				if l.attached {
					snd = l.snd
				}
			} else {
				l.rcv.flowLocked(f)
			}
		}
	}
	s.pumpLocked()
	c.mu.Unlock()
	if snd != nil && (fl.Credit > 0 || fl.Drain) {
		snd.h.Flow(snd, fl)
	}
}

// pumpLocked sends pending deliveries while the peer's window allows.
func (s *Session) pumpLocked() {
	for len(s.pending) > 0 && s.remoteIncoming > 0 {
		done, err := s.writeLocked(&s.pending[0])
		if err != nil || !done {
			return
		}
		s.pending[0] = pendingTransfer{}
		s.pending = s.pending[1:]
	}
	if len(s.pending) == 0 {
		s.pending = nil
	}
}

// writeLocked writes frames of a delivery while the peer's window allows,
// split at the connection's outgoing max-frame-size; it reports whether the
// delivery is complete.
func (s *Session) writeLocked(pt *pendingTransfer) (bool, error) {
	c := s.c
	for s.remoteIncoming > 0 {
		t := &s.tr
		*t = frames.Transfer{Handle: pt.snd.outHandle, Settled: pt.settled}
		if pt.first {
			s.trID, s.trFmt = pt.id, pt.format
			t.DeliveryID, t.MessageFormat = &s.trID, &s.trFmt
			t.DeliveryTag = pt.tag
		}
		n := len(pt.data)
		// A transfer performative with a tag of at most 32 bytes and no
		// state takes well under 128 bytes: only larger payloads need the
		// exact overhead.
		if n > int(c.outMax)-128 {
			t.More = true
			if room := int(c.outMax) - frames.TransferOverhead(t); n > room {
				n = room
			} else {
				t.More = false
			}
		}
		t.Payload = pt.data[:n]
		if err := c.send(s.outCh, t); err != nil {
			return false, err
		}
		s.nextOutgoingID++
		s.remoteIncoming--
		pt.first, pt.tag = false, nil
		pt.data = pt.data[n:]
		if !t.More {
			return true, nil
		}
	}
	return false, nil
}

// onDisposition applies the peer's disposition to a range of deliveries.
func (s *Session) onDisposition(d *frames.Disposition) {
	c := s.c
	c.mu.Lock()
	if s.endSent {
		c.mu.Unlock()
		return
	}
	last := d.First
	if d.Last != nil {
		last = *d.Last
	}
	if serialLess(last, d.First) {
		s.failLocked(NewError(CondInvalidField, "disposition.last %d precedes disposition.first %d", last, d.First))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	if d.Role == frames.RoleSender {
		s.settledByPeerLocked(d.First, last, d.Settled)
		c.mu.Unlock()
		return
	}
	outs := s.outcomesLocked(d, last)
	c.mu.Unlock()
	for _, o := range outs {
		o.snd.h.Outcome(o.snd, o.o)
	}
	clear(outs)
	c.outScratch = outs[:0]
}

// inRange reports whether id lies in [first, last] (serial numbers).
func inRange(id, first, last uint32) bool { return id-first <= last-first }

// forRange calls f for every key of m in [first, last], visiting whichever
// is smaller: the range or the map (a range can span 2^32 ids).
func forRange[V any](m map[uint32]V, first, last uint32, f func(id uint32, v V)) {
	if uint64(last-first)+1 <= uint64(len(m)) {
		for id := first; ; id++ {
			if v, ok := m[id]; ok {
				f(id, v)
			}
			if id == last {
				return
			}
		}
	}
	for id, v := range m {
		if inRange(id, first, last) {
			f(id, v)
		}
	}
}

// settledByPeerLocked handles the peer sender settling deliveries it sent
// (receiver settle mode second, or spontaneous settlement).
func (s *Session) settledByPeerLocked(first, last uint32, settled bool) {
	if !settled {
		return
	}
	forRange(s.unsettledIn, first, last, func(id uint32, in inDelivery) {
		delete(s.unsettledIn, id)
		in.r.unsettled--
		in.r.refillLocked()
	})
}

// outcomeEvent is an Outcome due to a Sender's handler.
type outcomeEvent struct {
	snd *Sender
	o   Outcome
}

// outcomesLocked applies a receiver's disposition to deliveries this end
// sent and returns the Outcome callbacks due. A terminal outcome the peer
// left unsettled (receiver settle mode second) is settled here, and the
// settlement sent back, unless the delivery's link settles manually
// (Sender.SetManualSettlement): its application answers with Sender.Settle.
func (s *Session) outcomesLocked(d *frames.Disposition, last uint32) []outcomeEvent {
	outs := s.c.outScratch[:0]
	terminal := false
	if !d.Settled {
		switch d.State.(type) {
		case *frames.Accepted, *frames.Rejected, *frames.Released, *frames.Modified:
			terminal = true
		}
	}
	mixed := false // the range holds deliveries of manually settled links
	if terminal {
		forRange(s.unsettledOut, d.First, last, func(_ uint32, od outDelivery) {
			mixed = mixed || od.snd.manual
		})
	}
	forRange(s.unsettledOut, d.First, last, func(id uint32, od outDelivery) {
		settle := d.Settled || (terminal && !od.snd.manual)
		if settle {
			delete(s.unsettledOut, id)
			od.snd.unsettled--
			if terminal && mixed {
				// Answer this one alone: others of the range wait for
				// their application.
				s.disp = frames.Disposition{Role: frames.RoleSender, First: id, Settled: true, State: d.State}
				_ = s.c.send(s.outCh, &s.disp)
			}
		}
		if od.snd.h != nil && !od.snd.torn {
			outs = append(outs, outcomeEvent{snd: od.snd, o: Outcome{ID: id, Tag: od.tag, State: d.State, Settled: settle}})
		}
	})
	if terminal && !mixed && len(outs) > 0 {
		s.disp = frames.Disposition{Role: frames.RoleSender, First: d.First, Settled: true, State: d.State}
		if last != d.First {
			s.dispLast = last
			s.disp.Last = &s.dispLast
		}
		_ = s.c.send(s.outCh, &s.disp)
	}
	return outs
}
