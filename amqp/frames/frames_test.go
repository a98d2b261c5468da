package frames

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/amqp/encoding"
)

func u32(v uint32) *uint32 { return &v }
func u16(v uint16) *uint16 { return &v }

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// decodeFrame parses the header of a whole frame and decodes it.
func decodeFrame(t testing.TB, b []byte) Body {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatalf("ParseHeader(% x): %v", b, err)
	}
	if int(h.Size) != len(b) {
		t.Fatalf("header size %d, frame %d bytes", h.Size, len(b))
	}
	body, err := Decode(h, b)
	if err != nil {
		t.Fatalf("Decode(% x): %v", b, err)
	}
	return body
}

func rsm(m ReceiverSettleMode) *ReceiverSettleMode { return &m }

// sampleBodies holds one of each body with its fields away from the
// defaults, plus minimal ones.
func sampleBodies() []Body {
	errFull := &Error{Condition: "amqp:not-found", Description: "no such entity",
		Info: encoding.Fields{"tracking-id": "abc"}}
	return []Body{
		&Open{ContainerID: "c1", Hostname: "localhost:5672", MaxFrameSize: 65536, ChannelMax: 4999,
			IdleTimeout: 60000, OutgoingLocales: []encoding.Symbol{"en-US"}, IncomingLocales: []encoding.Symbol{"en-US", "fr"},
			OfferedCapabilities: []encoding.Symbol{"ANONYMOUS-RELAY"}, DesiredCapabilities: []encoding.Symbol{"x"},
			Properties: encoding.Fields{"product": "busbar"}},
		&Open{ContainerID: "min", MaxFrameSize: 4294967295, ChannelMax: 65535, Properties: encoding.Fields{}},
		&Begin{RemoteChannel: u16(3), NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 6000, HandleMax: 255,
			OfferedCapabilities: []encoding.Symbol{"a"}, Properties: encoding.Fields{"k": int64(1)}},
		&Begin{IncomingWindow: 1, HandleMax: 4294967295, Properties: encoding.Fields{}},
		&Attach{Name: "link-1", Handle: 7, Role: RoleReceiver, SndSettleMode: SenderSettleUnsettled,
			RcvSettleMode: ReceiverSettleSecond,
			Source: &Source{Address: "queue1", Durable: 2, ExpiryPolicy: "never", Timeout: 30, Dynamic: true,
				DynamicNodeProperties: encoding.Fields{"lifetime-policy": &encoding.Described{Descriptor: uint64(0x2b), Value: encoding.List{}}},
				DistributionMode:      "move",
				Filter: encoding.Fields{
					"com.microsoft:session-filter": &encoding.Described{Descriptor: uint64(0x137000000c), Value: "s1"},
					"sql":                          &encoding.Described{Descriptor: encoding.Symbol("apache.org:selector-filter:string"), Value: "a = 1"},
				},
				DefaultOutcome: &Modified{DeliveryFailed: true},
				Outcomes:       []encoding.Symbol{"amqp:accepted:list", "amqp:rejected:list"},
				Capabilities:   []encoding.Symbol{"queue"}},
			Target:              &Target{Address: "client-1", ExpiryPolicy: "session-end", Capabilities: []encoding.Symbol{"t"}},
			Unsettled:           encoding.Map{{Key: []byte{1}, Value: &encoding.Described{Descriptor: uint64(0x24), Value: encoding.List{}}}},
			IncompleteUnsettled: true, MaxMessageSize: 1 << 20,
			OfferedCapabilities: []encoding.Symbol{"o"}, DesiredCapabilities: []encoding.Symbol{"d"},
			Properties: encoding.Fields{"com.microsoft:entity-type": "queue", "com.microsoft:timeout": uint32(60000)}},
		&Attach{Name: "s", Handle: 0, Role: RoleSender, SndSettleMode: SenderSettleMixed, InitialDeliveryCount: 9,
			Source: &Source{ExpiryPolicy: "session-end"}, Target: &Target{Address: "q", ExpiryPolicy: "session-end"},
			Properties: encoding.Fields{}},
		&Flow{NextIncomingID: u32(1), IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4, Handle: u32(5),
			DeliveryCount: u32(6), LinkCredit: u32(7), Available: u32(8), Drain: true, Echo: true,
			Properties: encoding.Fields{"p": true}},
		&Flow{IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4},
		&Transfer{Handle: 1, DeliveryID: u32(300), DeliveryTag: []byte{1, 2, 3, 4}, MessageFormat: u32(0x80013700),
			Settled: true, More: true, RcvSettleMode: rsm(ReceiverSettleSecond), State: &Received{SectionNumber: 1, SectionOffset: 99},
			Resume: true, Aborted: true, Batchable: true, Payload: []byte("payload")},
		&Transfer{Handle: 70000, Payload: []byte{0x00, 0x53, 0x75}},
		&Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte{}, MessageFormat: u32(0)},
		&Disposition{Role: RoleReceiver, First: 10, Last: u32(20), Settled: true, State: &Accepted{}, Batchable: true},
		&Disposition{First: 1, State: &Rejected{Error: errFull}},
		&Disposition{First: 1, State: &Released{}},
		&Disposition{First: 1, State: &Modified{DeliveryFailed: true, UndeliverableHere: true,
			MessageAnnotations: encoding.Annotations{encoding.Symbol("x-opt-reason"): "r"}}},
		&Disposition{First: 1, State: &Rejected{}},
		&Detach{Handle: 3, Closed: true, Error: errFull},
		&Detach{Handle: 3},
		&End{Error: &Error{Condition: "amqp:internal-error"}},
		&End{},
		&Close{Error: errFull},
		&Close{},
	}
}

func saslBodies() []Body {
	return []Body{
		&SASLMechanisms{Mechanisms: []encoding.Symbol{"MSSBCBS", "ANONYMOUS"}},
		&SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous"), Hostname: "localhost"},
		&SASLInit{Mechanism: "PLAIN"},
		&SASLChallenge{Challenge: []byte{1}},
		&SASLResponse{Response: []byte{}},
		&SASLOutcome{Code: SASLAuth, AdditionalData: []byte("x")},
		&SASLOutcome{Code: SASLOK},
	}
}

func TestRoundTrip(t *testing.T) {
	for typ, bodies := range map[uint8][]Body{TypeAMQP: sampleBodies(), TypeSASL: saslBodies()} {
		for _, body := range bodies {
			b, err := Append([]byte{0xEE}, typ, 9, body)
			if err != nil {
				t.Fatalf("Append(%#v): %v", body, err)
			}
			if b[0] != 0xEE {
				t.Fatal("Append overwrote dst's prefix")
			}
			got := decodeFrame(t, b[1:])
			if !reflect.DeepEqual(got, body) {
				t.Errorf("round trip of %T:\n got %#v\nwant %#v", body, got, body)
			}
			h, _ := ParseHeader(b[1:])
			if h.Channel != 9 || h.Type != typ || h.DataOff != 2 {
				t.Errorf("%T header %+v", body, h)
			}
		}
	}
}

func TestEmptyFrame(t *testing.T) {
	b, err := Append(nil, TypeAMQP, 0, nil)
	if err != nil || !bytes.Equal(b, hx("00000008 02 00 0000")) {
		t.Fatalf("heartbeat = % x, %v", b, err)
	}
	if body := decodeFrame(t, b); body != nil {
		t.Errorf("heartbeat decoded to %#v", body)
	}
	// A header with doff 3 and extended header bytes, still empty.
	b = hx("0000000c 03 00 0000 01020304")
	if body := decodeFrame(t, b); body != nil {
		t.Errorf("extended-header heartbeat decoded to %#v", body)
	}
}

func TestDecodeSizeMismatch(t *testing.T) {
	b, _ := Append(nil, TypeAMQP, 0, &Close{})
	h, _ := ParseHeader(b)
	for _, frame := range [][]byte{b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		_, err := Decode(h, frame)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != "size" {
			t.Errorf("Decode of %d bytes with header size %d: %v", len(frame), h.Size, err)
		}
	}
}

func TestParseHeaderErrors(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{"00000007 02 00 0000", "size"},
		{"00000008 01 00 0000", "doff"},
		{"00000008 03 00 0000", "doff"},
		{"000000", ""},
	} {
		_, err := ParseHeader(hx(c.in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != c.field || de.Condition != CondDecodeError {
			t.Errorf("ParseHeader(%s) = %v, want decode-error on %q", c.in, err, c.field)
		}
	}
}

// frameOf wraps a performative's bytes in an AMQP frame.
func frameOf(typ uint8, perf []byte) []byte {
	n := 8 + len(perf)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 2, typ, 0, 0}, perf...)
}

// TestDefaults decodes minimal performatives (mandatory fields only, or
// nulls) and checks that every omitted field holds its specified default.
func TestDefaults(t *testing.T) {
	for _, c := range []struct {
		name string
		perf string
		want Body
	}{
		{"open", "00 53 10 c0 03 01 a1 00", &Open{MaxFrameSize: 4294967295, ChannelMax: 65535}},
		{"open nulls", "00 53 10 c0 0c 0a a1 00 40 40 40 40 40 40 40 40 40", &Open{MaxFrameSize: 4294967295, ChannelMax: 65535}},
		{"begin", "00 53 11 c0 05 04 40 43 43 43", &Begin{HandleMax: 4294967295}},
		{"attach", "00 53 12 c0 06 03 a1 01 6c 43 42", &Attach{Name: "l", SndSettleMode: SenderSettleMixed}},
		{"attach null terminus", "00 53 12 c0 08 05 a1 01 6c 43 41 40 40", &Attach{Name: "l", Role: RoleReceiver, SndSettleMode: SenderSettleMixed}},
		{"source defaults", "00 53 12 c0 0c 06 a1 01 6c 43 41 40 40 00 53 28 45",
			&Attach{Name: "l", Role: RoleReceiver, SndSettleMode: SenderSettleMixed, Source: &Source{ExpiryPolicy: "session-end"}}},
		{"flow", "00 53 13 c0 05 04 40 43 43 43", &Flow{}},
		{"transfer", "00 53 14 c0 02 01 43", &Transfer{}},
		{"disposition", "00 53 15 c0 03 02 41 43", &Disposition{Role: RoleReceiver}},
		{"detach", "00 53 16 c0 02 01 43", &Detach{}},
		{"end list0", "00 53 17 45", &End{}},
		{"close", "00 53 18 c0 02 01 40", &Close{}},
	} {
		got := decodeFrame(t, frameOf(TypeAMQP, hx(c.perf)))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.name, got, c.want)
		}
	}
}

func TestSymbolicDescriptors(t *testing.T) {
	// disposition and its state, both with symbolic descriptors.
	b := encoding.AppendSymbolDescriptor(nil, "amqp:disposition:list")
	b, start := encoding.BeginList(b)
	b = encoding.AppendBool(b, true)
	b = encoding.AppendUint(b, 4)
	b = encoding.AppendNull(b)
	b = encoding.AppendBool(b, true)
	b = encoding.AppendSymbolDescriptor(b, "amqp:released:list")
	b = append(b, encoding.CodeList0)
	b = encoding.EndList(b, start, 5)
	got := decodeFrame(t, frameOf(TypeAMQP, b))
	want := &Disposition{Role: RoleReceiver, First: 4, Settled: true, State: &Released{}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("symbolic disposition = %#v", got)
	}
	// Every performative's symbolic name maps to its code.
	for code := DescOpen; code <= DescClose; code++ {
		name := "amqp:" + frameName(code) + ":list"
		if got := descriptorCode([]byte(name)); got != code {
			t.Errorf("descriptorCode(%q) = %#x", name, got)
		}
	}
}

// TestModifiedStringKeys: the Java SDK writes the message-annotations of a
// modified outcome (abandon with properties to modify) with string keys;
// they decode as symbols.
func TestModifiedStringKeys(t *testing.T) {
	// disposition(role receiver, first 4, settled, state modified(
	// delivery-failed, -, {"reason": "busy"})).
	b := frameOf(TypeAMQP, hx("00 53 15 c0 1f 05 41 52 04 40 41 00 53 27 c0 14 03 41 40 c1 0f 02 a1 06 726561736f6e a1 04 62757379"))
	got := decodeFrame(t, b)
	want := &Disposition{Role: RoleReceiver, First: 4, Settled: true, State: &Modified{
		DeliveryFailed: true, MessageAnnotations: encoding.Annotations{encoding.Symbol("reason"): "busy"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("disposition = %#v, want %#v", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		typ       uint8
		perf      string
		cond      encoding.Symbol
		frame     string
		field     string
		errSubstr string
	}{
		{"open without container-id", TypeAMQP, "00 53 10 45", CondInvalidField, "open", "container-id", "mandatory"},
		{"open null container-id", TypeAMQP, "00 53 10 c0 02 01 40", CondInvalidField, "open", "container-id", "mandatory"},
		{"open tiny max-frame-size", TypeAMQP, "00 53 10 c0 06 03 a1 00 40 52 10", CondInvalidField, "open", "max-frame-size", "below"},
		{"open wrong type", TypeAMQP, "00 53 10 c0 02 01 43", CondDecodeError, "open", "container-id", "expected string"},
		{"begin missing window", TypeAMQP, "00 53 11 c0 03 02 40 43", CondInvalidField, "begin", "incoming-window", "mandatory"},
		{"attach missing role", TypeAMQP, "00 53 12 c0 05 02 a1 01 6c 43", CondInvalidField, "attach", "role", "mandatory"},
		{"attach bad settle mode", TypeAMQP, "00 53 12 c0 08 04 a1 01 6c 43 42 50 07", CondInvalidField, "attach", "snd-settle-mode", "unknown mode"},
		{"attach source wrong descriptor", TypeAMQP, "00 53 12 c0 0b 06 a1 01 6c 43 42 40 40 00 53 29 45", CondInvalidField, "attach", "source", "not a source"},
		{"flow missing outgoing-window", TypeAMQP, "00 53 13 c0 04 03 40 43 43", CondInvalidField, "flow", "outgoing-window", "mandatory"},
		{"flow credit without handle", TypeAMQP, "00 53 13 c0 08 07 40 43 43 43 40 43 43", CondInvalidField, "flow", "handle", "absent"},
		{"transfer without handle", TypeAMQP, "00 53 14 45", CondInvalidField, "transfer", "handle", "mandatory"},
		{"transfer long tag", TypeAMQP, "00 53 14 c0 26 03 43 40 a0 21 " + strings.Repeat("00", 33), CondInvalidField, "transfer", "delivery-tag", "32-byte"},
		{"disposition unknown state", TypeAMQP, "00 53 15 c0 09 05 41 43 40 40 00 53 34 45", CondInvalidField, "disposition", "state", "unsupported delivery state 0x34"},
		{"disposition missing first", TypeAMQP, "00 53 15 c0 02 01 41", CondInvalidField, "disposition", "first", "mandatory"},
		{"received missing offset", TypeAMQP, "00 53 15 c0 0c 05 41 43 40 40 00 53 23 c0 02 01 43", CondInvalidField, "disposition", "state.section-offset", "mandatory"},
		{"detach error missing condition", TypeAMQP, "00 53 16 c0 07 03 43 40 00 53 1d 45", CondInvalidField, "detach", "error.condition", "mandatory"},
		{"close trailing bytes", TypeAMQP, "00 53 18 45 40", CondDecodeError, "close", "", "unexpected bytes"},
		{"unknown descriptor", TypeAMQP, "00 53 19 45", CondDecodeError, "frame", "", "not allowed"},
		{"sasl in amqp frame", TypeAMQP, "00 53 40 45", CondDecodeError, "frame", "", "not allowed"},
		{"amqp in sasl frame", TypeSASL, "00 53 10 45", CondDecodeError, "frame", "", "not allowed"},
		{"unknown symbolic", TypeAMQP, "00 a3 03 61 62 63 45", CondDecodeError, "frame", "", "unknown descriptor"},
		{"not described", TypeAMQP, "45", CondDecodeError, "frame", "", "expected described"},
		{"list size lies", TypeAMQP, "00 53 10 d0 ffffffff 00000001 40", CondDecodeError, "open", "", "exceeds"},
		{"sasl-init missing mechanism", TypeSASL, "00 53 41 45", CondInvalidField, "sasl-init", "mechanism", "mandatory"},
		{"sasl-outcome bad code", TypeSASL, "00 53 44 c0 03 01 50 09", CondInvalidField, "sasl-outcome", "code", "unknown outcome"},
		{"sasl-mechanisms missing", TypeSASL, "00 53 40 45", CondInvalidField, "sasl-mechanisms", "sasl-server-mechanisms", "mandatory"},
	} {
		b := frameOf(c.typ, hx(c.perf))
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = Decode(h, b)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want *DecodeError", c.name, err)
			continue
		}
		if de.Condition != c.cond || de.Frame != c.frame || de.Field != c.field || !strings.Contains(de.Error(), c.errSubstr) {
			t.Errorf("%s: got %q (cond %s frame %q field %q), want cond %s frame %q field %q containing %q",
				c.name, de.Error(), de.Condition, de.Frame, de.Field, c.cond, c.frame, c.field, c.errSubstr)
		}
	}
}

// TestEncodeFullFieldLists checks that open, begin and attach are written
// through their properties field even when everything is at its default,
// for peers (Python) that read them by position.
func TestEncodeFullFieldLists(t *testing.T) {
	for _, c := range []struct {
		body  Body
		count int
	}{
		{&Open{ContainerID: "c"}, 10},
		{&Begin{}, 8},
		{&Attach{Name: "n"}, 14},
	} {
		b, err := Append(nil, TypeAMQP, 0, c.body)
		if err != nil {
			t.Fatal(err)
		}
		d := encoding.NewDecoder(b[8:])
		if _, _, err := d.ReadDescriptor(); err != nil {
			t.Fatal(err)
		}
		l, n, err := d.ReadList()
		if err != nil || n != c.count {
			t.Errorf("%T: %d fields, %v; want %d", c.body, n, err, c.count)
			continue
		}
		for range n - 1 {
			_ = l.Skip()
		}
		if code, _ := l.Peek(); code != encoding.CodeMap8 {
			t.Errorf("%T: properties encoded as 0x%02x, want an empty map", c.body, code)
		}
	}
}

// TestEncodeTrimsDefaults pins the exact bytes of frames whose trailing
// fields are at their defaults.
func TestEncodeTrimsDefaults(t *testing.T) {
	for _, c := range []struct {
		body Body
		want string
	}{
		{&Transfer{Handle: 1}, "00000010 02 00 0000 00 53 14 c0 03 01 52 01"},
		{&Disposition{Role: RoleReceiver, First: 5, Settled: true, State: &Accepted{}},
			"00000017 02 00 0000 00 53 15 c0 0a 05 41 52 05 40 41 00 53 24 45"},
		{&Flow{IncomingWindow: 100, NextOutgoingID: 0, OutgoingWindow: 1 << 20},
			"00000017 02 00 0000 00 53 13 c0 0a 04 40 52 64 43 70 00100000"},
		{&Close{}, "0000000c 02 00 0000 00 53 18 45"},
		{&Detach{Handle: 2, Closed: true}, "00000011 02 00 0000 00 53 16 c0 04 02 52 02 41"},
	} {
		got, err := Append(nil, TypeAMQP, 0, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, hx(c.want)) {
			t.Errorf("%T = % x\n want %s", c.body, got, c.want)
		}
	}
}

func TestTransferOverhead(t *testing.T) {
	for _, tr := range []*Transfer{
		{Handle: 1},
		{Handle: 1, DeliveryID: u32(1 << 20), DeliveryTag: make([]byte, 16), MessageFormat: u32(0), More: true},
		{Handle: 1, State: &Rejected{Error: &Error{Condition: "x", Description: strings.Repeat("d", 400)}}},
	} {
		tr.Payload = make([]byte, 100)
		b, err := Append(nil, TypeAMQP, 0, tr)
		if err != nil {
			t.Fatal(err)
		}
		if got := TransferOverhead(tr); got != len(b)-100 {
			t.Errorf("TransferOverhead = %d, frame overhead %d", got, len(b)-100)
		}
	}
}

func TestAppendErrors(t *testing.T) {
	for _, body := range []Body{
		&Transfer{DeliveryTag: make([]byte, 33)},
		&Disposition{State: &Rejected{Error: &Error{Info: encoding.Fields{"x": struct{}{}}}}},
		&Open{ContainerID: "c", Properties: encoding.Fields{"bad": struct{}{}}},
	} {
		dst := []byte{1, 2}
		out, err := Append(dst, TypeAMQP, 0, body)
		if err == nil {
			t.Errorf("Append(%#v) succeeded", body)
		}
		if !bytes.Equal(out, []byte{1, 2}) {
			t.Errorf("failed Append left % x", out)
		}
	}
}

// TestDecoderReuse checks that a Decoder's hot-path bodies are rewritten in
// full on each decode (no field leaks from the previous frame).
func TestDecoderReuse(t *testing.T) {
	full, _ := Append(nil, TypeAMQP, 0, &Transfer{Handle: 1, DeliveryID: u32(5), DeliveryTag: []byte{9},
		MessageFormat: u32(0), Settled: true, More: true, Payload: []byte("abc")})
	cont, _ := Append(nil, TypeAMQP, 0, &Transfer{Handle: 1, Payload: []byte("de")})
	var d Decoder
	h, _ := ParseHeader(full)
	if _, err := d.Decode(h, full); err != nil {
		t.Fatal(err)
	}
	h, _ = ParseHeader(cont)
	got, err := d.Decode(h, cont)
	if err != nil {
		t.Fatal(err)
	}
	want := &Transfer{Handle: 1, Payload: []byte("de")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reused decoder gave %#v", got)
	}
}

func TestHotPathAllocations(t *testing.T) {
	payload := make([]byte, 1024)
	tr := &Transfer{Handle: 1, DeliveryID: u32(42), DeliveryTag: []byte("0123456789abcdef"),
		MessageFormat: u32(0), Settled: false, Payload: payload}
	trFrame, _ := Append(nil, TypeAMQP, 1, tr)
	flFrame, _ := Append(nil, TypeAMQP, 1, &Flow{NextIncomingID: u32(1), IncomingWindow: 5000, NextOutgoingID: 1,
		OutgoingWindow: 5000, Handle: u32(0), DeliveryCount: u32(10), LinkCredit: u32(100), Drain: true})
	dispFrame, _ := Append(nil, TypeAMQP, 1, &Disposition{Role: RoleReceiver, First: 1, Last: u32(9),
		Settled: true, State: &Accepted{}})
	var d Decoder
	buf := make([]byte, 0, 4096)
	disp := &Disposition{Role: RoleSender, First: 1, Settled: true, State: &Accepted{}}
	for name, f := range map[string]func(){
		"decode transfer": func() {
			h, _ := ParseHeader(trFrame)
			if _, err := d.Decode(h, trFrame); err != nil {
				panic(err)
			}
		},
		"decode flow": func() {
			h, _ := ParseHeader(flFrame)
			if _, err := d.Decode(h, flFrame); err != nil {
				panic(err)
			}
		},
		"decode disposition": func() {
			h, _ := ParseHeader(dispFrame)
			if _, err := d.Decode(h, dispFrame); err != nil {
				panic(err)
			}
		},
		"append transfer": func() {
			var err error
			if buf, err = Append(buf[:0], TypeAMQP, 1, tr); err != nil {
				panic(err)
			}
		},
		"append disposition": func() {
			var err error
			if buf, err = Append(buf[:0], TypeAMQP, 1, disp); err != nil {
				panic(err)
			}
		},
		"transfer overhead": func() { _ = TransferOverhead(tr) },
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// TestDecoderAttachDoesNotAliasTheFrame: a connection keeps an attach for
// the life of its link, while the frame's bytes are the read buffer, soon
// overwritten.
func TestDecoderAttachDoesNotAliasTheFrame(t *testing.T) {
	in := &Attach{Name: "link-1", Role: RoleReceiver,
		Source:     &Source{Address: "queue-1", Filter: encoding.Fields{"f": []byte("filter-bytes")}},
		Properties: encoding.Fields{"com.microsoft:tag": []byte("binary-value")}}
	for _, body := range []Body{in, &Begin{NextOutgoingID: 1, IncomingWindow: 2, OutgoingWindow: 3, Properties: encoding.Fields{"k": []byte("begin-bytes")}}} {
		frame, err := Append(nil, TypeAMQP, 0, body)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Decode(h, bytes.Clone(frame))
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		out, err := d.Decode(h, frame)
		if err != nil {
			t.Fatal(err)
		}
		for i := range frame {
			frame[i] = 0xff
		}
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("after the frame was overwritten the decoded %T changed:\n%#v\nwant\n%#v", out, out, want)
		}
	}
}
