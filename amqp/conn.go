package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/amqp/frames"
)

// closeGrace is how long the engine waits for the peer's close after
// sending its own, before dropping the socket.
const closeGrace = 2 * time.Second

// Conn is one AMQP connection. The engine creates it; the application sees
// it in Handler callbacks and may call its methods from any goroutine.
type Conn struct {
	srv *Server
	cfg *Config
	nc  net.Conn
	log *slog.Logger
	rd  *frameReader
	w   *writer
	h   Handler
	dec frames.Decoder

	identity   any
	remoteOpen *frames.Open
	reply      frames.Open
	outMax     uint32 // the largest frame we send: min(peer's, ours)
	channelMax uint16 // negotiated
	accepted   bool   // Handler.Open accepted the connection

	stopping atomic.Bool // close sent: the reader only waits for the peer's close
	busy     atomic.Bool // the reader is handling a batch and will call endBatch
	value    atomic.Value

	mu        sync.Mutex
	inChans   []*Session // by the peer's channel
	outChans  []*Session // by our channel
	openSent  bool       // our open is on its way: a close may follow
	closeSent bool
	torn      bool    // sessions torn down
	closeErr  error   // why the connection ended, for Handler.Close
	events    []event // callbacks due, run by flushEvents outside mu

	outScratch []outcomeEvent // reader goroutine only: Outcome callbacks due
	batched    []*Session     // sessions with work for endBatch
	deferred   []*Session     // sessions with dispositions for the writer
}

// endBatch runs when the reader has consumed all buffered input and is
// about to wait for more: it sends the dispositions coalesced during the
// batch, and a flow for each session that has used half its incoming
// window. Renewing windows only here still detects a burst beyond the
// window granted, while a peer that keeps sending is never starved.
func (c *Conn) endBatch() {
	c.mu.Lock()
	c.busy.Store(false)
	for i, s := range c.batched {
		s.batched = false
		s.flushDispLocked()
		if !s.endSent && s.inLeft <= s.inWindow/2 {
			s.flowLocked(nil, false)
		}
		c.batched[i] = nil
	}
	c.batched = c.batched[:0]
	c.mu.Unlock()
}

// deferLocked registers a session whose coalesced dispositions the writer
// goroutine sends before its next write (see flushDeferred).
func (c *Conn) deferLocked(s *Session) {
	if !s.deferred {
		s.deferred = true
		c.deferred = append(c.deferred, s)
	}
	c.w.due()
}

// flushDeferred sends the dispositions held back by deferLocked; the
// writer goroutine calls it.
func (c *Conn) flushDeferred() {
	c.mu.Lock()
	for i, s := range c.deferred {
		s.deferred = false
		s.flushDispLocked()
		c.deferred[i] = nil
	}
	c.deferred = c.deferred[:0]
	c.mu.Unlock()
}

// batchLocked registers a session for endBatch.
func (c *Conn) batchLocked(s *Session) {
	if !s.batched {
		s.batched = true
		c.batched = append(c.batched, s)
	}
}

func newConn(s *Server, nc net.Conn) *Conn {
	c := &Conn{
		srv: s,
		cfg: &s.cfg,
		nc:  nc,
		h:   s.cfg.Handler,
		log: s.log.With("remote", nc.RemoteAddr().String()),
	}
	c.rd = newFrameReader(nc, int(min(s.cfg.MaxFrameSize, 64<<10)), &c.stopping)
	c.w = newWriter(nc, s.cfg.WriteBuffer, s.cfg.WriteTimeout)
	c.w.flushDeferred = c.flushDeferred
	return c
}

// Identity returns what Config.Authenticate returned for this connection.
func (c *Conn) Identity() any { return c.identity }

// RemoteOpen returns the peer's open performative. Do not modify it.
func (c *Conn) RemoteOpen() *frames.Open { return c.remoteOpen }

// Reply returns the open performative that will answer the peer's; edit it
// only during Handler.Open.
func (c *Conn) Reply() *frames.Open { return &c.reply }

// RemoteAddr returns the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SetValue attaches an application value to the connection (per-connection
// state such as tokens granted through claims-based security).
func (c *Conn) SetValue(v any) { c.value.Store(valueBox{v}) }

// Value returns what SetValue stored, or nil.
func (c *Conn) Value() any {
	b, _ := c.value.Load().(valueBox)
	return b.v
}

// valueBox lets atomic.Value hold values of differing types, and nil.
type valueBox struct{ v any }

// Logger returns the connection's logger, which carries the peer's address.
func (c *Conn) Logger() *slog.Logger { return c.log }

// Close closes the connection with an error (nil for a clean close): the
// engine sends close, ends every session (calling the handlers), and drops
// the socket when the peer answers or after a grace period. It returns at
// once; Handler.Close follows on the reader goroutine.
func (c *Conn) Close(e *frames.Error) {
	c.mu.Lock()
	c.closeLocked(e)
	c.mu.Unlock()
	c.flushEvents()
}

// closeLocked sends close and tears the connection's sessions down.
func (c *Conn) closeLocked(e *frames.Error) {
	if !c.openSent {
		// Still negotiating: there is no connection to close yet, only a
		// handshake to abandon.
		c.stopping.Store(true)
		_ = c.nc.SetReadDeadline(time.Now())
		return
	}
	if c.closeSent {
		return
	}
	c.closeSent = true
	if e != nil {
		c.log.Info("closing connection", "condition", string(e.Condition), "description", e.Description)
	}
	_ = c.w.frame(frames.TypeAMQP, 0, &frames.Close{Error: e})
	var err error
	if e != nil {
		err = e
	}
	c.teardownLocked(err)
	c.stopping.Store(true)
	_ = c.nc.SetReadDeadline(time.Now().Add(closeGrace))
}

// teardownLocked ends every session, queueing the callbacks.
func (c *Conn) teardownLocked(err error) {
	if c.torn {
		return
	}
	c.torn = true
	c.closeErr = err
	for _, s := range c.outChans {
		if s != nil {
			s.teardownLocked(err)
		}
	}
}

// writeSync writes bytes directly, before the writer goroutine runs.
func (c *Conn) writeSync(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	_, err := c.nc.Write(b)
	return err
}

// serve runs the connection: handshake, then the read loop, then cleanup.
func (c *Conn) serve() {
	defer func() { _ = c.nc.Close() }()
	c.rd.setDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	open, err := c.handshake()
	if err != nil {
		c.log.Debug("handshake failed", "err", err)
		return
	}
	c.rd.setDeadline(time.Time{})
	if c.cfg.IdleTimeout > 0 {
		c.rd.setIdle(c.cfg.IdleTimeout)
	}
	c.w.heartbeat = time.Duration(open.IdleTimeout) * time.Millisecond / 2
	go c.w.run()
	if !c.opened(open) {
		c.readUntilClose()
	} else {
		c.readLoop()
	}
	c.finish()
}

// handshake negotiates the protocol headers and SASL and reads the peer's
// open (pipelined frames behind it stay buffered).
func (c *Conn) handshake() (*frames.Open, error) {
	hdr, err := c.rd.protoHeader()
	if err != nil {
		return nil, err
	}
	switch {
	case hdr == headerSASL:
		id, err := c.sasl()
		if err != nil {
			var se *saslError
			if errors.As(err, &se) {
				c.log.Info("sasl failed", "reason", se.reason)
				c.saslFail(se)
			}
			return nil, err
		}
		c.identity = id
		if hdr, err = c.rd.protoHeader(); err != nil {
			return nil, err
		}
		if hdr != headerAMQP {
			_ = c.writeSync(headerAMQP[:])
			return nil, fmt.Errorf("protocol header %q after SASL, want AMQP 0 1 0 0", hdr[:])
		}
	case hdr == headerAMQP && c.cfg.AllowNoSASL:
		cr := c.baseCredentials()
		id, err := c.authenticate(cr)
		if err != nil {
			return nil, fmt.Errorf("connection without SASL refused: %w", err)
		}
		c.identity = id
	default:
		want := headerSASL
		if c.cfg.AllowNoSASL && hdr != headerSASL {
			want = headerAMQP
		}
		_ = c.writeSync(want[:])
		return nil, fmt.Errorf("unsupported protocol header %q", hdr[:])
	}
	if err := c.writeSync(headerAMQP[:]); err != nil {
		return nil, err
	}
	h, f, err := c.rd.next(frames.MinMaxFrameSize)
	var fe *frameError
	if err != nil && !errors.As(err, &fe) {
		return nil, err
	}
	var body frames.Body
	if err == nil && h.Type == frames.TypeAMQP {
		body, err = frames.Decode(h, bytes.Clone(f)) // the open is kept
	}
	open, ok := body.(*frames.Open)
	if err != nil || !ok {
		// A connection must open before it can close: answer with open
		// then close carrying the reason.
		e := NewError(CondNotAllowed, "first frame must be open, got %s", describe(h, body, err))
		if err != nil {
			e = decodeError(err)
		}
		c.w.heartbeat = 0
		go c.w.run()
		c.reply = frames.Open{ContainerID: c.cfg.ContainerID, MaxFrameSize: c.cfg.MaxFrameSize, ChannelMax: c.cfg.ChannelMax}
		c.mu.Lock()
		_ = c.w.frame(frames.TypeAMQP, 0, &c.reply)
		c.openSent = true
		c.closeLocked(e)
		c.mu.Unlock()
		c.w.close()
		c.w.wait()
		return nil, e
	}
	return open, nil
}

// describe names a frame for error descriptions.
func describe(h frames.Header, body frames.Body, err error) string {
	switch {
	case err != nil:
		return "an undecodable frame"
	case h.Type != frames.TypeAMQP:
		return fmt.Sprintf("a frame of type %d", h.Type)
	case body == nil:
		return "an empty frame"
	}
	return fmt.Sprintf("%T", body)
}

// decodeError maps a codec error to the error the connection closes with.
func decodeError(err error) *frames.Error {
	var de *frames.DecodeError
	if errors.As(err, &de) {
		return &frames.Error{Condition: de.Condition, Description: de.Error()}
	}
	var fe *frameError
	if errors.As(err, &fe) {
		return fe.err
	}
	return NewError(CondDecodeError, "%v", err)
}

// opened negotiates the peer's open, asks the Handler, and answers. It
// reports whether the connection was accepted.
func (c *Conn) opened(open *frames.Open) bool {
	c.remoteOpen = open
	c.outMax = min(open.MaxFrameSize, c.cfg.MaxFrameSize)
	c.channelMax = min(open.ChannelMax, c.cfg.ChannelMax)
	c.reply = frames.Open{
		ContainerID:  c.cfg.ContainerID,
		MaxFrameSize: c.cfg.MaxFrameSize,
		ChannelMax:   c.cfg.ChannelMax,
		IdleTimeout:  uint32(c.cfg.IdleTimeout / time.Millisecond),
	}
	var refuse *frames.Error
	if open.MaxFrameSize < frames.MinMaxFrameSize {
		refuse = NewError(CondInvalidField, "open.max-frame-size %d is below the minimum of 512", open.MaxFrameSize)
	} else if err := c.h.Open(c); err != nil {
		refuse = asAMQPError(err)
	} else {
		c.accepted = true
	}
	c.log.Debug("open", "container", open.ContainerID, "hostname", open.Hostname,
		"max-frame-size", open.MaxFrameSize, "idle-timeout-ms", open.IdleTimeout, "accepted", c.accepted)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping.Load() { // the server is shutting down
		_ = c.nc.SetReadDeadline(time.Now())
		return false
	}
	if err := c.w.frame(frames.TypeAMQP, 0, &c.reply); err != nil {
		var ee *encodeError
		if !errors.As(err, &ee) {
			return false
		}
		// The application's additions cannot be encoded: open with the
		// negotiated fields only, and close.
		c.reply = frames.Open{ContainerID: c.cfg.ContainerID, MaxFrameSize: c.cfg.MaxFrameSize,
			ChannelMax: c.cfg.ChannelMax, IdleTimeout: c.reply.IdleTimeout}
		_ = c.w.frame(frames.TypeAMQP, 0, &c.reply)
		refuse = NewError(CondInternalError, "cannot encode the open frame: %v", ee.err)
	}
	c.openSent = true
	if refuse != nil {
		c.closeLocked(refuse)
		return false
	}
	return true
}

// readLoop reads and dispatches frames until the connection ends.
func (c *Conn) readLoop() {
	for {
		if c.stopping.Load() {
			c.readUntilClose()
			return
		}
		if !c.rd.buffered() {
			c.endBatch() // about to wait for input
		}
		h, f, err := c.rd.next(c.cfg.MaxFrameSize)
		if err != nil {
			c.readFailed(err)
			return
		}
		c.busy.Store(true)
		if h.Type != frames.TypeAMQP {
			c.Close(NewError(CondFramingError, "frame of type %d after open; only AMQP frames (type 0) are allowed", h.Type))
			continue
		}
		body, err := c.dec.Decode(h, f)
		if err != nil {
			c.Close(decodeError(err))
			continue
		}
		if body == nil {
			continue // heartbeat
		}
		if _, ok := body.(*frames.Close); ok {
			c.peerClosed(body.(*frames.Close))
			return
		}
		if h.Channel > c.channelMax {
			c.Close(NewError(CondFramingError, "channel %d exceeds the channel-max of %d", h.Channel, c.channelMax))
			continue
		}
		c.dispatch(h.Channel, body)
	}
}

// readFailed handles a read error: idle timeout, framing error, or the
// peer vanishing.
func (c *Conn) readFailed(err error) {
	var fe *frameError
	switch {
	case errors.Is(err, errIdleTimeout):
		c.Close(NewError(CondResourceLimitExceeded, "no frame received within the idle timeout of %v", c.cfg.IdleTimeout))
		c.readUntilClose()
	case errors.As(err, &fe):
		c.Close(fe.err)
		c.readUntilClose()
	default:
		c.log.Debug("connection lost", "err", err)
		c.mu.Lock()
		c.teardownLocked(fmt.Errorf("amqp: connection lost: %w", err))
		c.mu.Unlock()
		c.flushEvents()
	}
}

// readUntilClose discards frames until the peer's close, an error, or the
// grace period's deadline.
func (c *Conn) readUntilClose() {
	for {
		h, f, err := c.rd.next(c.cfg.MaxFrameSize)
		if err != nil {
			return
		}
		if h.Type != frames.TypeAMQP {
			continue
		}
		if body, err := c.dec.Decode(h, f); err == nil {
			if _, ok := body.(*frames.Close); ok {
				return
			}
		}
	}
}

// peerClosed answers the peer's close.
func (c *Conn) peerClosed(cl *frames.Close) {
	c.mu.Lock()
	if !c.closeSent {
		c.closeSent = true
		_ = c.w.frame(frames.TypeAMQP, 0, &frames.Close{})
	}
	c.teardownLocked(peerErr(cl.Error))
	c.mu.Unlock()
	c.flushEvents()
}

// finish runs after the read loop: the last callbacks, then the writer
// drains (bounded by the write timeout) and the socket closes.
func (c *Conn) finish() {
	c.mu.Lock()
	c.teardownLocked(errors.New("amqp: connection closed"))
	err := c.closeErr
	c.mu.Unlock()
	c.flushEvents()
	if c.accepted {
		c.h.Close(c, err)
	}
	c.w.close()
	c.w.wait()
}

// dispatch routes a frame on a channel.
func (c *Conn) dispatch(ch uint16, body frames.Body) {
	if b, ok := body.(*frames.Begin); ok {
		c.onBegin(ch, b)
		return
	}
	if _, ok := body.(*frames.Open); ok {
		c.Close(NewError(CondNotAllowed, "second open on an open connection"))
		return
	}
	c.mu.Lock()
	var s *Session
	if int(ch) < len(c.inChans) {
		s = c.inChans[ch]
	}
	c.mu.Unlock()
	if s == nil {
		c.Close(NewError(CondNotAllowed, "%s on channel %d, which has no session", frameName(body), ch))
		return
	}
	s.dispatch(body)
}

// frameName names a performative for error descriptions.
func frameName(body frames.Body) string {
	switch body.(type) {
	case *frames.Begin:
		return "begin"
	case *frames.Attach:
		return "attach"
	case *frames.Flow:
		return "flow"
	case *frames.Transfer:
		return "transfer"
	case *frames.Disposition:
		return "disposition"
	case *frames.Detach:
		return "detach"
	case *frames.End:
		return "end"
	case *frames.Open:
		return "open"
	}
	return fmt.Sprintf("%T", body)
}

// send encodes a frame on a channel; c.mu must be held so that frames leave
// in the order state changed. A frame that cannot be encoded (an
// application-supplied field of an unsupported type) would leave the peer
// waiting for it, so it closes the connection with amqp:internal-error.
func (c *Conn) send(ch uint16, body frames.Body) error {
	err := c.w.frame(frames.TypeAMQP, ch, body)
	if err == nil {
		return nil
	}
	var ee *encodeError // errors.As takes its address: declared only on failure, where it may escape
	if errors.As(err, &ee) {
		c.log.Error("cannot encode frame", "frame", frameName(body), "err", ee.err)
		c.closeLocked(NewError(CondInternalError, "cannot encode the %s frame: %v", frameName(body), ee.err))
	}
	return err
}

// event is a callback due after a teardown, run outside c.mu.
type event struct {
	kind eventKind
	snd  *Sender
	rcv  *Receiver
	sess *Session
	o    Outcome
	err  error
}

type eventKind uint8

const (
	evOutcome eventKind = iota
	evSenderDetach
	evReceiverDetach
	evEnd
)

// flushEvents runs the queued callbacks. Call it without c.mu held.
func (c *Conn) flushEvents() {
	for {
		c.mu.Lock()
		evs := c.events
		c.events = nil
		c.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		for _, e := range evs {
			switch e.kind {
			case evOutcome:
				e.snd.h.Outcome(e.snd, e.o)
			case evSenderDetach:
				e.snd.h.Detach(e.snd, e.err)
			case evReceiverDetach:
				e.rcv.h.Detach(e.rcv, e.err)
			case evEnd:
				c.h.End(e.sess, e.err)
			}
		}
	}
}
