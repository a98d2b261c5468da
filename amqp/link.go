package amqp

import (
	"context"
	"errors"
	"log/slog"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// link is the state Sender and Receiver share. Fields after sess are
// guarded by the connection's mutex.
type link struct {
	sess      *Session
	inHandle  uint32 // the peer's handle
	outHandle uint32 // ours
	remote    *frames.Attach
	reply     frames.Attach

	attached   bool          // the Handler accepted the link: Detach is due
	pending    bool          // the attach reply is deferred (ErrDeferAttach)
	attaching  bool          // the Attach callback is running
	early      *attachAnswer // CompleteAttach called while attaching
	detachSent bool          // no more frames from this end
	torn       bool          // callbacks queued, unsettled state dropped

	snd *Sender // exactly one of snd and rcv is set
	rcv *Receiver
}

// Name returns the link's name.
func (l *link) Name() string { return l.remote.Name }

// Session returns the link's session.
func (l *link) Session() *Session { return l.sess }

// Remote returns the peer's attach performative. Do not modify it.
func (l *link) Remote() *frames.Attach { return l.remote }

// Reply returns the attach performative that answers the peer's, pre-filled
// by echoing its source, target and settle modes, with this end's
// max-message-size. Its Source and Target are this end's own copies (the
// source's filter set included), to edit in place. Edit it only during the
// Handler's attach callback; a deferred attach edits it through
// CompleteAttach's edit function.
func (l *link) Reply() *frames.Attach { return &l.reply }

// Detach detaches (closes) the link with an error, nil for a clean detach.
// The handler's Detach (after Lost outcomes for a Sender) runs before
// Detach returns. Detaching an already detached link does nothing.
func (l *link) Detach(e *frames.Error) {
	c := l.sess.c
	c.mu.Lock()
	l.failLocked(e)
	c.mu.Unlock()
	c.flushEvents()
}

// failLocked detaches the link from this end.
func (l *link) failLocked(e *frames.Error) {
	if l.pending && !l.sess.endSent {
		l.refuseLocked(e) // an attach must precede the detach
		return
	}
	if l.detachSent {
		return
	}
	l.detachSent = true
	if e != nil {
		l.sess.c.log.Info("detaching link", "name", l.remote.Name, "condition", string(e.Condition), "description", e.Description)
	}
	if !l.sess.endSent {
		l.sess.flushDispLocked()
		_ = l.sess.c.send(l.sess.outCh, &frames.Detach{Handle: l.outHandle, Closed: true, Error: e})
	}
	var err error
	if e != nil {
		err = e
	}
	l.teardownLocked(err)
}

// teardownLocked drops the link's in-flight state and queues its callbacks:
// a Lost outcome per unsettled delivery it sent, then Detach.
func (l *link) teardownLocked(err error) {
	if l.torn {
		return
	}
	l.torn = true
	s := l.sess
	c := s.c
	if snd := l.snd; snd != nil {
		if snd.unsettled > 0 {
			for id, od := range s.unsettledOut {
				if od.snd == snd {
					delete(s.unsettledOut, id)
					if l.attached {
						c.events = append(c.events, event{kind: evOutcome, snd: snd, o: Outcome{ID: id, Tag: od.tag, Lost: true}})
					}
				}
			}
			snd.unsettled = 0
		}
		kept := s.pending[:0]
		for _, pt := range s.pending {
			if pt.snd != snd {
				kept = append(kept, pt)
			}
		}
		clear(s.pending[len(kept):])
		s.pending = kept
		snd.creditWait.broadcast()
		if l.attached {
			c.events = append(c.events, event{kind: evSenderDetach, snd: snd, err: err})
		}
	} else {
		r := l.rcv
		if r.unsettled > 0 {
			for id, in := range s.unsettledIn {
				if in.r == r {
					delete(s.unsettledIn, id)
				}
			}
			r.unsettled = 0
		}
		r.buf = nil
		if l.attached {
			c.events = append(c.events, event{kind: evReceiverDetach, rcv: r, err: err})
		}
	}
}

// onAttach handles the peer's attach: a new link, accepted or refused by the
// Handler.
func (s *Session) onAttach(a *frames.Attach) {
	c := s.c
	c.mu.Lock()
	if s.endSent {
		c.mu.Unlock()
		return
	}
	if a.Handle > c.cfg.HandleMax {
		c.closeLocked(NewError(CondFramingError, "attach.handle %d exceeds the handle-max of %d", a.Handle, c.cfg.HandleMax))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	if s.links[a.Handle] != nil {
		s.failLocked(NewError(CondHandleInUse, "attach.handle %d is already in use by link %q", a.Handle, s.links[a.Handle].remote.Name))
		c.mu.Unlock()
		c.flushEvents()
		return
	}
	out := -1
	for i, x := range s.outHandles {
		if x == nil {
			out = i
			break
		}
	}
	if out < 0 {
		out = len(s.outHandles)
		s.outHandles = append(s.outHandles, nil)
	}
	l := s.newLink(a, uint32(out))
	l.attaching = true
	s.links[a.Handle] = l
	delete(s.detached, a.Handle)
	s.outHandles[out] = l
	overHandles := uint64(out) > uint64(s.peerHandleMax)
	c.mu.Unlock()

	var err error
	var sh SenderHandler
	var rh ReceiverHandler
	switch {
	case overHandles:
		err = NewError(CondResourceLimitExceeded, "no link handle left within the peer's handle-max of %d", s.peerHandleMax)
	case l.snd != nil:
		sh, err = c.h.AttachSender(l.snd)
	default:
		rh, err = c.h.AttachReceiver(l.rcv)
	}

	c.mu.Lock()
	if l.snd != nil {
		// Fixed now: the peer's flows may count from it even if the reply
		// is deferred.
		l.snd.deliveryCount = l.reply.InitialDeliveryCount
		l.snd.initialDC = l.reply.InitialDeliveryCount
	}
	l.attaching = false
	if errors.Is(err, ErrDeferAttach) && l.early != nil {
		// The application completed the attach from another goroutine
		// before its callback returned: apply that answer now.
		sh, rh, err = l.early.sh, l.early.rh, l.early.err
		if l.early.edit != nil && err == nil {
			l.early.edit(&l.reply)
		}
		l.early = nil
	}
	if errors.Is(err, ErrDeferAttach) && !s.torn && !l.detachSent {
		l.pending = true
		c.mu.Unlock()
		return
	}
	fl, notify := l.finishAttachLocked(sh, rh, err)
	c.mu.Unlock()
	c.flushEvents()
	if notify {
		l.snd.h.Flow(l.snd, fl)
	}
}

// ErrDeferAttach, returned by Handler.AttachSender or AttachReceiver,
// defers the answer to the peer's attach: the application completes it
// later, from any goroutine, with Sender.CompleteAttach or
// Receiver.CompleteAttach (for example once a Service Bus session becomes
// available). Meanwhile the rest of the connection runs; credit the peer
// grants is kept, and reported to the handler on completion.
var ErrDeferAttach = errors.New("amqp: attach deferred")

// errNotPending is returned by CompleteAttach for a link whose attach was
// not deferred, or was already completed.
var errNotPending = errors.New("amqp: no deferred attach to complete")

// finishAttachLocked answers the peer's attach: accepted with a handler,
// or refused with err. For a Sender accepted with credit already granted
// it returns the Flow to report outside the lock.
func (l *link) finishAttachLocked(sh SenderHandler, rh ReceiverHandler, err error) (Flow, bool) {
	s := l.sess
	c := s.c
	accepted := err == nil && (sh != nil || rh != nil)
	if s.torn || l.detachSent {
		// The session, connection or link ended during the callback: the
		// link never went live, but an accepting handler is owed Detach.
		switch {
		case accepted && sh != nil:
			l.snd.h = sh
			c.events = append(c.events, event{kind: evSenderDetach, snd: l.snd, err: ErrLinkClosed})
		case accepted:
			l.rcv.h = rh
			c.events = append(c.events, event{kind: evReceiverDetach, rcv: l.rcv, err: ErrLinkClosed})
		}
		return Flow{}, false
	}
	if err == nil && !accepted {
		err = NewError(CondInternalError, "the application accepted link %q without a handler", l.remote.Name)
	}
	if err != nil {
		l.refuseLocked(asAMQPError(err))
		return Flow{}, false
	}
	if l.snd != nil {
		l.snd.h = sh
	} else {
		l.rcv.h = rh
	}
	l.attached = true
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("link attached", "name", l.remote.Name, "sender", l.snd != nil,
			"source", terminusAddr(l.reply.Source), "target", targetAddr(l.reply.Target),
			"snd-settle-mode", l.reply.SndSettleMode, "rcv-settle-mode", l.reply.RcvSettleMode)
	}
	_ = c.send(s.outCh, &l.reply)
	if l.snd != nil {
		snd := l.snd
		snd.attachedLocked()
		if snd.drain && snd.credit == 0 {
			snd.completeDrainLocked() // a drain that arrived while deferred
		}
		if snd.credit > 0 { // granted while the attach was deferred
			return Flow{Credit: snd.credit, Drain: snd.drain}, true
		}
		return Flow{}, false
	}
	l.rcv.attachedLocked()
	return Flow{}, false
}

// refuseLocked answers the peer's attach with a refusal: an attach whose
// null terminus tells the peer no node was created, then a detach with the
// error.
func (l *link) refuseLocked(e *frames.Error) {
	if l.snd != nil {
		l.reply.Source = nil
	} else {
		l.reply.Target = nil
	}
	l.pending = false
	_ = l.sess.c.send(l.sess.outCh, &l.reply)
	l.failLocked(e)
}

// attachAnswer is the application's answer to a deferred attach, kept when
// it arrives before the Attach callback has returned ErrDeferAttach.
type attachAnswer struct {
	sh   SenderHandler
	rh   ReceiverHandler
	edit func(*frames.Attach)
	err  error
}

// completeAttach completes a deferred attach (see ErrDeferAttach).
func (l *link) completeAttach(sh SenderHandler, rh ReceiverHandler, edit func(*frames.Attach), err error) error {
	c := l.sess.c
	c.mu.Lock()
	if !l.pending && l.attaching && l.early == nil && !l.torn && !l.detachSent {
		// The callback that will return ErrDeferAttach is still running.
		l.early = &attachAnswer{sh, rh, edit, err}
		c.mu.Unlock()
		return nil
	}
	if !l.pending {
		closed := l.torn || l.detachSent
		c.mu.Unlock()
		if closed {
			return ErrLinkClosed
		}
		return errNotPending
	}
	l.pending = false
	if errors.Is(err, ErrDeferAttach) {
		err = NewError(CondInternalError, "attach of link %q deferred twice", l.remote.Name)
	}
	if edit != nil && err == nil {
		edit(&l.reply)
	}
	fl, notify := l.finishAttachLocked(sh, rh, err)
	live := l.attached && !l.torn
	c.mu.Unlock()
	c.flushEvents()
	if notify {
		l.snd.h.Flow(l.snd, fl)
	}
	if !live && err == nil {
		return ErrLinkClosed
	}
	return nil
}

// CompleteAttach answers a deferred attach (see ErrDeferAttach): with h to
// accept the link, or with an error to refuse it. edit, when not nil and
// the link is accepted, changes the reply; it runs under the connection's
// lock, so it must only edit the attach it is given. It returns
// ErrLinkClosed if the link, its session or its connection ended
// meanwhile; h's Detach is then called as for any accepted link.
func (s *Sender) CompleteAttach(h SenderHandler, edit func(reply *frames.Attach), err error) error {
	return s.completeAttach(h, nil, edit, err)
}

// CompleteAttach answers a deferred attach (see ErrDeferAttach), as
// Sender.CompleteAttach does.
func (r *Receiver) CompleteAttach(h ReceiverHandler, edit func(reply *frames.Attach), err error) error {
	return r.completeAttach(nil, h, edit, err)
}

// newLink builds the Sender or Receiver for the peer's attach, with a reply
// that echoes it.
func (s *Session) newLink(a *frames.Attach, out uint32) *link {
	var l *link
	if a.Role == frames.RoleReceiver {
		snd := &Sender{}
		snd.snd = snd
		l = &snd.link
	} else {
		rcv := &Receiver{window: s.c.cfg.LinkCredit, deliveryCount: a.InitialDeliveryCount}
		rcv.rcv = rcv
		l = &rcv.link
	}
	l.sess = s
	l.inHandle = a.Handle
	l.outHandle = out
	l.remote = a
	l.reply = frames.Attach{
		Name:           a.Name,
		Handle:         out,
		Role:           !a.Role,
		SndSettleMode:  a.SndSettleMode,
		RcvSettleMode:  a.RcvSettleMode,
		Source:         cloneSource(a.Source),
		Target:         cloneTarget(a.Target),
		MaxMessageSize: s.c.cfg.MaxMessageSize,
	}
	return l
}

// onDetach handles the peer's detach: the answer to ours, or its own.
func (s *Session) onDetach(d *frames.Detach) {
	c := s.c
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.flushEvents()
	}()
	if s.endSent {
		return
	}
	l := s.links[d.Handle]
	if l == nil {
		s.failLocked(NewError(CondUnattachedHandle, "detach on handle %d, which is not attached", d.Handle))
		return
	}
	delete(s.links, d.Handle)
	if s.detached == nil {
		s.detached = map[uint32]bool{}
	}
	s.detached[d.Handle] = true
	if s.outHandles[l.outHandle] == l {
		s.outHandles[l.outHandle] = nil
	}
	if l.detachSent {
		return
	}
	if l.pending {
		// The peer gave up waiting for a deferred attach: answer it (as
		// refused) before the detach.
		if l.snd != nil {
			l.reply.Source = nil
		} else {
			l.reply.Target = nil
		}
		l.pending = false
		_ = c.send(s.outCh, &l.reply)
	}
	l.detachSent = true
	s.flushDispLocked()
	_ = c.send(s.outCh, &frames.Detach{Handle: l.outHandle, Closed: d.Closed})
	l.teardownLocked(peerErr(d.Error))
}

func terminusAddr(s *frames.Source) string {
	if s == nil {
		return ""
	}
	return s.Address
}

func targetAddr(t *frames.Target) string {
	if t == nil {
		return ""
	}
	return t.Address
}

// cloneSource copies a terminus (and its filter set) for the reply, so that
// editing the reply leaves the peer's attach intact.
func cloneSource(src *frames.Source) *frames.Source {
	if src == nil {
		return nil
	}
	cp := *src
	if src.Filter != nil {
		cp.Filter = make(map[encoding.Symbol]any, len(src.Filter))
		for k, v := range src.Filter {
			cp.Filter[k] = v
		}
	}
	return &cp
}

// cloneTarget copies a terminus for the reply.
func cloneTarget(t *frames.Target) *frames.Target {
	if t == nil {
		return nil
	}
	cp := *t
	return &cp
}
