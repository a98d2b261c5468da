package amqp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// connState is how far a hostile client gets before it misbehaves.
type connState int

const (
	stSASL     connState = iota // SASL header exchanged, mechanisms received
	stSASLDone                  // SASL outcome ok, no AMQP header yet
	stHeader                    // AMQP headers exchanged, no open yet
	stOpen                      // open exchanged
	stBegin                     // a session on channel 0
	stAttach                    // a sending link on handle 0 with credit
)

var stateNames = [...]string{"before-sasl-init", "after-sasl", "before-open", "after-open", "after-begin", "after-attach"}

// hostileTimeout is the handshake and idle timeout of the hostile tests'
// broker: a truncated frame is noticed after this long.
const hostileTimeout = 500 * time.Millisecond

// reach brings a raw client to a state.
func (c *rawClient) reach(s connState) {
	c.t.Helper()
	c.writeRaw(hdrSASL)
	c.readHeader()
	c.saslMechs()
	if s == stSASL {
		return
	}
	c.writeRaw(encodeFrame(c.t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "ANONYMOUS"}))
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLOK {
		c.t.Fatalf("sasl outcome %d", o.Code)
	}
	if s == stSASLDone {
		return
	}
	c.writeRaw(hdrAMQP)
	c.readHeader()
	if s == stHeader {
		return
	}
	c.write(0, &frames.Open{ContainerID: "hostile", MaxFrameSize: 65536, ChannelMax: 100, IdleTimeout: 60000})
	expect[*frames.Open](c)
	if s == stOpen {
		return
	}
	c.begin(nil)
	if s == stBegin {
		return
	}
	c.attachSender(0, "hostile", nil)
	expect[*frames.Flow](c)
}

// answer is what the engine must do about a hostile input.
type answer struct {
	header     bool             // reply with the AMQP protocol header first
	saslCode   *frames.SASLCode // a sasl-outcome with this code
	open       bool             // an open first (the connection was not open yet)
	close, end encoding.Symbol  // a close or an end with this condition
}

func saslCode(c frames.SASLCode) *frames.SASLCode { return &c }

// check reads the engine's answer, then asserts the socket is closed (a
// close or a refused handshake) or the connection is still usable (an end).
func (a answer) check(t *testing.T, c *rawClient) {
	t.Helper()
	if a.header {
		if h := c.readHeader(); !bytes.Equal(h, hdrAMQP) {
			t.Fatalf("protocol header %q, want AMQP 0 1 0 0", h)
		}
	}
	if a.saslCode != nil {
		if o := expect[*frames.SASLOutcome](c); o.Code != *a.saslCode {
			t.Fatalf("sasl outcome %d, want %d", o.Code, *a.saslCode)
		}
	}
	if a.open {
		expect[*frames.Open](c)
	}
	switch {
	case a.close != "":
		expectClose(t, c, a.close)
		c.write(0, &frames.Close{})
	case a.end != "":
		e := expect[*frames.End](c)
		if e.Error == nil || e.Error.Condition != a.end || e.Error.Description == "" {
			t.Fatalf("end %+v, want %s with a description", e.Error, a.end)
		}
		// The connection survives an end: a new session works.
		c.write(1, &frames.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		if b := expect[*frames.Begin](c); b.RemoteChannel == nil || *b.RemoteChannel != 1 {
			t.Fatalf("begin after end: %+v", b)
		}
		return
	}
	c.expectEOF()
}

// garbage is a frame whose performative does not decode (descriptor 0x10,
// open, followed by a reserved constructor).
var garbage = []byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x10, 0xff}

// truncated declares a 64-byte frame and sends 20 bytes of it.
var truncated = append([]byte{0, 0, 0, 64, 2, 0, 0, 0}, bytes.Repeat([]byte{0x40}, 12)...)

// oversized declares a frame of 1 MiB, beyond every frame-size limit.
var oversized = []byte{0, 0x10, 0, 0, 2, 0, 0, 0}

// hostileCase is one input sent in one state and the answer it must get.
type hostileCase struct {
	state connState
	kind  string // malformed, truncated, oversized, out-of-order
	send  func(t *testing.T, c *rawClient)
	want  answer
}

func hostileCases() []hostileCase {
	raw := func(b []byte) func(*testing.T, *rawClient) {
		return func(_ *testing.T, c *rawClient) { c.writeRaw(b) }
	}
	saslGarbage := append([]byte(nil), garbage...)
	saslGarbage[5] = frames.TypeSASL
	idle := answer{close: amqp.CondResourceLimitExceeded}
	return []hostileCase{
		{stSASL, "malformed", raw(saslGarbage), answer{saslCode: saslCode(frames.SASLSysPerm)}},
		{stSASL, "truncated", raw(truncated), answer{}},
		{stSASL, "oversized", raw(oversized), answer{}},
		{stSASL, "out-of-order", func(t *testing.T, c *rawClient) { // an AMQP frame instead of sasl-init
			c.write(0, &frames.Open{ContainerID: "early"})
		}, answer{}},
		{stSASL, "out-of-order", func(t *testing.T, c *rawClient) { // the server's own performative
			c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLOutcome{Code: frames.SASLOK}))
		}, answer{saslCode: saslCode(frames.SASLSysPerm)}},
		{stSASL, "out-of-order", func(t *testing.T, c *rawClient) { // a mechanism not offered
			c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "EXTERNAL"}))
		}, answer{saslCode: saslCode(frames.SASLAuth)}},
		{stSASLDone, "malformed", raw([]byte("GET / HTTP/1.1\r\n\r\n")), answer{header: true}},
		{stSASLDone, "truncated", raw([]byte("AMQP")), answer{}},
		{stSASLDone, "out-of-order", raw(hdrSASL), answer{header: true}},
		{stHeader, "malformed", raw(garbage), answer{open: true, close: amqp.CondDecodeError}},
		{stHeader, "truncated", raw(truncated), answer{}},
		{stHeader, "oversized", raw(oversized), answer{open: true, close: amqp.CondFramingError}},
		{stHeader, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1})
		}, answer{open: true, close: amqp.CondNotAllowed}},
		{stOpen, "malformed", raw(garbage), answer{close: amqp.CondDecodeError}},
		{stOpen, "truncated", raw(truncated), idle},
		{stOpen, "oversized", raw(oversized), answer{close: amqp.CondFramingError}},
		{stOpen, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Attach{Name: "x", Role: frames.RoleSender, Target: &frames.Target{Address: "q"}})
		}, answer{close: amqp.CondNotAllowed}},
		{stOpen, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Open{ContainerID: "again"})
		}, answer{close: amqp.CondNotAllowed}},
		{stBegin, "malformed", raw(garbage), answer{close: amqp.CondDecodeError}},
		{stBegin, "truncated", raw(truncated), idle},
		{stBegin, "oversized", raw(oversized), answer{close: amqp.CondFramingError}},
		{stBegin, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, transfer(3, 0, true, []byte("x")))
		}, answer{end: amqp.CondUnattachedHandle}},
		{stBegin, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1})
		}, answer{close: amqp.CondNotAllowed}},
		{stAttach, "malformed", raw([]byte{0, 0, 0, 15, 2, 0, 0, 0, 0x00, 0x53, 0x14, 0xc0, 0x02, 0x01, 0xff}), answer{close: amqp.CondDecodeError}},
		{stAttach, "truncated", raw(truncated), idle},
		{stAttach, "oversized", raw(oversized), answer{close: amqp.CondFramingError}},
		{stAttach, "out-of-order", func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Attach{Name: "again", Handle: 0, Role: frames.RoleSender, Target: &frames.Target{Address: "q"}})
		}, answer{end: amqp.CondHandleInUse}},
		{stAttach, "out-of-order", func(t *testing.T, c *rawClient) { // a continuation with no delivery begun
			c.write(0, &frames.Transfer{Handle: 0, More: true, Payload: []byte("x")})
		}, answer{end: amqp.CondInvalidField}},
	}
}

// recording wraps a raw client's reads so a test sees every byte the
// engine sent on the connection.
func recording(c *rawClient) *bytes.Buffer {
	var buf bytes.Buffer
	c.br = bufio.NewReaderSize(io.TeeReader(c.nc, &buf), 1<<16)
	return &buf
}

// TestRawHostileInputEveryState sends malformed, truncated, oversized and
// out-of-order frames at every state of a connection and checks each
// answer, while a well-behaved client exchanges messages with a secret
// in them: it must keep working, and no hostile connection may ever
// receive a byte of its messages.
func TestRawHostileInputEveryState(t *testing.T) {
	b := startBroker(t, amqp.Config{HandshakeTimeout: hostileTimeout, IdleTimeout: hostileTimeout, MaxFrameSize: 4096})
	const secret = "SECRET-7f3a9c"
	stop := make(chan struct{})
	bystander := runBystander(t, b.URL(), secret, stop)

	var mu sync.Mutex
	var received []*bytes.Buffer
	t.Run("cases", func(t *testing.T) {
		for i, hc := range hostileCases() {
			t.Run(fmt.Sprintf("%02d-%s-%s", i, stateNames[hc.state], hc.kind), func(t *testing.T) {
				t.Parallel()
				c := rawDial(t, b.Addr)
				buf := recording(c)
				c.reach(hc.state)
				hc.send(t, c)
				hc.want.check(t, c)
				mu.Lock()
				received = append(received, buf)
				mu.Unlock()
			})
		}
	})
	close(stop)
	n, err := bystander()
	if err != nil {
		t.Fatalf("the well-behaved client failed: %v", err)
	}
	if n == 0 {
		t.Fatal("the well-behaved client exchanged no message")
	}
	for _, buf := range received {
		if bytes.Contains(buf.Bytes(), []byte(secret)) {
			t.Fatal("a hostile connection received another connection's message")
		}
	}
	if leaked := b.Len("hostile"); leaked != 0 {
		t.Fatalf("%d hostile deliveries were queued", leaked)
	}
}

// runBystander sends and receives messages carrying secret on its own
// address until stop is closed; the returned function waits for it and
// reports how many round trips it made.
func runBystander(t *testing.T, url, secret string, stop <-chan struct{}) func() (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	conn, err := goamqp.Dial(ctx, url, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sess.NewSender(ctx, "bystander", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "bystander", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- result{n, nil}
				return
			default:
			}
			body := fmt.Sprintf("%s-%d", secret, n)
			if err := snd.Send(ctx, goamqp.NewMessage([]byte(body)), nil); err != nil {
				done <- result{n, err}
				return
			}
			m, err := rcv.Receive(ctx, nil)
			if err != nil {
				done <- result{n, err}
				return
			}
			if got := string(m.GetData()); !strings.HasPrefix(got, body) {
				done <- result{n, fmt.Errorf("received %q, want %q", got, body)}
				return
			}
			if err := rcv.AcceptMessage(ctx, m); err != nil {
				done <- result{n, err}
				return
			}
			n++
		}
	}()
	return func() (int, error) {
		r := <-done
		_ = conn.Close()
		cancel()
		return r.n, r.err
	}
}
