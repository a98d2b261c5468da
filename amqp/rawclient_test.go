package amqp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// rawClient is a frame-level AMQP client for regression tests: it writes
// exactly the frames a test asks for and returns what the engine sends.
type rawClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

var (
	hdrAMQP = []byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	hdrSASL = []byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

func rawDial(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawClient{t: t, nc: nc, br: bufio.NewReaderSize(nc, 1<<16)}
}

// encodeFrame returns one encoded frame.
func encodeFrame(t testing.TB, typ uint8, ch uint16, body frames.Body) []byte {
	t.Helper()
	b, err := frames.Append(nil, typ, ch, body)
	if err != nil {
		t.Fatalf("encode %T: %v", body, err)
	}
	return b
}

func (c *rawClient) writeRaw(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawClient) write(ch uint16, body frames.Body) {
	c.t.Helper()
	c.writeRaw(encodeFrame(c.t, frames.TypeAMQP, ch, body))
}

// readHeader reads an 8-byte protocol header.
func (c *rawClient) readHeader() []byte {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	h := make([]byte, 8)
	if _, err := io.ReadFull(c.br, h); err != nil {
		c.t.Fatalf("read protocol header: %v", err)
	}
	return h
}

// next reads one frame (nil body for an empty frame), or returns the error.
func (c *rawClient) next(timeout time.Duration) (frames.Header, frames.Body, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	hb, err := c.br.Peek(frames.HeaderSize)
	if err != nil {
		return frames.Header{}, nil, err
	}
	h, err := frames.ParseHeader(hb)
	if err != nil {
		return h, nil, err
	}
	f := make([]byte, h.Size)
	if _, err := io.ReadFull(c.br, f); err != nil {
		return h, nil, err
	}
	body, err := frames.Decode(h, f)
	if t, ok := body.(*frames.Transfer); ok {
		t.Payload = bytes.Clone(t.Payload)
	}
	return h, body, err
}

// read returns the next non-empty frame.
func (c *rawClient) read() (frames.Header, frames.Body) {
	c.t.Helper()
	for {
		h, body, err := c.next(10 * time.Second)
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if body != nil {
			return h, body
		}
	}
}

// expect reads the next non-empty frame and asserts its type.
func expect[T frames.Body](c *rawClient) T {
	c.t.Helper()
	_, body := c.read()
	v, ok := body.(T)
	if !ok {
		var zero T
		c.t.Fatalf("got %T %+v, want %T", body, body, zero)
	}
	return v
}

// expectEOF asserts the engine closes the socket.
func (c *rawClient) expectEOF() {
	c.t.Helper()
	for {
		_, body, err := c.next(10 * time.Second)
		if err == io.EOF || isReset(err) {
			return
		}
		if err != nil {
			c.t.Fatalf("want EOF, got %v", err)
		}
		if body != nil {
			c.t.Fatalf("want EOF, got %T %+v", body, body)
		}
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return err != nil && errors.As(err, &ne)
}

// sasl performs an ANONYMOUS exchange.
func (c *rawClient) sasl() {
	c.t.Helper()
	c.writeRaw(hdrSASL)
	if h := c.readHeader(); !bytes.Equal(h, hdrSASL) {
		c.t.Fatalf("SASL header answered with %q", h)
	}
	c.saslMechs()
	c.writeRaw(encodeFrame(c.t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "ANONYMOUS"}))
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLOK {
		c.t.Fatalf("sasl outcome %d", o.Code)
	}
}

func (c *rawClient) saslMechs() []encoding.Symbol {
	c.t.Helper()
	return expect[*frames.SASLMechanisms](c).Mechanisms
}

// open performs SASL and the open exchange with the given open.
func (c *rawClient) open(o *frames.Open) *frames.Open {
	c.t.Helper()
	c.sasl()
	c.writeRaw(hdrAMQP)
	if h := c.readHeader(); !bytes.Equal(h, hdrAMQP) {
		c.t.Fatalf("AMQP header answered with %q", h)
	}
	if o == nil {
		o = &frames.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 100}
	}
	c.write(0, o)
	return expect[*frames.Open](c)
}

// begin begins a session on channel 0 and returns the engine's begin.
func (c *rawClient) begin(b *frames.Begin) *frames.Begin {
	c.t.Helper()
	if b == nil {
		b = &frames.Begin{NextOutgoingID: 0, IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 100}
	}
	c.write(0, b)
	return expect[*frames.Begin](c)
}

// attachSender attaches a sending link (the engine receives) to address.
func (c *rawClient) attachSender(handle uint32, address string, mod func(*frames.Attach)) *frames.Attach {
	c.t.Helper()
	a := &frames.Attach{Name: "snd-" + address, Handle: handle, Role: frames.RoleSender,
		SndSettleMode: frames.SenderSettleMixed, Source: &frames.Source{}, Target: &frames.Target{Address: address}}
	if mod != nil {
		mod(a)
	}
	c.write(0, a)
	return expect[*frames.Attach](c)
}

// attachReceiver attaches a receiving link (the engine sends) to address.
func (c *rawClient) attachReceiver(handle uint32, address string, mod func(*frames.Attach)) *frames.Attach {
	c.t.Helper()
	a := &frames.Attach{Name: "rcv-" + address, Handle: handle, Role: frames.RoleReceiver,
		SndSettleMode: frames.SenderSettleMixed, Source: &frames.Source{Address: address}, Target: &frames.Target{}}
	if mod != nil {
		mod(a)
	}
	c.write(0, a)
	return expect[*frames.Attach](c)
}

func u32(v uint32) *uint32 { return &v }

// serve runs srv on a loopback listener for the test's duration.
func serve(t testing.TB, srv *amqp.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		<-done
	})
	return l.Addr().String()
}
