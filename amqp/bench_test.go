package amqp_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/frames"
)

// sink accepts every link the peer sends on and settles every delivery
// with accepted at once: the engine's cost without a broker behind it.
type sink struct {
	amqp.BaseHandler
	n atomic.Int64
}

func (s *sink) AttachSender(*amqp.Sender) (amqp.SenderHandler, error) {
	return nil, amqp.NewError(amqp.CondNotImplemented, "sink only receives")
}

func (s *sink) AttachReceiver(*amqp.Receiver) (amqp.ReceiverHandler, error) { return s, nil }

var accepted = &frames.Accepted{}

func (s *sink) Transfer(r *amqp.Receiver, d amqp.Delivery) {
	s.n.Add(1)
	if !d.Settled {
		_ = r.Settle(d.ID, accepted)
	}
}

func (s *sink) Detach(*amqp.Receiver, error) {}

// benchSenders connects conns go-amqp connections to one sink engine and
// returns links senders on each.
func benchSenders(b *testing.B, conns, links int, mode goamqp.SenderSettleMode) ([]*goamqp.Sender, *sink) {
	h := &sink{}
	addr := serve(b, amqp.NewServer(amqp.Config{Handler: h, LinkCredit: 1000}))
	ctx := context.Background()
	var snds []*goamqp.Sender
	for range conns {
		c, err := goamqp.Dial(ctx, "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		sess, err := c.NewSession(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range links {
			snd, err := sess.NewSender(ctx, "sink", &goamqp.SenderOptions{SettlementMode: mode.Ptr()})
			if err != nil {
				b.Fatal(err)
			}
			snds = append(snds, snd)
		}
	}
	return snds, h
}

// sendAll sends b.N 1 KiB messages from goroutines spread over the senders.
func sendAll(b *testing.B, snds []*goamqp.Sender, goroutines int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snd := snds[g%len(snds)]
			msg := goamqp.NewMessage(make([]byte, 1024))
			for next.Add(1) <= int64(b.N) {
				if err := snd.Send(ctx, msg, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkGoAMQPToSinkPresettled: pre-settled 1 KiB messages from go-amqp
// (whose Send returns once its writer has written the frame), engine to a
// sink, over 1 or 4 connections of 1 or 4 links with 1 or more goroutines
// calling Send.
func BenchmarkGoAMQPToSinkPresettled(b *testing.B) {
	for _, v := range []struct{ conns, links, goroutines int }{{1, 1, 1}, {1, 1, 16}, {4, 1, 16}, {4, 4, 64}} {
		b.Run(fmt.Sprintf("conns=%d/links=%d/goroutines=%d", v.conns, v.links, v.goroutines), func(b *testing.B) {
			snds, h := benchSenders(b, v.conns, v.links, goamqp.SenderSettleModeSettled)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			sendAll(b, snds, v.goroutines)
			waitFor(b, func() bool { return h.n.Load() >= int64(b.N) }, "sink received all")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkGoAMQPToSinkUnsettled: 256 sends in flight (256 goroutines each
// waiting for the engine's accepted disposition), over 1 or 4 connections.
func BenchmarkGoAMQPToSinkUnsettled(b *testing.B) {
	for _, conns := range []int{1, 4} {
		b.Run(fmt.Sprintf("conns=%d/inflight=256", conns), func(b *testing.B) {
			snds, _ := benchSenders(b, conns, 1, goamqp.SenderSettleModeUnsettled)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			sendAll(b, snds, 256)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkRawToSink measures the engine alone on the ingest path: a
// frame-level client writes pre-encoded 1 KiB transfers in batches, as fast
// as credit and window allow, and a sink settles them.
func BenchmarkRawToSink(b *testing.B) {
	for _, settled := range []bool{true, false} {
		b.Run(fmt.Sprintf("presettled=%v", settled), func(b *testing.B) {
			h := &sink{}
			addr := serve(b, amqp.NewServer(amqp.Config{Handler: h, LinkCredit: 1000}))
			c := rawDial(b, addr)
			c.open(nil)
			bg := c.begin(nil)
			c.attachSender(0, "sink", func(a *frames.Attach) {
				if !settled {
					a.SndSettleMode = frames.SenderSettleUnsettled
				}
			})
			payload := make([]byte, 1024)
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			flood(b, c, bg.IncomingWindow, uint32(b.N), payload, settled)
			waitFor(b, func() bool { return h.n.Load() >= int64(b.N) }, "sink received all")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// source hands the benchmark the Sender of the one link the peer attaches.
type source struct {
	amqp.BaseHandler
	snd chan *amqp.Sender
}

func (s *source) AttachSender(snd *amqp.Sender) (amqp.SenderHandler, error) {
	s.snd <- snd
	return s, nil
}

func (s *source) AttachReceiver(*amqp.Receiver) (amqp.ReceiverHandler, error) {
	return nil, amqp.NewError(amqp.CondNotImplemented, "source only sends")
}

func (s *source) Flow(*amqp.Sender, amqp.Flow)       {}
func (s *source) Outcome(*amqp.Sender, amqp.Outcome) {}
func (s *source) Detach(*amqp.Sender, error)         {}

// BenchmarkEngineSend measures the engine's outgoing path: the application
// calls Sender.Send with pre-settled 1 KiB messages; a frame-level client
// reads them and keeps credit topped up.
func BenchmarkEngineSend(b *testing.B) {
	h := &source{snd: make(chan *amqp.Sender, 1)}
	addr := serve(b, amqp.NewServer(amqp.Config{Handler: h}))
	c := rawDial(b, addr)
	c.open(nil)
	c.begin(&frames.Begin{IncomingWindow: 1 << 30, OutgoingWindow: 1 << 20, HandleMax: 10})
	c.attachReceiver(0, "src", func(a *frames.Attach) { a.SndSettleMode = frames.SenderSettleSettled })
	snd := <-h.snd
	const credit = 4096
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 1 << 30, OutgoingWindow: 1 << 20,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(credit)})
	done := make(chan error, 1)
	go func() {
		// Read transfers; grant more credit every half window.
		var got uint32
		for got < uint32(b.N) {
			_, body, err := c.next(30 * time.Second)
			if err != nil {
				done <- err
				return
			}
			if _, ok := body.(*frames.Transfer); ok {
				got++
				if got%(credit/2) == 0 {
					c.write(0, &frames.Flow{NextIncomingID: u32(got), IncomingWindow: 1 << 30, OutgoingWindow: 1 << 20,
						Handle: u32(0), DeliveryCount: u32(got), LinkCredit: u32(credit)})
				}
			}
		}
		done <- nil
	}()
	msg := &amqp.Message{Settled: true, Payload: make([]byte, 1024)}
	ctx := context.Background()
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := snd.Send(ctx, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
