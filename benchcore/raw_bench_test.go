package benchcore

import (
	"context"
	"testing"

	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
)

// The benchmarks below split the load generator's CPU per message into its
// parts, without a broker: the engine alone (in-memory driver), and the raw
// client's per-message encoding and receive paths. What a real run costs
// beyond their sum is system calls and goroutine hand-offs. Run with
//
//	go test -run XXX -bench 'Engine|RawPath' ./benchcore

// BenchmarkEngineW2 runs the W2 shape (4 producers × 16 in flight, 4
// consumers, 1 KiB) through the engine with an in-memory driver: one op is
// one message sent, delivered and verified.
func BenchmarkEngineW2(b *testing.B) {
	w := Workload{Producers: 4, Consumers: 4, Inflight: 16, Size: 1024, Count: int64(max(b.N, 1))}
	d := newMem()
	b.ReportAllocs()
	b.ResetTimer()
	r, err := Run(context.Background(), w, d, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if !r.Verdict.OK {
		b.Fatalf("verdict %+v", r.Verdict)
	}
	b.ReportMetric(r.HarnessCPUPerMsg*1000, "cpu-ns/msg")
}

// BenchmarkRawPathSend is the producer's per-message work: copy the
// template and the body into the output buffer and patch id and tag.
func BenchmarkRawPathSend(b *testing.B) {
	body := make([]byte, 1024)
	t, err := newRawTemplate(1, "", len(body))
	if err != nil {
		b.Fatal(err)
	}
	o := Outgoing{Body: body}
	out := make([]byte, 0, 64<<10)
	b.SetBytes(int64(len(t.frame) + len(body)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if !t.fits(&o) {
			b.Fatal("template does not fit")
		}
		out = t.appendTo(out, uint32(i), &o)
		if len(out) > 60<<10 {
			out = out[:0]
		}
	}
}

// BenchmarkRawPathReceive is the consumer's per-message work on a frame as
// Busbar sends it: decode the transfer, find the body, hand it to a no-op
// engine callback and add it to the pending disposition range (flushed,
// with credit renewed, as a run would).
func BenchmarkRawPathReceive(b *testing.B) {
	bare, err := message.AppendBare(nil, &message.Properties{MessageID: "0123456789abcdef"}, nil,
		message.Body{Kind: message.BodyData, Data: [][]byte{make([]byte, 1024)}})
	if err != nil {
		b.Fatal(err)
	}
	payload, err := message.Build(nil, &message.Header{Durable: true}, nil, nil, bare)
	if err != nil {
		b.Fatal(err)
	}
	c := &rawConn{done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s := &rawSession{c: c}
	l := newRawLink(s, false)
	l.settle, l.prefetch, l.creditLeft = true, 100, 100
	l.deliver = func([]byte) Delivery { return Delivery{Outcome: First} }
	var dec frames.Decoder
	id := uint32(0)
	frame, err := frames.Append(nil, frames.TypeAMQP, 0, &frames.Transfer{DeliveryID: &id, DeliveryTag: make([]byte, 16), Payload: payload})
	if err != nil {
		b.Fatal(err)
	}
	h, _ := frames.ParseHeader(frame)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body, err := dec.Decode(h, frame)
		if err != nil {
			b.Fatal(err)
		}
		tr := body.(*frames.Transfer)
		n := uint32(i)
		tr.DeliveryID = &n
		if err := l.onTransfer(tr); err != nil {
			b.Fatal(err)
		}
		if i%64 == 63 {
			l.flushSettlementsLocked()
			l.awaiting = 0
			c.out = c.out[:0]
		}
	}
}
