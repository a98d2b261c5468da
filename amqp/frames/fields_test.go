package frames

import (
	"errors"
	"testing"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// uuidValue is a value no field of any performative accepts.
var uuidValue = append([]byte{encoding.CodeUUID}, make([]byte, 16)...)

// replaceField re-encodes the described list in comp with field i replaced
// by repl (fields are padded with nulls up to i).
func replaceField(t *testing.T, comp []byte, i int, repl []byte) []byte {
	t.Helper()
	d := encoding.NewDecoder(comp)
	code, _, err := d.ReadDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	l, n, err := d.ReadList()
	if err != nil {
		t.Fatal(err)
	}
	var elems [][]byte
	for range n {
		v, err := l.SkipValueBytes()
		if err != nil {
			t.Fatal(err)
		}
		elems = append(elems, v)
	}
	for len(elems) <= i {
		elems = append(elems, []byte{encoding.CodeNull})
	}
	elems[i] = repl
	out := encoding.AppendDescriptor(nil, code)
	out, start := encoding.BeginList(out)
	for _, e := range elems {
		out = append(out, e...)
	}
	return encoding.EndList(out, start, len(elems))
}

// TestWrongTypedFields puts a uuid into each field of each performative in
// turn: decoding must fail with a DecodeError naming that field.
func TestWrongTypedFields(t *testing.T) {
	cases := []struct {
		typ    uint8
		body   Body
		fields []string
	}{
		{TypeAMQP, &Open{ContainerID: "c"}, []string{"container-id", "hostname", "max-frame-size", "channel-max",
			"idle-time-out", "outgoing-locales", "incoming-locales", "offered-capabilities", "desired-capabilities", "properties"}},
		{TypeAMQP, &Begin{}, []string{"remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window",
			"handle-max", "offered-capabilities", "desired-capabilities", "properties"}},
		{TypeAMQP, &Attach{Name: "n"}, []string{"name", "handle", "role", "snd-settle-mode", "rcv-settle-mode",
			"source", "target", "unsettled", "incomplete-unsettled", "initial-delivery-count", "max-message-size",
			"offered-capabilities", "desired-capabilities", "properties"}},
		{TypeAMQP, &Flow{}, []string{"next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window",
			"handle", "delivery-count", "link-credit", "available", "drain", "echo", "properties"}},
		{TypeAMQP, &Transfer{}, []string{"handle", "delivery-id", "delivery-tag", "message-format", "settled", "more",
			"rcv-settle-mode", "state", "resume", "aborted", "batchable"}},
		{TypeAMQP, &Disposition{}, []string{"role", "first", "last", "settled", "state", "batchable"}},
		{TypeAMQP, &Detach{}, []string{"handle", "closed", "error"}},
		{TypeAMQP, &End{}, []string{"error"}},
		{TypeAMQP, &Close{}, []string{"error"}},
		{TypeSASL, &SASLMechanisms{}, []string{"sasl-server-mechanisms"}},
		{TypeSASL, &SASLInit{}, []string{"mechanism", "initial-response", "hostname"}},
		{TypeSASL, &SASLChallenge{}, []string{"challenge"}},
		{TypeSASL, &SASLResponse{}, []string{"response"}},
		{TypeSASL, &SASLOutcome{}, []string{"code", "additional-data"}},
	}
	for _, c := range cases {
		frame, err := Append(nil, c.typ, 0, c.body)
		if err != nil {
			t.Fatal(err)
		}
		for i, field := range c.fields {
			perf := replaceField(t, frame[HeaderSize:], i, uuidValue)
			checkFieldError(t, c.typ, perf, field)
		}
	}
}

// TestWrongTypedNestedFields does the same inside the error, source, target
// and delivery-state composites.
func TestWrongTypedNestedFields(t *testing.T) {
	errBytes, _ := appendError(nil, &Error{Condition: "c"})
	for i, f := range []string{"error.condition", "error.description", "error.info"} {
		perf := replaceField(t, mustAppendBody(t, &Detach{}), 2, replaceField(t, errBytes, i, uuidValue))
		checkFieldError(t, TypeAMQP, perf, f)
	}
	src, _ := appendSource(nil, &Source{})
	for i, f := range []string{"source.address", "source.durable", "source.expiry-policy", "source.timeout",
		"source.dynamic", "source.dynamic-node-properties", "source.distribution-mode", "source.filter",
		"source.default-outcome", "source.outcomes", "source.capabilities"} {
		perf := replaceField(t, mustAppendBody(t, &Attach{Name: "n"}), 5, replaceField(t, src, i, uuidValue))
		checkFieldError(t, TypeAMQP, perf, f)
	}
	tgt, _ := appendTarget(nil, &Target{})
	for i, f := range []string{"target.address", "target.durable", "target.expiry-policy", "target.timeout",
		"target.dynamic", "target.dynamic-node-properties", "target.capabilities"} {
		perf := replaceField(t, mustAppendBody(t, &Attach{Name: "n"}), 6, replaceField(t, tgt, i, uuidValue))
		checkFieldError(t, TypeAMQP, perf, f)
	}
	for _, s := range []struct {
		state  DeliveryState
		fields []string
	}{
		{&Received{}, []string{"state.section-number", "state.section-offset"}},
		{&Modified{}, []string{"state.delivery-failed", "state.undeliverable-here", "state.message-annotations"}},
		{&Rejected{}, []string{"error"}},
	} {
		st, _ := appendDeliveryState(nil, s.state)
		for i, f := range s.fields {
			perf := replaceField(t, mustAppendBody(t, &Disposition{}), 4, replaceField(t, st, i, uuidValue))
			checkFieldError(t, TypeAMQP, perf, f)
		}
	}
	// An out-of-range terminus durability is an invalid field.
	perf := replaceField(t, mustAppendBody(t, &Attach{Name: "n"}), 5, replaceField(t, src, 1, encoding.AppendUint(nil, 3)))
	checkFieldError(t, TypeAMQP, perf, "source.durable")
}

func mustAppendBody(t *testing.T, b Body) []byte {
	t.Helper()
	f, err := Append(nil, TypeAMQP, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	return f[HeaderSize:]
}

func checkFieldError(t *testing.T, typ uint8, perf []byte, field string) {
	t.Helper()
	frame := frameOf(typ, perf)
	h, err := ParseHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode(h, frame)
	var de *DecodeError
	if !errors.As(err, &de) || de.Field != field {
		t.Errorf("% x: got %v, want an error on field %q", perf, err, field)
		return
	}
	if errors.Unwrap(de) == nil {
		t.Errorf("field %q: no cause", field)
	}
}
