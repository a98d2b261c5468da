package message

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// withField encodes a described list of n nulls whose field i is v.
func withField(code uint64, n, i int, v []byte) []byte {
	b := encoding.AppendDescriptor(nil, code)
	b, start := encoding.BeginList(b)
	for j := range n {
		if j == i {
			b = append(b, v...)
		} else {
			b = encoding.AppendNull(b)
		}
	}
	return encoding.EndList(b, start, n)
}

// TestWrongTypedFields puts a value of the wrong type into each header and
// properties field: parsing must fail naming the field.
func TestWrongTypedFields(t *testing.T) {
	uuid := encoding.AppendUUID(nil, encoding.UUID{})
	boolean := encoding.AppendBool(nil, true)
	for _, c := range []struct {
		code   uint64
		fields []string
		bad    []byte
	}{
		{DescHeader, []string{"durable", "priority", "ttl", "first-acquirer", "delivery-count"}, uuid},
		{DescProperties, []string{"message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
			"content-type", "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
			"group-sequence", "reply-to-group-id"}, boolean},
	} {
		for i, f := range c.fields {
			_, err := Parse(withField(c.code, len(c.fields), i, c.bad))
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), f) || pe.Section != sectionName(c.code) {
				t.Errorf("%s field %s: got %v", sectionName(c.code), f, err)
			}
		}
	}
	// Nulls everywhere are absent fields.
	p, err := Parse(withField(DescProperties, 13, 0, encoding.AppendNull(nil)))
	if err != nil || !reflect.DeepEqual(p.Properties, &Properties{}) {
		t.Errorf("all-null properties = %#v, %v", p.Properties, err)
	}
}

func TestSymbolicSectionNames(t *testing.T) {
	for code := DescHeader; code <= DescFooter; code++ {
		name := sectionName(code)
		var sym string
		switch code {
		case DescHeader, DescProperties, DescAMQPSequence:
			sym = "amqp:" + name + ":list"
		case DescData:
			sym = "amqp:data:binary"
		case DescAMQPValue:
			sym = "amqp:amqp-value:*"
		default:
			sym = "amqp:" + name + ":map"
		}
		if got := sectionCode([]byte(sym)); got != code {
			t.Errorf("sectionCode(%q) = %#x, want %#x", sym, got, code)
		}
	}
	if sectionCode([]byte("amqp:nothing:list")) != 0 {
		t.Error("unknown symbol mapped to a section")
	}
	if BodyValue.String() != "amqp-value" || BodyNone.String() != "none" {
		t.Error("BodyKind names")
	}
}

func TestBuildErrors(t *testing.T) {
	bad := encoding.Annotations{"string key": 1}
	if _, err := Build(nil, nil, bad, nil, nil); err == nil {
		t.Error("Build accepted a string annotation key")
	}
	if _, err := AppendAnnotations(nil, DescHeader, encoding.Annotations{}); err == nil {
		t.Error("AppendAnnotations accepted the header code")
	}
	for _, m := range []*Message{
		{Properties: &Properties{MessageID: int64(1)}},
		{Properties: &Properties{CorrelationID: true}},
		{ApplicationProperties: map[string]any{"x": struct{}{}}},
		{Body: Body{Kind: BodyValue, Value: struct{}{}}},
		{Body: Body{Kind: BodySequence, Sequence: []encoding.List{{struct{}{}}}}},
		{Body: Body{Kind: 9}},
		{Footer: bad},
	} {
		out, err := Encode([]byte{1}, m)
		if err == nil {
			t.Errorf("Encode(%#v) succeeded", m)
		}
		if len(out) != 1 {
			t.Errorf("failed Encode left % x", out)
		}
	}
}
