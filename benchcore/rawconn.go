package benchcore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// This file is the transport of the raw client (--client raw): one TCP
// connection speaking AMQP 1.0 frames directly, with no client library in
// between. It does what a bench needs and nothing else: SASL PLAIN (or
// ANONYMOUS followed by a CBS put-token, see raw.go), one AMQP session per
// link, sender links that pipeline pre-encoded transfers up to the credit
// the broker grants, and receiver links that hand each body to the engine
// on the reader goroutine and settle deliveries in ranges.
//
// Concurrency: one reader goroutine decodes every incoming frame; one
// writer goroutine writes whatever frames have accumulated since its last
// write, so concurrent senders and the reader's settlements share system
// calls. All link and session state is guarded by rawConn.mu, which is also
// the lock of the output buffer: appending a frame and updating the state
// it implies (delivery ids, credit, windows) happen together.

const (
	// rawMaxFrame is the largest frame the raw client accepts.
	rawMaxFrame = 1 << 20
	// rawWindow is the session incoming window the raw client grants; it is
	// renewed with every link flow.
	rawWindow = 1 << 20
	// rawRing bounds a sender link's unsettled deliveries (a power of two).
	rawRing = 1 << 14
)

var (
	protoAMQP = []byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	protoSASL = []byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// rawAuth is how a raw connection authenticates.
type rawAuth struct {
	host      string // the AMQP host name (sasl-init and open)
	user, key string // SASL PLAIN's user name and password (the SAS rule and key)
}

// rawConn is one raw AMQP connection.
type rawConn struct {
	nc       net.Conn
	br       *bufio.Reader
	peerMax  uint32        // the broker's max-frame-size
	idle     time.Duration // the broker's idle timeout (0: none)
	mech     string        // the SASL mechanism used
	done     chan struct{} // closed when the connection fails or closes
	wake     chan struct{} // wakes the writer
	drained  chan struct{} // closed by the writer once the close frame is written
	writerWG sync.WaitGroup

	mu          sync.Mutex
	out         []byte // frames waiting for the writer
	closing     bool   // Close has queued the close frame
	err         error  // why the connection ended
	sessions    []*rawSession
	byRemote    map[uint16]*rawSession
	muted       bool           // deliveries are dropped: the consumer's Run has returned
	dec         frames.Decoder // the reader's alone
	attach      frames.Attach  // the reader's: the last attach (see readAttach)
	lastChannel uint16         // the channel of the frame readFrame returned
}

// dialRaw connects, runs SASL (PLAIN when the broker offers it, else
// ANONYMOUS) and the AMQP open, and starts the reader and writer.
func dialRaw(ctx context.Context, addr string, auth rawAuth) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 256<<10), done: make(chan struct{}),
		wake: make(chan struct{}, 1), drained: make(chan struct{}), byRemote: map[uint16]*rawSession{}}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if err := c.handshake(auth); err != nil {
		_ = nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	c.writerWG.Add(1)
	go c.writer()
	go c.reader()
	return c, nil
}

// handshake runs SASL and open synchronously, before the reader starts.
func (c *rawConn) handshake(auth rawAuth) error {
	if _, err := c.nc.Write(protoSASL); err != nil {
		return err
	}
	if err := c.expectProto(protoSASL); err != nil {
		return err
	}
	body, err := c.readFrame()
	if err != nil {
		return err
	}
	mechs, ok := body.(*frames.SASLMechanisms)
	if !ok {
		return fmt.Errorf("raw: expected sasl-mechanisms, got %T", body)
	}
	init := &frames.SASLInit{Mechanism: "ANONYMOUS", Hostname: auth.host}
	for _, m := range mechs.Mechanisms {
		if m == "PLAIN" && auth.user != "" {
			init.Mechanism = "PLAIN"
			init.InitialResponse = []byte("\x00" + auth.user + "\x00" + auth.key)
		}
	}
	c.mech = string(init.Mechanism)
	b, err := frames.Append(nil, frames.TypeSASL, 0, init)
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	if body, err = c.readFrame(); err != nil {
		return err
	}
	if o, ok := body.(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		return fmt.Errorf("raw: SASL %s refused: %+v", init.Mechanism, body)
	}
	// AMQP.
	b = append([]byte(nil), protoAMQP...)
	b, err = frames.Append(b, frames.TypeAMQP, 0, &frames.Open{ContainerID: fmt.Sprintf("busbar-bench-%08x", newRunID()),
		Hostname: auth.host, MaxFrameSize: rawMaxFrame, ChannelMax: 1023})
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	if err := c.expectProto(protoAMQP); err != nil {
		return err
	}
	if body, err = c.readFrame(); err != nil {
		return err
	}
	o, ok := body.(*frames.Open)
	if !ok {
		return fmt.Errorf("raw: expected open, got %T", body)
	}
	c.peerMax = o.MaxFrameSize
	if c.peerMax == 0 {
		c.peerMax = 1<<32 - 1
	}
	c.idle = time.Duration(o.IdleTimeout) * time.Millisecond
	return nil
}

func (c *rawConn) expectProto(want []byte) error {
	got := make([]byte, 8)
	if _, err := io.ReadFull(c.br, got); err != nil {
		return fmt.Errorf("raw: protocol header: %w", err)
	}
	if string(got) != string(want) {
		return fmt.Errorf("raw: broker answered protocol header %q, want %q", got, want)
	}
	return nil
}

// readFrame reads and decodes one frame, skipping heartbeats. The result
// is decoded with the connection's Decoder, or into the connection's own
// Attach (readAttach), so a *Transfer, *Flow, *Disposition or *Attach is
// valid only until the next call; payloads alias the read buffer until
// then.
func (c *rawConn) readFrame() (frames.Body, error) {
	for {
		hb, err := c.br.Peek(frames.HeaderSize)
		if err != nil {
			return nil, err
		}
		h, err := frames.ParseHeader(hb)
		if err != nil {
			return nil, err
		}
		if h.Size > rawMaxFrame {
			return nil, fmt.Errorf("raw: frame of %d bytes exceeds the %d announced", h.Size, rawMaxFrame)
		}
		var buf []byte
		if int(h.Size) <= c.br.Size() {
			if buf, err = c.br.Peek(int(h.Size)); err != nil {
				return nil, err
			}
		} else {
			buf = make([]byte, h.Size)
			if _, err := io.ReadFull(c.br, buf); err != nil {
				return nil, err
			}
		}
		var body frames.Body
		if h.Type == frames.TypeAMQP && readAttach(buf[int(h.DataOff)*4:], &c.attach) {
			body = &c.attach
		} else {
			body, err = c.dec.Decode(h, buf)
		}
		if int(h.Size) <= c.br.Size() {
			_, _ = c.br.Discard(int(h.Size))
		}
		if err != nil {
			return nil, err
		}
		if body == nil {
			continue // heartbeat
		}
		if h.Type == frames.TypeAMQP {
			c.lastChannel = h.Channel
		}
		return body, nil
	}
}

// readAttach decodes, when b holds an attach, the fields the raw client
// uses into a: name, handle, role, initial-delivery-count, and whether the
// source and target are present (as rawPresent placeholders). It skips
// the rest, which Busbar echoes from our attach (the session filter, the
// properties) and which the full decoder would allocate for every
// session. It reports false for any other frame, and for an attach it
// cannot read, which the full decoder then decodes or reports.
func readAttach(b []byte, a *frames.Attach) bool {
	d := encoding.NewDecoder(b)
	if code, sym, err := d.ReadDescriptor(); err != nil || sym != nil || code != frames.DescAttach {
		return false
	}
	f, n, err := d.ReadList()
	if err != nil || n < 3 {
		return false
	}
	*a = frames.Attach{}
	if a.Name, err = f.ReadString(); err != nil {
		return false
	}
	if a.Handle, err = f.ReadUint32(); err != nil {
		return false
	}
	role, err := f.ReadBool()
	if err != nil {
		return false
	}
	a.Role = frames.Role(role)
	const source, target, initialDeliveryCount = 5, 6, 9 // field numbers
	for i := 3; i < n && i <= initialDeliveryCount; i++ {
		if f.ReadNull() {
			continue
		}
		switch i {
		case source:
			a.Source = &rawPresent.source
		case target:
			a.Target = &rawPresent.target
		case initialDeliveryCount:
			if a.InitialDeliveryCount, err = f.ReadUint32(); err != nil {
				return false
			}
			continue
		}
		if f.Skip() != nil {
			return false
		}
	}
	return true
}

// rawPresent stands for the termini of an attach read by readAttach: only
// whether they are there matters. Never modified.
var rawPresent struct {
	source frames.Source
	target frames.Target
}

// fail ends the connection with err (the first error wins).
func (c *rawConn) fail(err error) {
	c.mu.Lock()
	c.failLocked(err)
	c.mu.Unlock()
}

func (c *rawConn) failLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	_ = c.nc.Close()
}

// failure returns why the connection ended.
func (c *rawConn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close sends a close frame, waits briefly for it to leave and closes.
func (c *rawConn) Close() error {
	c.mu.Lock()
	if c.err == nil && !c.closing {
		c.closing = true
		c.appendLocked(0, &frames.Close{})
	}
	c.mu.Unlock()
	c.flush()
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-c.drained:
	case <-c.done:
	case <-t.C:
	}
	c.mu.Lock()
	c.failLocked(net.ErrClosed)
	c.mu.Unlock()
	c.writerWG.Wait()
	return nil
}

// appendLocked appends one performative to the output buffer.
func (c *rawConn) appendLocked(ch uint16, body frames.Body) {
	var err error
	c.out, err = frames.Append(c.out, frames.TypeAMQP, ch, body)
	if err != nil {
		c.failLocked(fmt.Errorf("raw: encode %T: %w", body, err))
	}
}

// flush wakes the writer.
func (c *rawConn) flush() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writer writes the output buffer whenever woken, with a heartbeat when
// the broker asked for one.
func (c *rawConn) writer() {
	defer c.writerWG.Done()
	var spare []byte
	var beat <-chan time.Time
	if c.idle > 0 {
		t := time.NewTicker(c.idle / 3)
		defer t.Stop()
		beat = t.C
	}
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-beat:
			c.mu.Lock()
			c.out = append(c.out, 0, 0, 0, 8, 2, 0, 0, 0) // an empty frame
			c.mu.Unlock()
		}
		// Let the goroutines this write's trigger woke (senders given
		// credit, the reader's settlements) add their frames first: one
		// system call carries them all.
		runtime.Gosched()
		c.mu.Lock()
		buf := c.out
		c.out = spare[:0]
		c.mu.Unlock()
		if len(buf) > 0 {
			if _, err := c.nc.Write(buf); err != nil {
				c.fail(fmt.Errorf("raw: write: %w", err))
				return
			}
		}
		spare = buf
		c.mu.Lock()
		fin := c.closing && len(c.out) == 0
		c.mu.Unlock()
		if fin {
			close(c.drained) // the close frame is out
			return
		}
	}
}

// reader decodes incoming frames until the connection ends. Before it
// blocks on the socket it flushes the settlements and flows its frames
// caused, so that one disposition covers everything that arrived together.
func (c *rawConn) reader() {
	for {
		if c.br.Buffered() == 0 {
			c.mu.Lock()
			for _, s := range c.sessions {
				if s != nil && s.link != nil {
					s.link.flushSettlementsLocked()
				}
			}
			// Wake the writer only with something to write: a wake-up for
			// nothing costs goroutine switches at every read.
			queued := len(c.out) > 0
			c.mu.Unlock()
			if queued {
				c.flush()
			}
		}
		body, err := c.readFrame()
		if err != nil {
			c.fail(fmt.Errorf("raw: read: %w", err))
			return
		}
		ch := c.lastChannel
		c.mu.Lock()
		err = c.handleLocked(ch, body)
		if err != nil {
			c.failLocked(err)
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// handleLocked applies one incoming frame.
func (c *rawConn) handleLocked(ch uint16, body frames.Body) error {
	switch f := body.(type) {
	case *frames.Begin:
		if f.RemoteChannel == nil || int(*f.RemoteChannel) >= len(c.sessions) || c.sessions[*f.RemoteChannel] == nil {
			return errors.New("raw: begin for a session never started")
		}
		s := c.sessions[*f.RemoteChannel]
		s.remoteCh = ch
		s.remoteIncoming = f.IncomingWindow
		c.byRemote[ch] = s
		close(s.begun)
		return nil
	case *frames.Close:
		if f.Error != nil {
			return fmt.Errorf("raw: broker closed the connection: %s: %s", f.Error.Condition, f.Error.Description)
		}
		return errors.New("raw: broker closed the connection")
	}
	s := c.byRemote[ch]
	if s == nil {
		return fmt.Errorf("raw: %T on unknown channel %d", body, ch)
	}
	switch f := body.(type) {
	case *frames.End:
		if f.Error != nil {
			return fmt.Errorf("raw: broker ended a session: %s: %s", f.Error.Condition, f.Error.Description)
		}
		return errors.New("raw: broker ended a session")
	case *frames.Attach:
		return s.onAttach(f)
	case *frames.Detach:
		return s.onDetach(f)
	case *frames.Flow:
		return s.onFlow(f)
	case *frames.Transfer:
		return s.onTransfer(f)
	case *frames.Disposition:
		return s.onDisposition(f)
	}
	return fmt.Errorf("raw: unexpected %T", body)
}

// rawSession is one AMQP session carrying at most one link at a time
// (handle 0), plus, on the authorization session, the CBS pair.
type rawSession struct {
	c        *rawConn
	ch       uint16 // ours
	remoteCh uint16
	begun    chan struct{}

	nextOutgoing   uint32 // our next transfer id
	remoteIncoming uint32 // transfers the broker will still take
	nextIncoming   uint32 // the broker's next transfer id

	link *rawLink // the link on handle 0
	cbs  *rawCBS  // the CBS exchange (handles 1 and 2), if any

	// A consumer's session goroutine's: its reused timer (which the
	// reader also resets, at the broker's attach: rawLink.onAttach) and
	// its receivers' attach frame (see rawConsumer.oneSession and
	// sessionAttach).
	idle        *time.Timer
	attachFrame []byte
	nameAt      [2]int // where the counter ending the link name lies in attachFrame
	nameLen     int
	links       uint32 // receivers attached
}

// beginSession starts a session and waits for the broker's begin.
func (c *rawConn) beginSession(ctx context.Context) (*rawSession, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	s := &rawSession{c: c, ch: uint16(len(c.sessions)), begun: make(chan struct{})}
	c.sessions = append(c.sessions, s)
	c.appendLocked(s.ch, &frames.Begin{NextOutgoingID: 0, IncomingWindow: rawWindow, OutgoingWindow: rawWindow, HandleMax: 7})
	c.mu.Unlock()
	c.flush()
	if err := c.wait(ctx, s.begun); err != nil {
		return nil, err
	}
	return s, nil
}

// linkOf returns the session's handle-0 link if the broker's handle h
// belongs to it.
func (s *rawSession) linkOf(h uint32) *rawLink {
	if l := s.link; l != nil && l.remoteOK && l.remote == h {
		return l
	}
	return nil
}

func (s *rawSession) onAttach(f *frames.Attach) error {
	if l := s.link; l != nil && f.Name == l.name {
		l.remote, l.remoteOK = f.Handle, true
		return l.onAttach(f)
	}
	if s.cbs != nil {
		return s.cbs.onAttach(f)
	}
	return fmt.Errorf("raw: attach of unknown link %q", f.Name)
}

func (s *rawSession) onDetach(f *frames.Detach) error {
	if l := s.linkOf(f.Handle); l != nil {
		return l.onDetach(f)
	}
	if s.cbs != nil {
		return s.cbs.onDetach(f)
	}
	return nil // a link already forgotten
}

func (s *rawSession) onFlow(f *frames.Flow) error {
	next := uint32(0)
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	s.remoteIncoming = next + f.IncomingWindow - s.nextOutgoing
	if f.Handle == nil {
		if s.link != nil && s.link.sender {
			s.link.wakeSenders()
		}
		return nil
	}
	if l := s.linkOf(*f.Handle); l != nil {
		l.onFlow(f)
	} else if s.cbs != nil {
		s.cbs.onFlow(f)
	}
	return nil
}

func (s *rawSession) onTransfer(f *frames.Transfer) error {
	if f.DeliveryID != nil {
		s.nextIncoming = *f.DeliveryID + 1
	}
	if l := s.linkOf(f.Handle); l != nil && !l.sender {
		return l.onTransfer(f)
	}
	if s.cbs != nil {
		return s.cbs.onTransfer(f)
	}
	return nil // a delivery for a link already detached: dropped, its lock expires
}

func (s *rawSession) onDisposition(f *frames.Disposition) error {
	if s.cbs != nil {
		return nil // the put-token's acceptance: the reply carries the verdict
	}
	if s.link == nil {
		return nil // a late answer for a link already gone
	}
	last := f.First
	if f.Last != nil {
		last = *f.Last
	}
	return s.link.onDisposition(f.Role, f.First, last, f.Settled, f.State)
}

// frameError formats an AMQP error for a Go error.
func frameError(e *frames.Error) string {
	if e == nil {
		return "no error"
	}
	return string(e.Condition) + ": " + e.Description
}
