package benchcore

import (
	"bytes"
	"testing"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
)

// TestRawTemplateIsAValidTransfer decodes the raw client's hand-encoded
// transfer frames with the broker's own decoder: the patched delivery id,
// tag and engine header land where they must, and the message carries the
// session id as group-id and the body as one data section.
func TestRawTemplateIsAValidTransfer(t *testing.T) {
	body := make([]byte, 300)
	for i := range body {
		body[i] = byte(i)
	}
	for _, key := range []string{"", "k4711"} {
		tm, err := newRawTemplate(3, key, body)
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, len(body))
		copy(msg, body)
		EncodeHeader(msg, Header{Run: 9, ID: 77, Keyed: key != "", Key: 4711, Seq: 2})
		o := Outgoing{Body: msg, Key: key}
		if !tm.fits(&o) {
			t.Fatal("a body differing only in its header must fit the template")
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
		other := append([]byte(nil), msg...)
		other[len(other)-1]++
		if tm.fits(&Outgoing{Body: other, Key: key}) || tm.fits(&Outgoing{Body: msg, Key: key + "x"}) || tm.fits(&Outgoing{Body: msg[:100], Key: key}) {
			t.Fatal("a body differing past the header, another key or another size must not fit")
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
	for b := c.out; len(b) > 0; {
		h, err := frames.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		body, err := frames.Decode(h, b[:h.Size])
		if err != nil {
			t.Fatal(err)
		}
		if h.Channel != 2 {
			t.Fatalf("frame on channel %d, want the session's 2", h.Channel)
		}
		switch f := body.(type) {
		case *frames.Disposition:
			last := f.First
			if f.Last != nil {
				last = *f.Last
			}
			if _, ok := f.State.(*frames.Accepted); !ok || f.Role != frames.RoleReceiver {
				t.Fatalf("disposition %+v, want accepted by the receiver", f)
			}
			got = append(got, disp{f.First, last, f.Settled})
		case *frames.Flow:
			credits = append(credits, *f.LinkCredit)
		default:
			t.Fatalf("unexpected %T", body)
		}
		b = b[h.Size:]
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
