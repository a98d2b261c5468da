package amqp_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

func TestRawWrongProtocolHeader(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	for _, hdr := range [][]byte{[]byte("AMQP\x02\x01\x00\x00"), []byte("HTTP/1.1"), hdrAMQP} {
		c := rawDial(t, b.Addr)
		c.writeRaw(hdr)
		if got := c.readHeader(); !bytes.Equal(got, hdrSASL) {
			t.Errorf("header %q answered with %q, want the SASL header", hdr, got)
		}
		c.expectEOF()
	}
}

func TestRawNoSASLAllowed(t *testing.T) {
	b := startBroker(t, amqp.Config{AllowNoSASL: true})
	c := rawDial(t, b.Addr)
	c.writeRaw(hdrAMQP)
	if got := c.readHeader(); !bytes.Equal(got, hdrAMQP) {
		t.Fatalf("got %q", got)
	}
	c.write(0, &frames.Open{ContainerID: "x"})
	if o := expect[*frames.Open](c); o.MaxFrameSize != 65536 {
		t.Fatalf("open.max-frame-size = %d", o.MaxFrameSize)
	}
}

func TestRawPipelinedHandshake(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	// Everything up to the attach in one write, before any reply.
	var all []byte
	all = append(all, hdrSASL...)
	all = append(all, encodeFrame(t, frames.TypeSASL, 0, &frames.SASLInit{Mechanism: "MSSBCBS"})...)
	all = append(all, hdrAMQP...)
	all = append(all, encodeFrame(t, frames.TypeAMQP, 0, &frames.Open{ContainerID: "p", MaxFrameSize: 512})...)
	all = append(all, encodeFrame(t, frames.TypeAMQP, 0, &frames.Begin{IncomingWindow: 10, OutgoingWindow: 10, HandleMax: 7})...)
	all = append(all, encodeFrame(t, frames.TypeAMQP, 0, &frames.Attach{Name: "l", Role: frames.RoleSender,
		Target: &frames.Target{Address: "pipe"}, SndSettleMode: frames.SenderSettleMixed})...)
	c.writeRaw(all)
	if h := c.readHeader(); !bytes.Equal(h, hdrSASL) {
		t.Fatalf("header %q", h)
	}
	mechs := c.saslMechs()
	if fmt.Sprint(mechs) != "[ANONYMOUS PLAIN MSSBCBS]" {
		t.Errorf("mechanisms %v", mechs)
	}
	if o := expect[*frames.SASLOutcome](c); o.Code != frames.SASLOK {
		t.Fatalf("outcome %d", o.Code)
	}
	if h := c.readHeader(); !bytes.Equal(h, hdrAMQP) {
		t.Fatalf("header %q", h)
	}
	expect[*frames.Open](c)
	bg := expect[*frames.Begin](c)
	if bg.RemoteChannel == nil || *bg.RemoteChannel != 0 {
		t.Fatalf("begin.remote-channel = %v", bg.RemoteChannel)
	}
	at := expect[*frames.Attach](c)
	if at.Role != frames.RoleReceiver || at.Target == nil || at.Target.Address != "pipe" || at.MaxMessageSize != 100<<20 {
		t.Fatalf("attach reply %+v", at)
	}
	fl := expect[*frames.Flow](c)
	if fl.Handle == nil || *fl.Handle != at.Handle || fl.LinkCredit == nil || *fl.LinkCredit != 500 {
		t.Fatalf("first flow %+v", fl)
	}
}

// transfer builds a single-frame transfer.
func transfer(handle, id uint32, settled bool, payload []byte) *frames.Transfer {
	return &frames.Transfer{Handle: handle, DeliveryID: u32(id), DeliveryTag: []byte(fmt.Sprint(id)),
		MessageFormat: u32(0), Settled: settled, Payload: payload}
}

func TestRawIncomingIDsWrapAround(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(nil)
	const start uint32 = 4294967292 // RabbitMQ's choice: wraps after 4 transfers
	c.begin(&frames.Begin{NextOutgoingID: start, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10})
	c.attachSender(0, "wrap", nil)
	expect[*frames.Flow](c) // credit
	for i := range uint32(10) {
		c.write(0, transfer(0, start+i, false, []byte{byte(i)}))
		d := expect[*frames.Disposition](c)
		if d.First != start+i || !d.Settled || d.Role != frames.RoleReceiver {
			t.Fatalf("transfer %d: disposition %+v", i, d)
		}
	}
	// A session flow (echo) reports next-incoming-id past the wrap.
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, NextOutgoingID: 6, OutgoingWindow: 100, Echo: true})
	f := expect[*frames.Flow](c)
	if f.NextIncomingID == nil || *f.NextIncomingID != 6 {
		t.Fatalf("echoed flow next-incoming-id = %v, want 6", f.NextIncomingID)
	}
	if got := b.Len("wrap"); got != 10 {
		t.Fatalf("queued %d, want 10", got)
	}
}

func TestRawProactiveSessionFlow(t *testing.T) {
	// A small session window and link credit, and a client that never sends
	// a flow of its own: the engine must keep renewing both, so that far
	// more than 2^16 transfers get through without a window violation.
	b := startBroker(t, amqp.Config{SessionWindow: 64, LinkCredit: 50})
	c := rawDial(t, b.Addr)
	c.open(nil)
	bg := c.begin(nil)
	if bg.IncomingWindow != 64 {
		t.Fatalf("begin.incoming-window = %d", bg.IncomingWindow)
	}
	c.attachSender(0, "flood", nil)
	const n = 70000
	flows := flood(t, c, bg.IncomingWindow, n, []byte("x"), true)
	waitFor(t, func() bool { return b.Len("flood") == n }, "70,000 transfers queued")
	if flows < n/64 {
		t.Fatalf("only %d flows for %d transfers through a 64-frame window", flows, n)
	}
}

// flood sends n single-frame transfers on handle 0 of channel 0 as fast as
// the engine's session window and link credit allow, never sending a flow,
// and returns how many flows the engine sent meanwhile. A reader goroutine
// follows the engine's flows and ignores dispositions.
func flood(t testing.TB, c *rawClient, window uint32, n uint32, payload []byte, settled bool) int {
	t.Helper()
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		sessEnd = window // next-incoming-id + incoming-window, as of the last flow
		linkEnd uint32   // delivery-count + link-credit
		flows   int
		rerr    error
		stop    = make(chan struct{})
		stopped = make(chan struct{})
	)
	go func() {
		defer close(stopped)
		for {
			_, body, err := c.next(30 * time.Second)
			mu.Lock()
			select {
			case <-stop:
				mu.Unlock()
				return
			default:
			}
			if err != nil {
				rerr = err
				cond.Broadcast()
				mu.Unlock()
				return
			}
			switch f := body.(type) {
			case *frames.Flow:
				flows++
				sessEnd = *f.NextIncomingID + f.IncomingWindow
				if f.Handle != nil {
					linkEnd = *f.DeliveryCount + *f.LinkCredit
				}
			case *frames.Disposition, nil:
			default:
				rerr = fmt.Errorf("unexpected %T %+v", body, body)
			}
			cond.Broadcast()
			mu.Unlock()
		}
	}()
	batch := make([]byte, 0, 256<<10)
	tr := &frames.Transfer{DeliveryTag: []byte("t"), MessageFormat: u32(0), Settled: settled, Payload: payload}
	id := u32(0)
	tr.DeliveryID = id
	for i := uint32(0); i < n; {
		mu.Lock()
		for rerr == nil && (int32(sessEnd-i) <= 0 || int32(linkEnd-i) <= 0) {
			cond.Wait()
		}
		if rerr != nil {
			mu.Unlock()
			t.Fatalf("after %d transfers: %v", i, rerr)
		}
		room := min(sessEnd-i, linkEnd-i, n-i, 128)
		mu.Unlock()
		batch = batch[:0]
		for range room {
			*id = i
			var err error
			if batch, err = frames.Append(batch, frames.TypeAMQP, 0, tr); err != nil {
				t.Fatal(err)
			}
			i++
		}
		c.writeRaw(batch)
	}
	mu.Lock()
	close(stop)
	f := flows
	mu.Unlock()
	_ = c.nc.SetReadDeadline(time.Now()) // wake the reader
	<-stopped
	return f
}

func TestRawExactDrain(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	b.Put("d", []byte("m1"))
	b.Put("d", []byte("m2"))
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	at := c.attachReceiver(0, "d", nil)
	if at.InitialDeliveryCount != 0 {
		t.Fatalf("initial-delivery-count %d", at.InitialDeliveryCount)
	}
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(5), Drain: true})
	for i := range 2 {
		tr := expect[*frames.Transfer](c)
		if string(tr.Payload) != fmt.Sprintf("m%d", i+1) {
			t.Fatalf("transfer %d payload %q", i, tr.Payload)
		}
	}
	f := expect[*frames.Flow](c)
	if f.Handle == nil || !f.Drain || *f.DeliveryCount != 5 || *f.LinkCredit != 0 {
		t.Fatalf("drain answer: handle %v drain %v delivery-count %v link-credit %v; want drain, 5, 0",
			f.Handle, f.Drain, *f.DeliveryCount, *f.LinkCredit)
	}
	// Drain with no credit left to use is answered at once too.
	c.write(0, &frames.Flow{NextIncomingID: u32(2), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(5), LinkCredit: u32(0), Drain: true})
	f = expect[*frames.Flow](c)
	if !f.Drain || *f.DeliveryCount != 5 || *f.LinkCredit != 0 {
		t.Fatalf("second drain answer %+v", f)
	}
}

func TestRawCreditNeverExceeded(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	for i := range 10 {
		b.Put("c", []byte{byte(i)})
	}
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachReceiver(0, "c", func(a *frames.Attach) { a.SndSettleMode = frames.SenderSettleSettled })
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(3)})
	// The engine handles frames in order: a session echo sent after the
	// credit is answered after every transfer that credit allowed.
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100, Echo: true})
	for i := range 3 {
		tr := expect[*frames.Transfer](c)
		if !tr.Settled || tr.Payload[0] != byte(i) {
			t.Fatalf("transfer %d: %+v", i, tr)
		}
	}
	if f := expect[*frames.Flow](c); f.Handle != nil {
		t.Fatalf("want the session echo, got %+v", f)
	}
	if got := b.Len("c"); got != 7 {
		t.Fatalf("%d left on the queue, want 7", got)
	}
	// A link echo is answered with the link's state: 3 sent, none left.
	c.write(0, &frames.Flow{NextIncomingID: u32(3), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(3), LinkCredit: u32(0), Echo: true})
	f := expect[*frames.Flow](c)
	if f.Handle == nil || *f.DeliveryCount != 3 || *f.LinkCredit != 0 || f.Drain {
		t.Fatalf("link echo %+v", f)
	}
}

func TestRawOutgoingContinuationFrames(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	msg := bytes.Repeat([]byte("0123456789"), 200) // 2,000 bytes
	b.Put("big", msg)
	c := rawDial(t, b.Addr)
	c.open(&frames.Open{ContainerID: "small", MaxFrameSize: 512})
	c.begin(nil)
	c.attachReceiver(0, "big", nil)
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(1)})
	var got []byte
	for i := 0; ; i++ {
		h, body := c.read()
		tr, ok := body.(*frames.Transfer)
		if !ok {
			t.Fatalf("frame %d: %T", i, body)
		}
		if h.Size > 512 {
			t.Fatalf("frame %d of %d bytes exceeds the client's max-frame-size", i, h.Size)
		}
		if i == 0 && (tr.DeliveryID == nil || tr.DeliveryTag == nil || tr.MessageFormat == nil) {
			t.Fatalf("first frame lacks delivery-id, tag or format: %+v", tr)
		}
		if i > 0 && (tr.DeliveryID != nil || tr.DeliveryTag != nil || tr.MessageFormat != nil) {
			t.Fatalf("continuation frame %d repeats delivery-id, tag or format: %+v", i, tr)
		}
		got = append(got, tr.Payload...)
		if !tr.More {
			if i < 4 {
				t.Fatalf("2,000 bytes in %d frames of 512", i+1)
			}
			break
		}
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("reassembled %d bytes differ from the %d queued", len(got), len(msg))
	}
}

func TestRawIncomingContinuationAndAbort(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "parts", nil)
	expect[*frames.Flow](c)
	// Delivery 0: aborted after one frame; nothing is enqueued.
	c.write(0, &frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), MessageFormat: u32(0), Settled: true, More: true, Payload: []byte("junk")})
	c.write(0, &frames.Transfer{Handle: 0, Aborted: true})
	// Delivery 1: three frames, the continuations without id, tag, format.
	c.write(0, &frames.Transfer{Handle: 0, DeliveryID: u32(1), DeliveryTag: []byte("b"), MessageFormat: u32(0), More: true, Payload: []byte("one,")})
	c.write(0, &frames.Transfer{Handle: 0, More: true, Payload: []byte("two,")})
	c.write(0, &frames.Transfer{Handle: 0, Payload: []byte("three")})
	d := expect[*frames.Disposition](c)
	if d.First != 1 || !d.Settled {
		t.Fatalf("disposition %+v", d)
	}
	got := b.Take("parts")
	if len(got) != 1 || string(got[0]) != "one,two,three" {
		t.Fatalf("queued %q", got)
	}
}

func TestRawMaxMessageSize(t *testing.T) {
	b := startBroker(t, amqp.Config{MaxMessageSize: 1000})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	if at := c.attachSender(0, "m", nil); at.MaxMessageSize != 1000 {
		t.Fatalf("attach reply max-message-size %d, want 1000", at.MaxMessageSize)
	}
	expect[*frames.Flow](c)
	c.write(0, transfer(0, 0, true, make([]byte, 1000))) // at the limit: fine
	// Over the limit across two frames.
	c.write(0, &frames.Transfer{Handle: 0, DeliveryID: u32(1), DeliveryTag: []byte("x"), MessageFormat: u32(0), Settled: true, More: true, Payload: make([]byte, 600)})
	c.write(0, &frames.Transfer{Handle: 0, Payload: make([]byte, 401)})
	d := expect[*frames.Detach](c)
	if !d.Closed || d.Error == nil || d.Error.Condition != amqp.CondMessageSizeExceeded || !strings.Contains(d.Error.Description, "1000") {
		t.Fatalf("detach %+v", d)
	}
	if got := b.Len("m"); got != 1 {
		t.Fatalf("queued %d, want only the first message", got)
	}
}

// With SetRejectOversize a delivery over the limit, in one frame or
// several, is rejected with amqp:link:message-size-exceeded and the link
// stays attached (what Service Bus does; the Python SDK needs it).
func TestRawRejectOversize(t *testing.T) {
	b := startBroker(t, amqp.Config{MaxMessageSize: 1000})
	b.SetRejectOversize("m")
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "m", nil)
	expect[*frames.Flow](c)
	rejected := func(id uint32) {
		t.Helper()
		d := expect[*frames.Disposition](c)
		rj, ok := d.State.(*frames.Rejected)
		if d.First != id || !d.Settled || !ok || rj.Error == nil || rj.Error.Condition != amqp.CondMessageSizeExceeded ||
			!strings.Contains(rj.Error.Description, "1000") {
			t.Fatalf("disposition %+v (state %+v), want delivery %d rejected for its size", d, d.State, id)
		}
	}
	c.write(0, transfer(0, 0, false, make([]byte, 1001)))
	rejected(0)
	c.write(0, &frames.Transfer{Handle: 0, DeliveryID: u32(1), DeliveryTag: []byte("x"), MessageFormat: u32(0), More: true, Payload: make([]byte, 600)})
	c.write(0, &frames.Transfer{Handle: 0, More: true, Payload: make([]byte, 401)})
	c.write(0, &frames.Transfer{Handle: 0, Payload: make([]byte, 50)})
	rejected(1)
	c.write(0, transfer(0, 2, false, []byte("fits")))
	if d := expect[*frames.Disposition](c); d.First != 2 || !d.Settled {
		t.Fatalf("disposition %+v, want delivery 2 settled", d)
	}
	if got := b.Take("m"); len(got) != 1 || string(got[0]) != "fits" {
		t.Fatalf("queued %q, want only the message that fits", got)
	}
}

func TestRawReceiverSettleModeSecond(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	// Engine as receiver in mode second: outcome unsettled, then final.
	at := c.attachSender(0, "two", func(a *frames.Attach) { a.RcvSettleMode = frames.ReceiverSettleSecond })
	if at.RcvSettleMode != frames.ReceiverSettleSecond {
		t.Fatalf("reply rcv-settle-mode %d", at.RcvSettleMode)
	}
	expect[*frames.Flow](c)
	c.write(0, transfer(0, 0, false, []byte("p")))
	d := expect[*frames.Disposition](c)
	if d.Settled {
		t.Fatalf("mode second: the receiver's outcome must be unsettled: %+v", d)
	}
	if _, ok := d.State.(*frames.Accepted); !ok {
		t.Fatalf("state %T", d.State)
	}
	c.write(0, &frames.Disposition{Role: frames.RoleSender, First: 0, Settled: true, State: &frames.Accepted{}})

	// Engine as sender in mode second: the client's unsettled outcome is
	// settled by the engine with a settled disposition.
	c.attachReceiver(1, "two", func(a *frames.Attach) {
		a.RcvSettleMode = frames.ReceiverSettleSecond
		a.SndSettleMode = frames.SenderSettleUnsettled
	})
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(1), DeliveryCount: u32(0), LinkCredit: u32(1)})
	tr := expect[*frames.Transfer](c)
	if tr.Settled || string(tr.Payload) != "p" {
		t.Fatalf("transfer %+v", tr)
	}
	c.write(0, &frames.Disposition{Role: frames.RoleReceiver, First: *tr.DeliveryID, State: &frames.Accepted{}})
	d = expect[*frames.Disposition](c)
	if !d.Settled || d.Role != frames.RoleSender || d.First != *tr.DeliveryID {
		t.Fatalf("engine's settlement %+v", d)
	}
}

// expectClose reads until the engine's close and checks its condition.
func expectClose(t *testing.T, c *rawClient, cond encoding.Symbol) *frames.Error {
	t.Helper()
	cl := expect[*frames.Close](c)
	if cl.Error == nil || cl.Error.Condition != cond {
		t.Fatalf("close error %+v, want %s", cl.Error, cond)
	}
	if cl.Error.Description == "" {
		t.Fatalf("close %s without a description", cond)
	}
	return cl.Error
}

func TestRawOutgoingRespectsPeerWindow(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	msg := bytes.Repeat([]byte("abcdefghij"), 200) // 2,000 bytes: 5 frames of 512
	b.Put("w", msg)
	b.Put("w", []byte("second"))
	c := rawDial(t, b.Addr)
	c.open(&frames.Open{ContainerID: "narrow", MaxFrameSize: 512})
	c.begin(&frames.Begin{IncomingWindow: 2, OutgoingWindow: 100, HandleMax: 10})
	c.attachReceiver(0, "w", nil)
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 2, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(2)})
	var got []byte
	var next uint32
	for round := 0; ; round++ {
		// Two frames fit the window; then the window is shut (an echo
		// request with no room) and nothing may arrive before the echo.
		for range 2 {
			_, body := c.read()
			tr, ok := body.(*frames.Transfer)
			if !ok {
				t.Fatalf("round %d: got %T, want a transfer", round, body)
			}
			next++
			if tr.DeliveryID != nil && *tr.DeliveryID == 1 {
				if !bytes.Equal(got, msg) || string(tr.Payload) != "second" {
					t.Fatalf("first delivery reassembled to %d bytes; second is %q", len(got), tr.Payload)
				}
				return
			}
			got = append(got, tr.Payload...)
		}
		c.write(0, &frames.Flow{NextIncomingID: u32(next), IncomingWindow: 0, OutgoingWindow: 100, Echo: true})
		if f := expect[*frames.Flow](c); f.Handle != nil {
			t.Fatalf("round %d: want the session echo, got %+v", round, f)
		}
		c.write(0, &frames.Flow{NextIncomingID: u32(next), IncomingWindow: 2, OutgoingWindow: 100})
		if round > 10 {
			t.Fatal("too many rounds")
		}
	}
}

func TestRawPeerVanishesMidDelivery(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "half", nil)
	expect[*frames.Flow](c)
	c.write(0, &frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), More: true, Payload: []byte("first half")})
	_ = c.nc.Close()
	waitFor(t, func() bool { return b.Conns() == 0 && b.Detached() == 1 }, "the connection and link cleaned up")
	if got := b.Len("half"); got != 0 {
		t.Fatalf("a partial delivery was enqueued (%d)", got)
	}
}

func TestRawCoalescedDispositionsCoverEachDelivery(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "co", nil)
	expect[*frames.Flow](c)
	// Deliveries 0-9 unsettled, in one write (one read batch for the
	// engine), with 5 pre-settled in the middle.
	var all []byte
	for i := range uint32(15) {
		all = append(all, encodeFrame(t, frames.TypeAMQP, 0, transfer(0, i, i >= 5 && i < 10, []byte{byte(i)}))...)
	}
	c.writeRaw(all)
	settled := map[uint32]int{}
	for len(settled) < 10 {
		_, body := c.read()
		d, ok := body.(*frames.Disposition)
		if !ok {
			continue
		}
		last := d.First
		if d.Last != nil {
			last = *d.Last
		}
		if _, ok := d.State.(*frames.Accepted); !ok || !d.Settled || d.Role != frames.RoleReceiver {
			t.Fatalf("disposition %+v", d)
		}
		for id := d.First; ; id++ {
			settled[id]++
			if id == last {
				break
			}
		}
	}
	for id := uint32(0); id < 15; id++ {
		want := 1
		if id >= 5 && id < 10 {
			want = 0 // pre-settled: never in a disposition
		}
		if settled[id] != want {
			t.Fatalf("delivery %d settled %d times, want %d (all: %v)", id, settled[id], want, settled)
		}
	}
	if b.Len("co") != 15 {
		t.Fatalf("queued %d", b.Len("co"))
	}
}

func TestRawAutoCreditRenewedAfterPeerDrains(t *testing.T) {
	b := startBroker(t, amqp.Config{LinkCredit: 10})
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(nil)
	c.attachSender(0, "ad", nil)
	if f := expect[*frames.Flow](c); *f.LinkCredit != 10 {
		t.Fatalf("initial credit %d", *f.LinkCredit)
	}
	// The peer (sender) gives up all 10 credits without sending: its
	// delivery-count jumps to 10. The engine's automatic window grants more.
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(10), LinkCredit: u32(0), Drain: true})
	f := expect[*frames.Flow](c)
	if f.Handle == nil || *f.DeliveryCount != 10 || *f.LinkCredit != 10 {
		t.Fatalf("after the peer drained: %+v (delivery-count %v, credit %v)", f, *f.DeliveryCount, *f.LinkCredit)
	}
}

func TestRawPeerStopsReading(t *testing.T) {
	// The engine must not hang on a peer that grants credit and then never
	// reads: the bounded writer blocks, the write timeout fires, and the
	// connection is torn down with its deliveries reported lost.
	b := startBroker(t, amqp.Config{WriteTimeout: 300 * time.Millisecond, WriteBuffer: 64 << 10})
	big := bytes.Repeat([]byte("z"), 64<<10)
	for range 200 { // 12.8 MB: more than the socket buffers hold
		b.Put("stuck", big)
	}
	c := rawDial(t, b.Addr)
	c.open(nil)
	c.begin(&frames.Begin{IncomingWindow: 1 << 30, OutgoingWindow: 100, HandleMax: 10})
	c.attachReceiver(0, "stuck", nil)
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 1 << 30, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(1000)})
	// Read nothing more.
	waitFor(t, func() bool { return b.Conns() == 0 }, "the stuck connection dropped")
	waitFor(t, func() bool { return b.Len("stuck") == 200 }, "every message back on the queue")
}
