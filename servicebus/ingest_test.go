package servicebus

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
)

func mustEncode(t testing.TB, m *message.Message) []byte {
	t.Helper()
	b, err := message.Encode(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIngestFields(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	raw := mustEncode(t, &message.Message{
		Header:             &message.Header{TTL: 90000, Priority: 4},
		MessageAnnotations: encoding.Annotations{annScheduledEnqueueTime: at, annPartitionKey: "pk", encoding.Symbol("user"): "kept"},
		Properties: &message.Properties{MessageID: encoding.UUID{0: 0xab, 15: 0x01}, CorrelationID: uint64(42), GroupID: "sess",
			To: "to", ReplyTo: "rt", ReplyToGroupID: "rtg", Subject: "subj", ContentType: "application/json"},
		ApplicationProperties: map[string]any{"s": "x", "u": encoding.UUID{1}, "sym": encoding.Symbol("y"), "list": encoding.List{int32(1)}},
		Body:                  message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("body")}},
	})
	m, err := ingest(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := broker.Message{
		MessageID: "ab000000-0000-0000-0000-000000000001", CorrelationID: "42", SessionID: "sess", To: "to", ReplyTo: "rt",
		ReplyToSessionID: "rtg", Subject: "subj", ContentType: "application/json", PartitionKey: "pk",
		TimeToLive: 90 * time.Second, ScheduledEnqueueTime: at,
		Properties: map[string]any{"s": "x", "u": [16]byte{1}, "sym": "y"},
	}
	got := *m
	got.Body = nil
	if !sameExported(got, want) {
		t.Fatalf("ingest:\n got %+v\nwant %+v", got, want)
	}
	// The stored body is the message as received, byte for byte.
	if !bytes.Equal(m.Body, raw) {
		t.Fatalf("stored body differs from the message received")
	}
}

// pyamqp writes delivery annotations after every other section; ingest
// keeps them, in their place (delivery passes them on), and the message.
func TestIngestTrailingDeliveryAnnotations(t *testing.T) {
	header := mustEncode(t, &message.Message{Header: &message.Header{Priority: 7}})
	rest := mustEncode(t, &message.Message{
		MessageAnnotations:    encoding.Annotations{encoding.Symbol("ma"): "m"},
		Properties:            &message.Properties{MessageID: "id-1"},
		ApplicationProperties: map[string]any{"k": "v"},
		Body:                  message.Body{Kind: message.BodyValue, Value: "body"},
		Footer:                encoding.Annotations{encoding.Symbol("f"): "foot"},
	})
	da := mustEncode(t, &message.Message{DeliveryAnnotations: encoding.Annotations{encoding.Symbol("da"): int64(1)}})
	raw := append(append(append([]byte(nil), header...), rest...), da...)
	if _, err := message.Parse(raw); err == nil {
		t.Fatal("the engine's parser takes delivery annotations last; this test needs it strict")
	}
	m, err := ingest(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), header...), da...), rest...)
	if !bytes.Equal(m.Body, want) {
		t.Fatalf("stored % x\nwant   % x", m.Body, want)
	}
	// A section other than delivery annotations out of order is refused.
	if _, err := ingest(append(append([]byte(nil), rest...), header...)); err == nil {
		t.Fatal("a header after the body was taken")
	}
}

func TestIngestRefusesNullAnnotations(t *testing.T) {
	for _, k := range []encoding.Symbol{annScheduledEnqueueTime, annMessageState, annEnqueueSequenceNumber} {
		raw := mustEncode(t, &message.Message{
			MessageAnnotations: encoding.Annotations{k: nil},
			Properties:         &message.Properties{MessageID: "id"},
			Body:               message.Body{Kind: message.BodyValue, Value: "v"},
		})
		if _, err := ingest(raw); !errors.Is(err, broker.ErrInvalidArgument) {
			t.Errorf("null %s: %v, want ErrInvalidArgument", k, err)
		}
	}
	// A null partition key is accepted.
	raw := mustEncode(t, &message.Message{
		MessageAnnotations: encoding.Annotations{annPartitionKey: nil},
		Properties:         &message.Properties{MessageID: "id"},
	})
	if _, err := ingest(raw); err != nil {
		t.Errorf("null partition key: %v", err)
	}
}

func TestIngestAssignsMessageID(t *testing.T) {
	for name, m := range map[string]*message.Message{
		"no properties": {ApplicationProperties: map[string]any{"a": "b"}, Body: message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("x")}}},
		"properties without id": {Header: &message.Header{Durable: true, Priority: 4}, Properties: &message.Properties{Subject: "s"},
			Body: message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("x")}}},
		"header only": {Header: &message.Header{Priority: 4}},
	} {
		t.Run(name, func(t *testing.T) {
			bm, err := ingest(mustEncode(t, m))
			if err != nil {
				t.Fatal(err)
			}
			if len(bm.MessageID) != 32 {
				t.Fatalf("assigned id %q", bm.MessageID)
			}
			p, err := message.Parse(bm.Body)
			if err != nil {
				t.Fatal(err)
			}
			if p.Properties == nil || p.Properties.MessageID != bm.MessageID {
				t.Fatalf("stored properties %+v lack the id %s", p.Properties, bm.MessageID)
			}
			if m.Properties != nil && p.Properties.Subject != m.Properties.Subject {
				t.Fatalf("other properties lost: %+v", p.Properties)
			}
			if !reflect.DeepEqual(p.ApplicationProperties, m.ApplicationProperties) || !reflect.DeepEqual(p.Body, m.Body) {
				t.Fatalf("sections changed: %+v", p.Message)
			}
		})
	}
	// A properties section encoded as null (AMQP allows a null list) is a
	// section without an id.
	data := mustEncode(t, &message.Message{Body: message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("x")}}})
	null := append(encoding.AppendDescriptor(nil, message.DescProperties), encoding.CodeNull)
	bm, err := ingest(append(null, data...))
	if err != nil {
		t.Fatalf("a null properties section: %v", err)
	}
	if p, err := message.Parse(bm.Body); err != nil || p.Properties == nil || p.Properties.MessageID != bm.MessageID || len(bm.MessageID) != 32 {
		t.Fatalf("a null properties section: stored %x (%v), id %q", bm.Body, err, bm.MessageID)
	}
}

// A delivery carries the broker's annotations in their exact types, the
// lock token, the client's own annotations, and the bare message untouched.
func TestEncodeMessage(t *testing.T) {
	raw := mustEncode(t, &message.Message{
		Header:              &message.Header{Durable: true, Priority: 7, TTL: 5000, DeliveryCount: 9},
		DeliveryAnnotations: encoding.Annotations{encoding.Symbol("da"): int32(1)},
		MessageAnnotations:  encoding.Annotations{encoding.Symbol("ma"): "v", annSequenceNumber: "forged"},
		Properties:          &message.Properties{MessageID: "id"},
		Body:                message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("a"), []byte("b")}},
		Footer:              encoding.Annotations{encoding.Symbol("f"): "g"},
	})
	m, err := ingest(raw)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SequenceNumber, m.EnqueuedTime, m.DeliveryCount = 7, now, 2
	m.LockToken, m.LockedUntil = broker.LockToken{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, now.Add(time.Minute)
	m.State, m.EnqueueSequenceNumber, m.DeadLetterSource = broker.StateDeferred, 3, "src"
	out, err := encodeMessage(nil, m, true)
	if err != nil {
		t.Fatal(err)
	}
	p, err := message.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	// The client's header passes through, with the broker's delivery count.
	if want := (message.Header{Durable: true, Priority: 7, TTL: 5000, DeliveryCount: 2}); p.Header == nil || *p.Header != want {
		t.Fatalf("header %+v, want %+v", p.Header, want)
	}
	wantDA := encoding.Annotations{encoding.Symbol("da"): int32(1), annLockToken: encoding.UUID(m.LockToken)}
	if !reflect.DeepEqual(p.DeliveryAnnotations, wantDA) {
		t.Fatalf("delivery annotations %v", p.DeliveryAnnotations)
	}
	wantMA := encoding.Annotations{
		encoding.Symbol("ma"): "v", annSequenceNumber: int64(7), annEnqueuedTime: now, annLockedUntil: now.Add(time.Minute),
		annMessageState: int32(1), annEnqueueSequenceNumber: int64(3), annDeadLetterSource: "src", annPartitionKey: nil,
	}
	delete(wantMA, annPartitionKey)
	if !reflect.DeepEqual(p.MessageAnnotations, wantMA) {
		t.Fatalf("message annotations\n got %v\nwant %v", p.MessageAnnotations, wantMA)
	}
	orig, _ := message.Parse(raw)
	if !bytes.Equal(p.Bare(), orig.Bare()) || !reflect.DeepEqual(p.Footer, orig.Footer) {
		t.Fatal("bare message or footer changed")
	}
	if tag := dotnetTag(m.LockToken); !bytes.Equal(tag, []byte{3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Fatalf("delivery tag % x", tag)
	} else if back, ok := tokenOfTag(tag); !ok || back != m.LockToken {
		t.Fatal("tokenOfTag does not invert dotnetTag")
	}
}

// Properties the broker changed are re-encoded; the other sections are not.
func TestEncodeModifiedProperties(t *testing.T) {
	raw := mustEncode(t, &message.Message{
		Properties:            &message.Properties{MessageID: "id", Subject: "old"},
		ApplicationProperties: map[string]any{"a": "1"},
		Body:                  message.Body{Kind: message.BodyValue, Value: "v"},
	})
	m, err := ingest(raw)
	if err != nil {
		t.Fatal(err)
	}
	m.Properties = map[string]any{"a": "2", "DeadLetterReason": "r", "u": [16]byte{9}}
	m.PropertiesModified = true
	m.Subject = "new"
	m.SystemPropertiesModified = true
	out, err := encodeMessage(nil, m, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := message.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Properties.Subject != "new" || p.Properties.MessageID != "id" {
		t.Fatalf("properties %+v", p.Properties)
	}
	if !reflect.DeepEqual(p.ApplicationProperties, map[string]any{"a": "2", "DeadLetterReason": "r", "u": encoding.UUID{9}}) {
		t.Fatalf("application properties %v", p.ApplicationProperties)
	}
	if p.Body.Kind != message.BodyValue || p.Body.Value != "v" {
		t.Fatalf("body %+v", p.Body)
	}
	if _, ok := p.DeliveryAnnotations[annLockToken]; ok {
		t.Fatal("an unlocked message carries a lock token")
	}
}

func TestSessionFilter(t *testing.T) {
	for name, tc := range map[string]struct {
		v    any
		want sessionRequest
	}{
		"go named":    {&encoding.Described{Descriptor: descSessionFilter, Value: "s1"}, sessionRequest{id: "s1", descriptor: descSessionFilter}},
		"go next":     {&encoding.Described{Descriptor: descSessionFilter, Value: nil}, sessionRequest{next: true, descriptor: descSessionFilter}},
		"domain code": {&encoding.Described{Descriptor: descSessionFilterDomain, Value: ""}, sessionRequest{id: "", descriptor: descSessionFilterDomain}},
		"symbol":      {&encoding.Described{Descriptor: filterSession, Value: "x"}, sessionRequest{id: "x", descriptor: filterSession}},
		"js plain":    {"s2", sessionRequest{id: "s2", descriptor: descSessionFilter, plain: true}},
		"js null":     {nil, sessionRequest{next: true, descriptor: descSessionFilter, plain: true}},
	} {
		got, ok := sessionFilter(sourceWith(encoding.Fields{filterSession: tc.v}))
		if !ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", name, got, ok, tc.want)
		}
	}
	if _, ok := sessionFilter(sourceWith(nil)); ok {
		t.Error("a source without filter asks for a session")
	}
	if got := dotnetTicks(time.Unix(0, 0)); got != dotnetEpochTicks {
		t.Errorf("ticks of the Unix epoch %d", got)
	}
}

func sourceWith(f encoding.Fields) *frames.Source { return &frames.Source{Address: "q", Filter: f} }

// sameExported compares two messages' exported fields (the broker keeps
// its own state in unexported ones).
func sameExported(a, b broker.Message) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if va.Type().Field(i).IsExported() && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return false
		}
	}
	return true
}
