package message

import (
	"fmt"
	"testing"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// benchMessage is a 1 KiB data message with 10 application properties, the
// shape of a typical Service Bus send.
func benchMessage() *Message {
	props := make(map[string]any, 10)
	for i := range 10 {
		if i%2 == 0 {
			props[fmt.Sprintf("prop-%d", i)] = int64(i)
		} else {
			props[fmt.Sprintf("prop-%d", i)] = fmt.Sprintf("value-%d", i)
		}
	}
	return &Message{
		Header:                &Header{Durable: true, Priority: DefaultPriority},
		MessageAnnotations:    encoding.Annotations{encoding.Symbol("x-opt-partition-key"): "pk"},
		Properties:            &Properties{MessageID: "0b3f2c1e-6a7d-4e8f-9a0b-1c2d3e4f5a6b", ContentType: "application/json", GroupID: "session-1"},
		ApplicationProperties: props,
		Body:                  Body{Kind: BodyData, Data: [][]byte{make([]byte, 1024)}},
	}
}

func BenchmarkEncode1KiB10Props(b *testing.B) {
	m := benchMessage()
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = Encode(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse1KiB10Props(b *testing.B) {
	raw, _ := Encode(nil, benchMessage())
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildDelivery measures re-emitting a stored bare message with a
// fresh header and broker annotations, as on every delivery.
func BenchmarkBuildDelivery(b *testing.B) {
	m := benchMessage()
	bare, _ := AppendBare(nil, m.Properties, m.ApplicationProperties, m.Body)
	h := &Header{Durable: true, Priority: DefaultPriority, DeliveryCount: 1}
	ann := encoding.Annotations{encoding.Symbol("x-opt-sequence-number"): int64(42),
		encoding.Symbol("x-opt-locked-until"): int64(0)}
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = Build(buf[:0], h, nil, ann, bare); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSplitBatch10(b *testing.B) {
	inner, _ := Encode(nil, benchMessage())
	data := make([][]byte, 10)
	for i := range data {
		data[i] = inner
	}
	env, _ := Encode(nil, &Message{Body: Body{Kind: BodyData, Data: data}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SplitBatch(env); err != nil {
			b.Fatal(err)
		}
	}
}
