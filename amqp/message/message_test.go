package message

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
)

func fullMessage() *Message {
	return &Message{
		Header:              &Header{Durable: true, Priority: 7, TTL: 60000, FirstAcquirer: true, DeliveryCount: 3},
		DeliveryAnnotations: encoding.Annotations{encoding.Symbol("x-opt-lock-token"): encoding.UUID{1}},
		MessageAnnotations: encoding.Annotations{
			encoding.Symbol("x-opt-sequence-number"): int64(12),
			encoding.Symbol("x-opt-enqueued-time"):   time.UnixMilli(1700000000000).UTC(),
			uint64(5):                                "numeric key",
		},
		Properties: &Properties{
			MessageID: "id-1", UserID: []byte("user"), To: "queue", Subject: "subj", ReplyTo: "reply",
			CorrelationID: uint64(77), ContentType: "application/json", ContentEncoding: "gzip",
			AbsoluteExpiryTime: time.UnixMilli(1700000060000).UTC(), CreationTime: time.UnixMilli(1700000000000).UTC(),
			GroupID: "session-1", GroupSequence: 9, ReplyToGroupID: "rs",
		},
		ApplicationProperties: map[string]any{"a": int64(1), "b": "two", "c": true, "d": nil, "e": 2.5},
		Body:                  Body{Kind: BodyData, Data: [][]byte{[]byte("hello"), []byte("world")}},
		Footer:                encoding.Annotations{encoding.Symbol("f"): "v"},
	}
}

func mustEncode(t testing.TB, m *Message) []byte {
	t.Helper()
	b, err := Encode(nil, m)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func mustParse(t testing.TB, b []byte) *Parsed {
	t.Helper()
	p, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(% x): %v", b, err)
	}
	return p
}

func TestRoundTripBodyKinds(t *testing.T) {
	bodies := []Body{
		{Kind: BodyNone},
		{Kind: BodyData, Data: [][]byte{{}}},
		{Kind: BodyData, Data: [][]byte{bytes.Repeat([]byte{1}, 1000), {2}}},
		{Kind: BodySequence, Sequence: []encoding.List{{int64(1), "x"}, {}}},
		{Kind: BodyValue, Value: "a string value"},
		{Kind: BodyValue, Value: encoding.Map{{Key: "k", Value: int32(1)}}},
		{Kind: BodyValue, Value: nil},
	}
	for _, body := range bodies {
		m := fullMessage()
		m.Body = body
		got := mustParse(t, mustEncode(t, m))
		if !reflect.DeepEqual(&got.Message, m) {
			t.Errorf("%s body:\n got %#v\nwant %#v", body.Kind, got.Message, *m)
		}
	}
	// Only some sections.
	for _, m := range []*Message{
		{},
		{Header: &Header{Priority: DefaultPriority}},
		{Properties: &Properties{MessageID: encoding.UUID{9}}},
		{Properties: &Properties{MessageID: []byte{1, 2}}},
		{Properties: &Properties{MessageID: uint64(5)}},
		{ApplicationProperties: map[string]any{}},
		{Body: Body{Kind: BodyValue, Value: int64(1)}, Footer: encoding.Annotations{}},
	} {
		got := mustParse(t, mustEncode(t, m))
		if !reflect.DeepEqual(&got.Message, m) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got.Message, *m)
		}
	}
}

func TestHeaderDefaults(t *testing.T) {
	// An empty header list decodes to the specified defaults.
	p := mustParse(t, []byte{0x00, 0x53, 0x70, 0x45})
	if want := (&Header{Priority: 4}); !reflect.DeepEqual(p.Header, want) {
		t.Errorf("empty header = %#v", p.Header)
	}
	// delivery-count is always written, also when 0: @azure/service-bus
	// reads deliveryCount from it and gets undefined when it is omitted.
	if got := AppendHeader(nil, &Header{Priority: 4}); !bytes.Equal(got, []byte{0x00, 0x53, 0x70, 0xc0, 0x06, 0x05, 0x42, 0x40, 0x40, 0x42, 0x43}) {
		t.Errorf("default header encodes as % x", got)
	}
	if got := AppendHeader(nil, &Header{Durable: true, Priority: 4}); !bytes.Equal(got, []byte{0x00, 0x53, 0x70, 0xc0, 0x06, 0x05, 0x41, 0x40, 0x40, 0x42, 0x43}) {
		t.Errorf("durable header encodes as % x", got)
	}
}

// TestBareBytesKept checks that Parse exposes the bare message as the exact
// input bytes, and that Build re-emits them untouched around a new header
// and annotations.
func TestBareBytesKept(t *testing.T) {
	m := fullMessage()
	bare, err := AppendBare(nil, m.Properties, m.ApplicationProperties, m.Body)
	if err != nil {
		t.Fatal(err)
	}
	// Make the bare message use encodings this package never writes
	// (str32 for a short string) to prove no re-encoding happens.
	odd := append([]byte{0x00, 0x53, 0x73, 0xc0, 0x07, 0x01, 0xb1, 0, 0, 0, 1, 'x'}, bare[bytes.Index(bare, []byte{0x00, 0x53, 0x74}):]...)
	for _, bare := range [][]byte{bare, odd} {
		full, err := Build(nil, &Header{DeliveryCount: 1, Priority: 4}, encoding.Annotations{encoding.Symbol("d"): "x"},
			encoding.Annotations{encoding.Symbol("x-opt-locked-until"): time.UnixMilli(5).UTC()}, bare)
		if err != nil {
			t.Fatal(err)
		}
		full, err = AppendAnnotations(full, DescFooter, encoding.Annotations{encoding.Symbol("f"): "v"})
		if err != nil {
			t.Fatal(err)
		}
		p := mustParse(t, full)
		if !bytes.Equal(p.Bare(), bare) {
			t.Errorf("Bare() = % x\nwant % x", p.Bare(), bare)
		}
		if p.Header.DeliveryCount != 1 || p.Footer[encoding.Symbol("f")] != "v" {
			t.Errorf("header %#v footer %#v", p.Header, p.Footer)
		}
		// Re-emitting with another header keeps the bare bytes exactly.
		again, err := Build(nil, &Header{DeliveryCount: 2, Priority: 4}, nil, nil, p.Bare())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasSuffix(again, bare) {
			t.Error("Build did not copy the bare message untouched")
		}
	}
	if p := mustParse(t, odd); p.Properties.MessageID != "x" {
		t.Errorf("str32 message-id = %#v", p.Properties.MessageID)
	}
	// A message without properties, application-properties or body has an
	// empty bare message.
	p := mustParse(t, AppendHeader(nil, &Header{Priority: 4}))
	if len(p.Bare()) != 0 {
		t.Errorf("bare of a header-only message = % x", p.Bare())
	}
}

func TestReplaceApplicationProperties(t *testing.T) {
	m := fullMessage()
	props := map[string]any{"new": int32(5)}
	for _, c := range []struct {
		name  string
		props *Properties
		app   map[string]any
		repl  map[string]any
	}{
		{"replace", m.Properties, m.ApplicationProperties, props},
		{"insert after properties", m.Properties, nil, props},
		{"insert without properties", nil, nil, props},
		{"remove", m.Properties, m.ApplicationProperties, nil},
	} {
		bare, err := AppendBare(nil, c.props, c.app, m.Body)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ReplaceApplicationProperties([]byte("pre"), bare, c.repl)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.HasPrefix(out, []byte("pre")) {
			t.Fatalf("%s: dst prefix lost", c.name)
		}
		p := mustParse(t, out[3:])
		if !reflect.DeepEqual(p.ApplicationProperties, c.repl) || !reflect.DeepEqual(p.Properties, c.props) ||
			!reflect.DeepEqual(p.Body, m.Body) {
			t.Errorf("%s: got app %#v props %#v body %#v", c.name, p.ApplicationProperties, p.Properties, p.Body)
		}
		if c.props != nil {
			pb, _ := AppendProperties(nil, c.props)
			if !bytes.HasPrefix(out[3:], pb) {
				t.Errorf("%s: properties bytes changed", c.name)
			}
		}
		body, _ := AppendBody(nil, m.Body)
		if !bytes.HasSuffix(out, body) {
			t.Errorf("%s: body bytes changed", c.name)
		}
	}
	if _, err := ReplaceApplicationProperties(nil, AppendHeader(nil, &Header{}), props); err == nil {
		t.Error("ReplaceApplicationProperties accepted a message with a header")
	}
}

func TestSplitBatch(t *testing.T) {
	var inner [][]byte
	for i := range 3 {
		m := &Message{Properties: &Properties{MessageID: string(rune('a' + i))},
			Body: Body{Kind: BodyData, Data: [][]byte{bytes.Repeat([]byte{byte(i)}, 10*i)}}}
		inner = append(inner, mustEncode(t, m))
	}
	env := &Message{
		MessageAnnotations: encoding.Annotations{encoding.Symbol("x-opt-partition-key"): "pk"},
		Properties:         &Properties{MessageID: "a"},
		Body:               Body{Kind: BodyData, Data: inner},
	}
	got, err := SplitBatch(mustEncode(t, env))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, inner) {
		t.Errorf("SplitBatch = %q", got)
	}
	for _, bad := range []*Message{
		{Properties: &Properties{MessageID: "a"}},
		{Body: Body{Kind: BodyValue, Value: "x"}},
		{Body: Body{Kind: BodySequence, Sequence: []encoding.List{{}}}},
		{Header: &Header{}, Footer: encoding.Annotations{}},
	} {
		if _, err := SplitBatch(mustEncode(t, bad)); err == nil {
			t.Errorf("SplitBatch(%#v) succeeded", bad)
		}
	}
	props, _ := AppendProperties(nil, &Properties{MessageID: "x"})
	data := AppendData(nil, inner[0])
	for name, raw := range map[string][]byte{
		"properties after data": append(append([]byte{}, data...), props...),
		"truncated data":        data[:len(data)-1],
		"not a section":         {0x40},
	} {
		if _, err := SplitBatch(raw); err == nil {
			t.Errorf("SplitBatch(%s) succeeded", name)
		}
	}
}

func TestParseErrors(t *testing.T) {
	hdr := AppendHeader(nil, &Header{Durable: true})
	props, _ := AppendProperties(nil, &Properties{MessageID: "x"})
	data := AppendData(nil, []byte("d"))
	value, _ := AppendBody(nil, Body{Kind: BodyValue, Value: "v"})
	seq, _ := AppendBody(nil, Body{Kind: BodySequence, Sequence: []encoding.List{{}}})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name    string
		in      []byte
		section string
		want    string
	}{
		{"header after properties", cat(props, hdr), "header", "out of order"},
		{"two headers", cat(hdr, hdr), "header", "out of order"},
		{"properties after body", cat(data, props), "properties", "out of order"},
		{"value then data", cat(value, data), "data", "after a amqp-value body"},
		{"two values", cat(value, value), "amqp-value", "after a amqp-value body"},
		{"data then sequence", cat(data, seq), "amqp-sequence", "after a data body"},
		{"unknown section", []byte{0x00, 0x53, 0x79, 0x40}, "message", "unknown section descriptor 0x79"},
		{"not described", []byte{0x40}, "message", "expected described"},
		{"bad message-id", []byte{0x00, 0x53, 0x73, 0xc0, 0x02, 0x01, 0x41}, "properties", "message-id at offset 6 is bool"},
		{"app key not string", []byte{0x00, 0x53, 0x74, 0xc1, 0x03, 0x02, 0x43, 0x40}, "application-properties", "expected string"},
		{"sequence not list", []byte{0x00, 0x53, 0x76, 0x43}, "amqp-sequence", "want a list"},
		{"data truncated", []byte{0x00, 0x53, 0x75, 0xa0, 0x05, 0x01}, "data", "exceeds"},
		{"header wrong type", []byte{0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x43}, "header", "durable"},
	} {
		_, err := Parse(c.in)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Section != c.section || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %s error containing %q", c.name, err, c.section, c.want)
		}
	}
}

func TestSymbolicSectionDescriptors(t *testing.T) {
	b := encoding.AppendSymbolDescriptor(nil, "amqp:application-properties:map")
	b, _ = encoding.Append(b, encoding.Map{{Key: "k", Value: "v"}})
	b = encoding.AppendSymbolDescriptor(b, "amqp:amqp-value:*")
	b = encoding.AppendUint(b, 3)
	p := mustParse(t, b)
	if p.ApplicationProperties["k"] != "v" || p.Body.Kind != BodyValue || p.Body.Value != uint32(3) {
		t.Errorf("parsed %#v", p.Message)
	}
	if !bytes.Equal(p.Bare(), b) {
		t.Error("bare message is not the whole input")
	}
}

// TestGoAMQPInterop checks messages against github.com/Azure/go-amqp's
// public encoder and decoder, the library the Go Service Bus SDK uses.
func TestGoAMQPInterop(t *testing.T) {
	str := func(s string) *string { return &s }
	created := time.UnixMilli(1700000000000).UTC()
	gseq := uint32(4)
	theirs := &amqp.Message{
		Header:              &amqp.MessageHeader{Durable: true, Priority: 4, TTL: 30 * time.Second, DeliveryCount: 2},
		DeliveryAnnotations: amqp.Annotations{"x-da": "1"},
		Annotations:         amqp.Annotations{"x-opt-scheduled-enqueue-time": created, int64(0): "int key"},
		Properties: &amqp.MessageProperties{
			MessageID: amqp.UUID{1, 2, 3}, UserID: []byte("u"), To: str("q"), Subject: str("s"), ReplyTo: str("r"),
			CorrelationID: "corr", ContentType: str("text/plain"), ContentEncoding: str("utf-8"),
			AbsoluteExpiryTime: &created, CreationTime: &created, GroupID: str("g"), GroupSequence: &gseq,
			ReplyToGroupID: str("rg"),
		},
		ApplicationProperties: map[string]any{"n": int64(1), "s": "x", "f": 1.5, "b": false, "t": created},
		Data:                  [][]byte{[]byte("payload")},
	}
	b, err := theirs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Annotation keys must be symbols or ulongs (messaging §3.2.10); a
	// long key, which go-amqp will write, is refused.
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "annotations key is long") {
		t.Errorf("Parse accepted a long annotation key: %v", err)
	}
	delete(theirs.Annotations, int64(0))
	if b, err = theirs.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	p := mustParse(t, b)
	want := Message{
		Header:              &Header{Durable: true, Priority: 4, TTL: 30000, DeliveryCount: 2},
		DeliveryAnnotations: encoding.Annotations{encoding.Symbol("x-da"): "1"},
		MessageAnnotations:  encoding.Annotations{encoding.Symbol("x-opt-scheduled-enqueue-time"): created},
		Properties: &Properties{
			MessageID: encoding.UUID{1, 2, 3}, UserID: []byte("u"), To: "q", Subject: "s", ReplyTo: "r",
			CorrelationID: "corr", ContentType: "text/plain", ContentEncoding: "utf-8",
			AbsoluteExpiryTime: created, CreationTime: created, GroupID: "g", GroupSequence: 4, ReplyToGroupID: "rg",
		},
		ApplicationProperties: map[string]any{"n": int64(1), "s": "x", "f": 1.5, "b": false, "t": created},
		Body:                  Body{Kind: BodyData, Data: [][]byte{[]byte("payload")}},
	}
	if !reflect.DeepEqual(p.Message, want) {
		t.Errorf("parsed go-amqp message:\n got %#v\nwant %#v", p.Message, want)
	}
	// And the other way: go-amqp reads what Encode writes.
	ours := mustEncode(t, fullMessage())
	var back amqp.Message
	if err := back.UnmarshalBinary(ours); err != nil {
		t.Fatalf("go-amqp rejected our encoding: %v", err)
	}
	if back.Properties == nil || back.Properties.MessageID != "id-1" || *back.Properties.GroupID != "session-1" ||
		back.Header.TTL != time.Minute || back.ApplicationProperties["b"] != "two" ||
		string(back.Data[1]) != "world" || back.Annotations["x-opt-sequence-number"] != int64(12) {
		t.Errorf("go-amqp decoded %#v", back)
	}
}

// TestSplitGoAMQPBatch builds a batch the way azservicebus does
// (message_batch.go: the first message's properties and annotations as the
// envelope, each message marshaled by go-amqp into one data section) and
// splits it.
func TestSplitGoAMQPBatch(t *testing.T) {
	var inner [][]byte
	for i := range 3 {
		m := amqp.NewMessage([]byte{byte('a' + i)})
		m.Properties = &amqp.MessageProperties{MessageID: string(rune('0' + i))}
		m.Annotations = amqp.Annotations{"x-opt-partition-key": "pk"}
		m.ApplicationProperties = map[string]any{"n": int64(i)}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// .NET sends DateTimeOffset application properties as a
			// described long, which go-amqp cannot write; encode this one here.
			b = mustEncode(t, &Message{
				MessageAnnotations: encoding.Annotations{encoding.Symbol("x-opt-partition-key"): "pk"},
				Properties:         &Properties{MessageID: "0"},
				ApplicationProperties: map[string]any{"when": &encoding.Described{
					Descriptor: encoding.Symbol("com.microsoft:datetime-offset"), Value: int64(638000000000000000)}},
				Body: Body{Kind: BodyData, Data: [][]byte{[]byte("a")}},
			})
		}
		inner = append(inner, b)
	}
	env := amqp.Message{
		Format:      FormatBatch,
		Properties:  &amqp.MessageProperties{MessageID: "0"},
		Annotations: amqp.Annotations{"x-opt-partition-key": "pk"},
		Data:        inner,
	}
	payload, err := env.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := SplitBatch(payload)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, inner) {
		t.Fatalf("SplitBatch returned %d messages, different from the %d sent", len(got), len(inner))
	}
	for i, b := range got {
		p := mustParse(t, b)
		if p.Properties.MessageID != string(rune('0'+i)) || string(p.Body.Data[0]) != string(rune('a'+i)) {
			t.Errorf("inner message %d: %#v", i, p.Message)
		}
	}
	if d, _ := mustParse(t, got[0]).ApplicationProperties["when"].(*encoding.Described); d == nil || d.Value != int64(638000000000000000) {
		t.Errorf("described application property lost")
	}
}

// A group-id of "" (Service Bus session "") survives a parse and a build,
// and differs from an absent one.
func TestEmptyGroupID(t *testing.T) {
	withEmpty, err := AppendProperties(nil, &Properties{EmptyGroupID: true})
	if err != nil {
		t.Fatal(err)
	}
	without, err := AppendProperties(nil, &Properties{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(withEmpty, without) {
		t.Fatalf("an empty group-id encodes like an absent one: % x", withEmpty)
	}
	p := mustParse(t, withEmpty)
	if p.Properties == nil || !p.Properties.EmptyGroupID || p.Properties.GroupID != "" {
		t.Fatalf("parsed %+v, want EmptyGroupID", p.Properties)
	}
	if p := mustParse(t, without); p.Properties != nil && p.Properties.EmptyGroupID {
		t.Fatalf("an absent group-id parsed as empty")
	}
}

// SpliceMessageID gives the section AppendProperties would with the new
// message-id, field for field, whatever the sender's section held: nothing,
// some fields, a long one (list32), a message-id of another type, a
// symbolic descriptor.
func TestSpliceMessageID(t *testing.T) {
	long := strings.Repeat("l", 300)
	for _, p := range []*Properties{
		{},
		{GroupID: "session-1"},
		{MessageID: uint64(7), To: "to", Subject: "s", CorrelationID: "c", ContentType: "text/plain",
			GroupID: "g", GroupSequence: 3, ReplyToGroupID: "r", CreationTime: time.UnixMilli(1700000000000).UTC()},
		{MessageID: []byte{1, 2}, ReplyTo: long},
		{EmptyGroupID: true},
	} {
		sec, err := AppendProperties(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]byte{sec, symbolicDescriptor(t, sec)} {
			got, err := SpliceMessageID([]byte("prefix"), in, "assigned")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatal("dst not kept")
			}
			withID := *p
			withID.MessageID = "assigned"
			want, _ := AppendProperties(nil, &withID)
			if g, w := mustParse(t, got[len("prefix"):]).Properties, mustParse(t, want).Properties; !reflect.DeepEqual(*g, *w) {
				t.Fatalf("spliced %+v, want %+v", *g, *w)
			}
		}
	}
	// An empty list (list0), a null one and no section at all get a
	// section with the id alone.
	list0 := append(encoding.AppendDescriptor(nil, DescProperties), encoding.CodeList0)
	null := append(encoding.AppendDescriptor(nil, DescProperties), encoding.CodeNull)
	for _, sec := range [][]byte{list0, null, nil} {
		got, err := SpliceMessageID(nil, sec, "id")
		if err != nil || mustParse(t, got).Properties.MessageID != "id" {
			t.Fatalf("section %x: %x, %v", sec, got, err)
		}
	}
	// What is not one properties section is refused.
	hdr := AppendHeader(nil, &Header{Durable: true})
	for _, bad := range [][]byte{hdr, append(append([]byte(nil), sec0(t)...), 0x40), sec0(t)[:4]} {
		if _, err := SpliceMessageID(nil, bad, "id"); err == nil {
			t.Fatalf("% x: no error", bad)
		}
	}
}

func sec0(t *testing.T) []byte {
	b, err := AppendProperties(nil, &Properties{To: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// symbolicDescriptor rewrites sec's numeric properties descriptor as the
// symbol a sender may use instead.
func symbolicDescriptor(t *testing.T, sec []byte) []byte {
	d := encoding.NewDecoder(sec)
	if _, _, err := d.ReadDescriptor(); err != nil {
		t.Fatal(err)
	}
	out := append([]byte{0x00}, encoding.AppendSymbol(nil, "amqp:properties:list")...)
	return append(out, d.Rest()...)
}
