package message

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
)

// TestWriteFuzzSeeds stores messages encoded by this package and by go-amqp
// as the FuzzParse seed corpus when BUSBAR_WRITE_SEEDS is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("BUSBAR_WRITE_SEEDS") == "" {
		t.Skip("set BUSBAR_WRITE_SEEDS=1 to regenerate testdata/fuzz/FuzzParse")
	}
	var inputs [][]byte
	for _, body := range []Body{
		{Kind: BodyData, Data: [][]byte{[]byte("x")}},
		{Kind: BodySequence, Sequence: []encoding.List{{int64(1)}}},
		{Kind: BodyValue, Value: "v"},
	} {
		m := fullMessage()
		m.Body = body
		inputs = append(inputs, mustEncode(t, m))
	}
	inner := mustEncode(t, &Message{Properties: &Properties{MessageID: "a"}, Body: Body{Kind: BodyData, Data: [][]byte{[]byte("1")}}})
	inputs = append(inputs, mustEncode(t, &Message{Properties: &Properties{MessageID: "a"},
		Body: Body{Kind: BodyData, Data: [][]byte{inner, inner}}}))
	inputs = append(inputs,
		mustEncode(t, &Message{Header: &Header{Priority: 4}}),
		mustEncode(t, &Message{Properties: &Properties{MessageID: encoding.UUID{1}, CorrelationID: uint64(7)},
			Body:   Body{Kind: BodyValue, Value: encoding.Map{{Key: "k", Value: encoding.List{int32(1)}}}},
			Footer: encoding.Annotations{uint64(1): "f"}}),
		mustEncode(t, &Message{ApplicationProperties: map[string]any{"when": &encoding.Described{
			Descriptor: encoding.Symbol("com.microsoft:datetime-offset"), Value: int64(1)}},
			Body: Body{Kind: BodySequence, Sequence: []encoding.List{{"a"}, {"b"}}}}),
	)
	sym := encoding.AppendSymbolDescriptor(nil, "amqp:properties:list")
	sym = append(sym, encoding.CodeList0)
	sym = encoding.AppendSymbolDescriptor(sym, "amqp:data:binary")
	sym = encoding.AppendBinary(sym, []byte("d"))
	inputs = append(inputs, sym)
	now := time.UnixMilli(1700000000000)
	sid := "session"
	theirs := &amqp.Message{
		Header:                &amqp.MessageHeader{Durable: true, TTL: time.Hour},
		Annotations:           amqp.Annotations{"x-opt-scheduled-enqueue-time": now},
		Properties:            &amqp.MessageProperties{MessageID: "m", GroupID: &sid, CreationTime: &now},
		ApplicationProperties: map[string]any{"a": int64(1), "b": "s"},
		Data:                  [][]byte{[]byte("payload")},
	}
	b, err := theirs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, b)
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		sum := sha256.Sum256(in)
		file := filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8]))
		if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", in), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParse feeds arbitrary bytes to the message parser, the batch splitter
// and the application-properties rewriter. A parsed message must re-encode
// to bytes that parse and re-encode to themselves, and its bare message
// must be a span of the input.
func FuzzParse(f *testing.F) {
	f.Add([]byte{0x00, 0x53, 0x75, 0xa0, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = SplitBatch(in)
		p, err := Parse(in)
		if err != nil {
			return
		}
		if !bytes.Contains(in, p.Bare()) {
			t.Fatal("bare message is not part of the input")
		}
		if _, err := ReplaceApplicationProperties(nil, p.Bare(), map[string]any{"k": "v"}); err != nil {
			t.Fatalf("ReplaceApplicationProperties on a parsed bare message: %v", err)
		}
		first, err := Encode(nil, &p.Message)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		p2, err := Parse(first)
		if err != nil {
			t.Fatalf("parsing our own % x: %v", first, err)
		}
		second, err := Encode(nil, &p2.Message)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding not idempotent:\n% x\n% x", first, second)
		}
	})
}
