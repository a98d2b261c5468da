package benchcore

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
)

// TestRawTemplateIsAValidTransfer decodes the raw client's hand-encoded
// transfer frames with the broker's own decoder: the patched delivery id
// and tag land where they must, and the message carries the session id as
// group-id and the body as one data section, for bodies whose binary has
// a one-byte and a four-byte length.
func TestRawTemplateIsAValidTransfer(t *testing.T) {
	for _, c := range []struct {
		key  string
		size int
	}{{"", 300}, {"k4711", 300}, {"k1", 255}, {"", HeaderSize}} {
		key := c.key
		tm, err := newRawTemplate(3, key, c.size)
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, c.size)
		for i := range msg {
			msg[i] = byte(i)
		}
		EncodeHeader(msg, Header{Run: 9, ID: 77, Keyed: key != "", Key: 4711, Seq: 2})
		o := Outgoing{Body: msg, Key: key}
		if !tm.fits(&o) {
			t.Fatal("a body of the template's size and key must fit it")
		}
		frame := tm.appendTo([]byte("prefix"), 0xA1B2C3D4, &o)[len("prefix"):]
		h, err := frames.ParseHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		if h.Channel != 3 || int(h.Size) != len(frame) || h.Type != frames.TypeAMQP {
			t.Fatalf("frame header %+v, want channel 3, size %d", h, len(frame))
		}
		b, err := frames.Decode(h, frame)
		if err != nil {
			t.Fatal(err)
		}
		tr, ok := b.(*frames.Transfer)
		if !ok {
			t.Fatalf("decoded %T, want a transfer", b)
		}
		if tr.Handle != 0 || tr.DeliveryID == nil || *tr.DeliveryID != 0xA1B2C3D4 || tr.Settled || tr.More ||
			tr.MessageFormat == nil || *tr.MessageFormat != 0 || !bytes.Equal(tr.DeliveryTag, []byte{0, 0, 0, 0, 0xA1, 0xB2, 0xC3, 0xD4}) {
			t.Fatalf("transfer %+v", tr)
		}
		m, err := message.Parse(tr.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if key == "" && m.Properties != nil {
			t.Fatalf("unkeyed message has properties %+v", m.Properties)
		}
		if key != "" && (m.Properties == nil || m.Properties.GroupID != key) {
			t.Fatalf("keyed message properties %+v, want group-id %q", m.Properties, key)
		}
		if m.Body.Kind != message.BodyData || len(m.Body.Data) != 1 || !bytes.Equal(m.Body.Data[0], msg) {
			t.Fatalf("body kind %v with %d sections, want the message as one data section", m.Body.Kind, len(m.Body.Data))
		}
		got, err := dataBody(tr.Payload)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("dataBody = %x, %v; want the body", got[:8], err)
		}
		if tm.fits(&Outgoing{Body: msg, Key: key + "x"}) || tm.fits(&Outgoing{Body: msg[:len(msg)-1], Key: key}) {
			t.Fatal("another key or another size must not fit")
		}
	}
}

// TestDataBodySkipsOtherSections reads the body of a message as Busbar
// delivers it: header, annotations and properties before the data.
func TestDataBodySkipsOtherSections(t *testing.T) {
	bare, err := message.AppendBare(nil, &message.Properties{MessageID: "m1", GroupID: "k1"},
		map[string]any{"a": int64(1)}, message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := message.Build(nil, &message.Header{Durable: true, DeliveryCount: 2},
		encoding.Annotations{encoding.Symbol("x-opt-lock-token"): "t"},
		encoding.Annotations{encoding.Symbol("x-opt-sequence-number"): int64(5)}, bare)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dataBody(msg); err != nil || string(got) != "hello" {
		t.Fatalf("dataBody = %q, %v; want hello", got, err)
	}
	value, _ := message.AppendBare(nil, nil, nil, message.Body{Kind: message.BodyValue, Value: "v"})
	for _, bad := range [][]byte{nil, value, msg[:len(msg)-2], {0x00, 0xa3, 0x01, 'x', 0x40}} {
		if _, err := dataBody(bad); err == nil {
			t.Fatalf("dataBody(%x) succeeded, want an error", bad)
		}
	}
}

func FuzzDataBody(f *testing.F) {
	bare, _ := message.AppendBare(nil, &message.Properties{GroupID: "k1"}, nil, message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("body")}})
	f.Add(bare)
	f.Add([]byte{0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i'})
	f.Add([]byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x75, 0xb0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := dataBody(b)
		if err == nil && len(got) > len(b) {
			t.Fatalf("body of %d bytes from a %d-byte message", len(got), len(b))
		}
	})
}

// TestRawSettlesInRanges feeds a receiver link deliveries as the reader
// would and checks the dispositions it writes: one accepted range per run
// of consecutive delivery ids, unsettled (the broker answers) by default,
// with credit renewed at half the prefetch; and the broker's range answer
// clears what the link waits for.
func TestRawSettlesInRanges(t *testing.T) {
	c := &rawConn{done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s := &rawSession{c: c, ch: 2}
	l := newRawLink(s, false)
	l.settle, l.prefetch, l.creditLeft = true, 10, 10
	var bodies int
	l.deliver = func(b []byte) Delivery {
		if b == nil {
			t.Error("a valid message reached the engine without its body")
		}
		bodies++
		return Delivery{Outcome: First}
	}
	payload := message.AppendData(nil, []byte("0123456789abcdef0123456789abcdef"))
	for _, id := range []uint32{7, 8, 9, 10, 20, 21} {
		id := id
		if err := l.onTransfer(&frames.Transfer{DeliveryID: &id, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	l.flushSettlementsLocked()
	type disp struct {
		first, last uint32
		settled     bool
	}
	var got []disp
	var credits []uint32
	flows, disps := rawOutput(t, c.out, 2)
	for _, f := range disps {
		last := f.First
		if f.Last != nil {
			last = *f.Last
		}
		if _, ok := f.State.(*frames.Accepted); !ok || f.Role != frames.RoleReceiver {
			t.Fatalf("disposition %+v, want accepted by the receiver", f)
		}
		got = append(got, disp{f.First, last, f.Settled})
	}
	for _, f := range flows {
		credits = append(credits, *f.LinkCredit)
	}
	want := []disp{{7, 10, false}, {20, 21, false}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("dispositions %+v, want %+v", got, want)
	}
	// 10 credits: renewed to 10 when 5 are left (after the 5th delivery).
	if len(credits) != 1 || credits[0] != 10 || bodies != 6 {
		t.Fatalf("flows with credit %v and %d bodies, want one renewal to 10 and 6 bodies", credits, bodies)
	}
	if l.awaiting != 6 {
		t.Fatalf("awaiting %d answers, want 6", l.awaiting)
	}
	if err := l.onDisposition(frames.RoleSender, 7, 10, true, &frames.Accepted{}); err != nil {
		t.Fatal(err)
	}
	if err := l.onDisposition(frames.RoleSender, 20, 21, true, &frames.Rejected{Error: &frames.Error{Condition: "com.microsoft:message-lock-lost"}}); err != nil {
		t.Fatal(err)
	}
	if l.awaiting != 0 || l.rejectErr == nil {
		t.Fatalf("after the answers: awaiting %d, error %v; want 0 and the lock-lost refusal", l.awaiting, l.rejectErr)
	}
}

// TestRawSenderSettlesRanges checks that one broker disposition covering a
// range releases every Send waiting in it, with an error for a refusal.
func TestRawSenderSettlesRanges(t *testing.T) {
	c := &rawConn{done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s := &rawSession{c: c}
	l := newRawLink(s, true)
	a := &rawWaiter{left: 2, done: make(chan struct{})}
	b := &rawWaiter{left: 1, done: make(chan struct{})}
	l.ring[5], l.ring[6], l.ring[7] = a, a, b
	l.unsettled = 3
	if err := l.onDisposition(frames.RoleReceiver, 5, 6, true, &frames.Accepted{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.done:
	default:
		t.Fatal("the first send is still waiting after its range was accepted")
	}
	if a.err != nil {
		t.Fatalf("accepted send failed: %v", a.err)
	}
	if err := l.onDisposition(frames.RoleReceiver, 7, 7, true, &frames.Rejected{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	default:
		t.Fatal("the second send is still waiting")
	}
	if b.err == nil || l.unsettled != 0 {
		t.Fatalf("refused send: err %v, unsettled %d; want an error and 0", b.err, l.unsettled)
	}
}

// TestRawReadAttach checks the raw client's partial attach decoder against
// the full one: name, handle, role, initial-delivery-count and whether each
// terminus is there, for attaches as Busbar answers a session receiver
// (filter and properties included), refuses one, or answers a sender; and
// that it leaves every other frame to the full decoder.
func TestRawReadAttach(t *testing.T) {
	accepted := &frames.Attach{Name: "bench-rcv-1-00000002", Handle: 5, Role: frames.RoleSender,
		SndSettleMode: frames.SenderSettleUnsettled, RcvSettleMode: frames.ReceiverSettleSecond,
		Source: &frames.Source{Address: "q", Filter: encoding.Fields{sessionFilter: &encoding.Described{Descriptor: uint64(sessionFilterCode), Value: "k42"}}},
		Target: &frames.Target{Address: "bench-rcv-1-00000002"}, InitialDeliveryCount: 7, MaxMessageSize: 1 << 20,
		Properties: encoding.Fields{"com.microsoft:locked-until-utc": int64(638000000000000000)}}
	refused := &frames.Attach{Name: "bench-rcv-1-00000003", Handle: 6, Role: frames.RoleSender,
		Target: &frames.Target{Address: "bench-rcv-1-00000003"}}
	sender := &frames.Attach{Name: "bench-snd-0", Role: frames.RoleReceiver, Source: &frames.Source{Address: "bench-snd-0"}}
	for _, a := range []*frames.Attach{accepted, refused, sender} {
		frame, err := frames.Append(nil, frames.TypeAMQP, 1, a)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := frames.ParseHeader(frame)
		full, err := frames.Decode(h, frame)
		if err != nil {
			t.Fatal(err)
		}
		want := full.(*frames.Attach)
		var got frames.Attach
		if !readAttach(frame[int(h.DataOff)*4:], &got) {
			t.Fatalf("readAttach did not read the attach of %q", a.Name)
		}
		if got.Name != want.Name || got.Handle != want.Handle || got.Role != want.Role ||
			got.InitialDeliveryCount != want.InitialDeliveryCount ||
			(got.Source == nil) != (want.Source == nil) || (got.Target == nil) != (want.Target == nil) {
			t.Fatalf("readAttach read %+v, want the fields of %+v", got, want)
		}
	}
	id := uint32(1)
	for _, b := range []frames.Body{&frames.Flow{IncomingWindow: 1}, &frames.Detach{Handle: 0, Closed: true},
		&frames.Transfer{DeliveryID: &id, DeliveryTag: []byte{1}, Payload: []byte{0}}} {
		frame, err := frames.Append(nil, frames.TypeAMQP, 1, b)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := frames.ParseHeader(frame)
		var got frames.Attach
		if readAttach(frame[int(h.DataOff)*4:], &got) {
			t.Fatalf("readAttach read a %T as an attach", b)
		}
	}
}

// TestRawSessionAttach checks the attach a session encodes once for its
// session receivers: each link's frame is the attach receiverAttach builds,
// on the session's channel, with a name of its own that is also the target
// address.
func TestRawSessionAttach(t *testing.T) {
	d := &RawDriver{}
	d.cfg.Prefetch = 100
	d.queue = "q1"
	c := &rawConsumer{d: d, prefix: "bench-rcv-0badcafe-"}
	s := &rawSession{ch: 9}
	seen := map[string]bool{}
	for range 3 {
		frame, name, err := c.sessionAttach(s)
		if err != nil {
			t.Fatal(err)
		}
		h, err := frames.ParseHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		body, err := frames.Decode(h, frame)
		if err != nil {
			t.Fatal(err)
		}
		got := body.(*frames.Attach)
		if h.Channel != 9 || got.Name != name || seen[name] || got.Target == nil || got.Target.Address != name {
			t.Fatalf("attach on channel %d named %q (target %+v), want channel 9 and a new name %q as the target", h.Channel, got.Name, got.Target, name)
		}
		seen[name] = true
		want, err := frames.Append(nil, frames.TypeAMQP, 9, c.receiverAttach(name, true))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(frame, want) {
			t.Fatalf("attach %x, want %x", frame, want)
		}
	}
}

// TestRawLastMessageLeavesAtOnce feeds a session receiver its key's
// messages as the reader would: the early credit goes out right after the
// attach, without a delivery-count (the broker's is not known yet); the
// last message stops the credit, in the same output as the disposition;
// and the link is finished only once the broker has answered that
// disposition: leaving waits for that answer, and then queues the detach
// without waiting for anything.
func TestRawLastMessageLeavesAtOnce(t *testing.T) {
	c := &rawConn{done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s := &rawSession{c: c, ch: 4}
	l := newRawLink(s, false)
	l.name, l.keyed, l.settle, l.prefetch = "r", true, true, 100
	var last bool
	l.deliver = func([]byte) Delivery { return Delivery{Outcome: First, Keyed: true, Last: last} }
	if err := s.sendAttach(l, []byte("attach"), l.prefetch); err != nil {
		t.Fatal(err)
	}
	flows, _ := rawOutput(t, c.out[len("attach"):], 4)
	if len(flows) != 1 || *flows[0].LinkCredit != 100 || flows[0].DeliveryCount != nil {
		t.Fatalf("flows after the attach %+v, want one granting 100 with no delivery-count", flows)
	}
	c.out = c.out[:0]
	if err := s.onAttach(&frames.Attach{Name: "r", Handle: 3, Role: frames.RoleSender, Source: &frames.Source{}, InitialDeliveryCount: 50}); err != nil {
		t.Fatal(err)
	}
	payload := message.AppendData(nil, make([]byte, HeaderSize))
	for id := uint32(10); id < 13; id++ {
		last = id == 12
		if err := s.onTransfer(&frames.Transfer{Handle: 3, DeliveryID: &id, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	l.flushSettlementsLocked() // as the reader does before it reads again
	flows, disps := rawOutput(t, c.out, 4)
	if len(flows) != 1 || *flows[0].LinkCredit != 0 || flows[0].DeliveryCount == nil || *flows[0].DeliveryCount != 53 ||
		len(disps) != 1 || disps[0].First != 10 || *disps[0].Last != 12 {
		t.Fatalf("after the last message: flows %+v, dispositions %+v; want credit 0 at delivery-count 53 and one disposition 10..12", flows, disps)
	}
	select {
	case <-l.finished:
		t.Fatal("finished before the broker answered the completes")
	default:
	}
	// Leaving now waits for the answers, here in vain: no detach.
	defer func(d time.Duration) { rawLeaveTimeout = d }(rawLeaveTimeout)
	rawLeaveTimeout = time.Nanosecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	c.out = c.out[:0]
	if err := l.leave(timer); err == nil || len(c.out) != 0 || s.link != l {
		t.Fatalf("leave with completes unanswered: %v, output %x; want a timeout, no detach, the link kept", err, c.out)
	}
	ten := uint32(10)
	if err := s.onDisposition(&frames.Disposition{Role: frames.RoleSender, First: 10, Last: &ten, Settled: true, State: &frames.Accepted{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.finished:
		t.Fatal("finished with two completes unanswered")
	default:
	}
	twelve := uint32(12)
	if err := s.onDisposition(&frames.Disposition{Role: frames.RoleSender, First: 11, Last: &twelve, Settled: true, State: &frames.Accepted{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.finished:
	default:
		t.Fatal("not finished once every complete was answered")
	}
	if err := l.leave(timer); err != nil {
		t.Fatal(err)
	}
	h, err := frames.ParseHeader(c.out)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := frames.Decode(h, c.out); err != nil || int(h.Size) != len(c.out) {
		t.Fatalf("after leave: %v, %v; want only a detach", b, err)
	} else if det, ok := b.(*frames.Detach); !ok || !det.Closed || s.link != nil {
		t.Fatalf("after leave: %+v, session link %v; want a closing detach and the link forgotten", b, s.link)
	}
}

// rawOutput decodes the flows and dispositions in a raw connection's
// output, all on channel ch.
func rawOutput(t *testing.T, b []byte, ch uint16) (flows []frames.Flow, disps []frames.Disposition) {
	t.Helper()
	for len(b) > 0 {
		h, err := frames.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		body, err := frames.Decode(h, b[:h.Size])
		if err != nil {
			t.Fatal(err)
		}
		if h.Channel != ch {
			t.Fatalf("frame on channel %d, want the session's %d", h.Channel, ch)
		}
		switch f := body.(type) {
		case *frames.Flow:
			flows = append(flows, *f)
		case *frames.Disposition:
			disps = append(disps, *f)
		default:
			t.Fatalf("unexpected %T", body)
		}
		b = b[h.Size:]
	}
	return flows, disps
}

// FuzzRawReadAttach feeds readAttach arbitrary performatives: it never
// panics, and what it reads as an attach the full decoder reads the same.
func FuzzRawReadAttach(f *testing.F) {
	for _, a := range []*frames.Attach{
		{Name: "r", Handle: 3, Role: frames.RoleSender, Source: &frames.Source{Address: "q"}, Target: &frames.Target{Address: "r"}, InitialDeliveryCount: 9},
		{Name: "refused", Role: frames.RoleSender, Target: &frames.Target{Address: "refused"}},
	} {
		frame, err := frames.Append(nil, frames.TypeAMQP, 0, a)
		if err != nil {
			f.Fatal(err)
		}
		h, _ := frames.ParseHeader(frame)
		f.Add(frame[int(h.DataOff)*4:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got frames.Attach
		if !readAttach(b, &got) {
			return
		}
		frame, err := frames.Append(nil, frames.TypeAMQP, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		frame = append(frame, b...)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)))
		h, _ := frames.ParseHeader(frame)
		full, err := frames.Decode(h, frame)
		if err != nil {
			return // readAttach skips fields it does not use; the full decoder checks them
		}
		want, ok := full.(*frames.Attach)
		if !ok {
			t.Fatalf("readAttach read a %T as an attach", full)
		}
		if got.Name != want.Name || got.Handle != want.Handle || got.Role != want.Role ||
			got.InitialDeliveryCount != want.InitialDeliveryCount ||
			(got.Source == nil) != (want.Source == nil) || (got.Target == nil) != (want.Target == nil) {
			t.Fatalf("readAttach read %+v, the full decoder %+v", got, *want)
		}
	})
}

// Sessions are refused with settled dispositions the broker does not
// answer, and with receive-and-delete, whose deliveries a session receiver
// that has left would drop.
func TestRawPrepareRefusals(t *testing.T) {
	keyed := Workload{Producers: 1, Consumers: 1, Keys: 1, PerKey: 1}
	for flag, cfg := range map[string]BusbarConfig{"--settle-first": {SettleFirst: true}, "--receive-and-delete": {ReceiveAndDelete: true}} {
		d := &RawDriver{}
		d.cfg = cfg
		if err := d.Prepare(context.Background(), keyed); err == nil || !strings.Contains(err.Error(), flag+" cannot be used with sessions") {
			t.Fatalf("%s with sessions: %v, want it refused", flag, err)
		}
	}
}
