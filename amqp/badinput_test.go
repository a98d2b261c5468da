package amqp_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// Each case opens a connection (and, when begin is set, a session with a
// sending link on handle 0 holding 500 credit), writes bad input, and
// expects the engine's answer: a close, an end or a detach with a condition.
func TestRawBadInput(t *testing.T) {
	b := startBroker(t, amqp.Config{ChannelMax: 3, HandleMax: 7, SessionWindow: 2})
	b.SetManualCredit("manual", 1)
	type want struct {
		close, end, detach encoding.Symbol
	}
	cases := []struct {
		name  string
		begin bool
		send  func(t *testing.T, c *rawClient)
		want  want
	}{
		{"garbage performative", false, func(t *testing.T, c *rawClient) {
			c.writeRaw([]byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x10, 0xff})
		}, want{close: amqp.CondDecodeError}},
		{"frame over max-frame-size", false, func(t *testing.T, c *rawClient) {
			c.writeRaw([]byte{0, 2, 0, 0, 2, 0, 0, 0}) // 131,072 bytes declared
		}, want{close: amqp.CondFramingError}},
		{"frame size below header", false, func(t *testing.T, c *rawClient) {
			c.writeRaw([]byte{0, 0, 0, 4, 2, 0, 0, 0})
		}, want{close: amqp.CondFramingError}},
		{"SASL frame after open", false, func(t *testing.T, c *rawClient) {
			c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "PLAIN"}))
		}, want{close: amqp.CondFramingError}},
		{"second open", false, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Open{ContainerID: "again"})
		}, want{close: amqp.CondNotAllowed}},
		{"channel above channel-max", false, func(t *testing.T, c *rawClient) {
			c.write(9, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1})
		}, want{close: amqp.CondFramingError}},
		{"frame on a channel without session", false, func(t *testing.T, c *rawClient) {
			c.write(2, &frames.Flow{IncomingWindow: 1})
		}, want{close: amqp.CondNotAllowed}},
		{"begin twice on a channel", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1})
		}, want{close: amqp.CondNotAllowed}},
		{"attach handle above handle-max", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Attach{Name: "h", Handle: 8, Role: frames.RoleSender, Target: &frames.Target{Address: "q"}})
		}, want{close: amqp.CondFramingError}},
		{"attach handle in use", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Attach{Name: "h2", Handle: 0, Role: frames.RoleSender, Target: &frames.Target{Address: "q"}})
		}, want{end: amqp.CondHandleInUse}},
		{"transfer on unattached handle", true, func(t *testing.T, c *rawClient) {
			c.write(0, transfer(5, 0, true, nil))
		}, want{end: amqp.CondUnattachedHandle}},
		{"flow on unattached handle", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 1, Handle: u32(4), LinkCredit: u32(1)})
		}, want{end: amqp.CondUnattachedHandle}},
		{"detach on unattached handle", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Detach{Handle: 6, Closed: true})
		}, want{end: amqp.CondUnattachedHandle}},
		{"window violation", true, func(t *testing.T, c *rawClient) {
			// The session window is 2: five transfers in one burst overrun
			// it (the engine renews windows only between read batches).
			var all []byte
			for i := range uint32(5) {
				all = append(all, encodeFrame(t, frames.TypeAMQP, 0, transfer(0, i, true, nil))...)
			}
			c.writeRaw(all)
		}, want{end: amqp.CondWindowViolation}},
		{"first transfer without delivery-id", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Transfer{Handle: 0, Payload: []byte("x")})
		}, want{end: amqp.CondInvalidField}},
		{"flow acknowledging frames never sent", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Flow{NextIncomingID: u32(99), IncomingWindow: 1})
		}, want{end: amqp.CondInvalidField}},
		{"disposition range reversed", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Disposition{Role: frames.RoleReceiver, First: 9, Last: u32(3), Settled: true})
		}, want{end: amqp.CondInvalidField}},
		{"transfer beyond credit", true, func(t *testing.T, c *rawClient) {
			c.write(0, &frames.Attach{Name: "manual", Handle: 1, Role: frames.RoleSender, Target: &frames.Target{Address: "manual"}})
			expect[*frames.Attach](c)
			if f := expect[*frames.Flow](c); *f.LinkCredit != 1 {
				t.Fatalf("manual credit %d, want 1", *f.LinkCredit)
			}
			c.write(0, transfer(1, 0, true, nil))
			waitSessionFlow(t, c) // the window of 2 is renewed
			c.write(0, transfer(1, 1, true, nil))
		}, want{detach: amqp.CondTransferLimitExceeded}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, b.Addr)
			c.open(&frames.Open{ContainerID: "bad", MaxFrameSize: 65536, ChannelMax: 100})
			if tc.begin {
				c.begin(nil)
				c.attachSender(0, "q", nil)
				expect[*frames.Flow](c)
			}
			tc.send(t, c)
			switch {
			case tc.want.close != "":
				expectClose(t, c, tc.want.close)
				c.write(0, &frames.Close{})
				c.expectEOF()
			case tc.want.end != "":
				for {
					_, body := c.read()
					if e, ok := body.(*frames.End); ok {
						if e.Error == nil || e.Error.Condition != tc.want.end || e.Error.Description == "" {
							t.Fatalf("end error %+v, want %s with a description", e.Error, tc.want.end)
						}
						break
					}
				}
			default:
				for {
					_, body := c.read()
					if d, ok := body.(*frames.Detach); ok {
						if d.Error == nil || d.Error.Condition != tc.want.detach || d.Error.Description == "" {
							t.Fatalf("detach error %+v, want %s", d.Error, tc.want.detach)
						}
						break
					}
				}
			}
		})
	}
}

// waitSessionFlow consumes frames until a flow renews the session window.
func waitSessionFlow(t *testing.T, c *rawClient) {
	t.Helper()
	for {
		_, body := c.read()
		switch body.(type) {
		case *frames.Flow:
			return
		case *frames.Detach:
			t.Fatalf("detached early: %+v", body)
		}
	}
}

func TestRawFirstFrameNotOpen(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.sasl()
	c.writeRaw(hdrAMQP)
	c.readHeader()
	c.write(0, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1})
	expect[*frames.Open](c)
	expectClose(t, c, amqp.CondNotAllowed)
}

func TestRawPreOpenFrameLimit(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.sasl()
	c.writeRaw(hdrAMQP)
	c.readHeader()
	// An open padded past 512 bytes, before the limits are negotiated.
	c.write(0, &frames.Open{ContainerID: string(bytes.Repeat([]byte("x"), 600))})
	expect[*frames.Open](c)
	expectClose(t, c, amqp.CondFramingError)
}

func TestRawSilentPeerTimesOut(t *testing.T) {
	b := startBroker(t, amqp.Config{IdleTimeout: 300 * time.Millisecond})
	c := rawDial(t, b.Addr)
	if o := c.open(nil); o.IdleTimeout != 300 {
		t.Fatalf("open.idle-time-out = %d", o.IdleTimeout)
	}
	start := time.Now()
	cl := expectClose(t, c, amqp.CondResourceLimitExceeded)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("closed after %v, before the advertised 300ms: %v", el, cl)
	}
}

func TestRawHeartbeatsFollowPeerTimeout(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(&frames.Open{ContainerID: "hb", MaxFrameSize: 65536, IdleTimeout: 200})
	// Expect empty frames, at most 100ms apart (half of 200ms) on an idle
	// machine; allow slack for a loaded one, but require several.
	empties := 0
	deadline := time.Now().Add(3 * time.Second)
	for empties < 5 {
		_, body, err := c.next(time.Until(deadline))
		if err != nil {
			t.Fatalf("after %d empty frames: %v", empties, err)
		}
		if body != nil {
			t.Fatalf("unexpected %T", body)
		}
		empties++
	}
}

func TestRawNoHeartbeatsForZeroTimeout(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(&frames.Open{ContainerID: "quiet", MaxFrameSize: 65536})
	// Nothing may arrive: wait well past any heartbeat interval the
	// engine could pick.
	_, body, err := c.next(500 * time.Millisecond)
	if err == nil {
		t.Fatalf("peer advertising no idle timeout got %T", body)
	}
}

// identityHandler records identities and refuses attaches.
type identityHandler struct {
	amqp.BaseHandler
	mu  sync.Mutex
	ids []any
}

func (h *identityHandler) Open(c *amqp.Conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, c.Identity())
	return nil
}

func (h *identityHandler) AttachSender(*amqp.Sender) (amqp.SenderHandler, error) {
	return nil, amqp.NewError(amqp.CondNotFound, "nothing here")
}

func (h *identityHandler) AttachReceiver(*amqp.Receiver) (amqp.ReceiverHandler, error) {
	return nil, errors.New("boom")
}

func TestRawSASLPlain(t *testing.T) {
	h := &identityHandler{}
	srv := amqp.NewServer(amqp.Config{Handler: h, Authenticate: func(cr *amqp.Credentials) (any, error) {
		if cr.Mechanism == amqp.MechPlain && cr.Username == "alice" && cr.Password == "secret" && cr.AuthzID == "" {
			return "user:alice", nil
		}
		return nil, errors.New("bad credentials")
	}})
	addr := serve(t, srv)

	c := rawDial(t, addr)
	c.writeRaw(hdrSASL)
	c.readHeader()
	c.saslMechs()
	c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00alice\x00wrong")}))
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLAuth {
		t.Fatalf("wrong password: outcome %d", o.Code)
	}
	c.expectEOF()

	c = rawDial(t, addr)
	c.writeRaw(hdrSASL)
	c.readHeader()
	c.saslMechs()
	c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "EXTERNAL"}))
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLAuth {
		t.Fatalf("mechanism not offered: outcome %d", o.Code)
	}

	c = rawDial(t, addr)
	c.writeRaw(hdrSASL)
	c.readHeader()
	c.saslMechs()
	c.writeRaw(encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00alice\x00secret")}))
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLOK {
		t.Fatalf("good password: outcome %d", o.Code)
	}
	c.writeRaw(hdrAMQP)
	c.readHeader()
	c.write(0, &frames.Open{ContainerID: "a"})
	expect[*frames.Open](c)
	h.mu.Lock()
	if len(h.ids) != 1 || h.ids[0] != "user:alice" {
		t.Fatalf("identities %v", h.ids)
	}
	h.mu.Unlock()

	// Refused links: attach with a null terminus, then detach with the error.
	c.begin(nil)
	at := c.attachReceiver(0, "x", nil)
	if at.Source != nil {
		t.Fatalf("refused link's reply has source %+v", at.Source)
	}
	d := expect[*frames.Detach](c)
	if !d.Closed || d.Error == nil || d.Error.Condition != amqp.CondNotFound || d.Error.Description != "nothing here" {
		t.Fatalf("detach %+v", d)
	}
	at = c.attachSender(1, "y", nil)
	if at.Target != nil {
		t.Fatalf("refused link's reply has target %+v", at.Target)
	}
	d = expect[*frames.Detach](c)
	if d.Error == nil || d.Error.Condition != amqp.CondInternalError || d.Error.Description != "boom" {
		t.Fatalf("detach %+v", d)
	}
}

// holder accepts links and never settles what arrives.
type holder struct{ amqp.BaseHandler }

func (holder) AttachSender(*amqp.Sender) (amqp.SenderHandler, error) {
	return nil, amqp.NewError(amqp.CondNotImplemented, "receive only")
}
func (h holder) AttachReceiver(*amqp.Receiver) (amqp.ReceiverHandler, error) { return h, nil }
func (holder) Transfer(*amqp.Receiver, amqp.Delivery)                        {}
func (holder) Detach(*amqp.Receiver, error)                                  {}

func TestRawDuplicateUnsettledDeliveryID(t *testing.T) {
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: holder{}}))
	c := rawDial(t, addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "hold", nil)
	expect[*frames.Flow](c)
	c.write(0, transfer(0, 7, false, []byte("a")))
	c.write(0, transfer(0, 7, false, []byte("b")))
	e := expect[*frames.End](c)
	if e.Error == nil || e.Error.Condition != amqp.CondInvalidField || !strings.Contains(e.Error.Description, "delivery-id 7") {
		t.Fatalf("end %+v", e.Error)
	}
}
