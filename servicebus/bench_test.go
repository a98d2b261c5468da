package servicebus_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
	"github.com/busbar-io/busbar/store/pebble"
)

// BenchmarkSendReceiveComplete measures the hot path in-process with
// go-amqp as the client: 1 KiB messages sent (unsettled, each awaiting the
// broker's accepted), received in peek-lock and completed (each awaiting
// the settled disposition), by 32 senders and 32 receivers on one
// connection each. With memstore (no fsync) the figure is the protocol
// layers' cost; with pebble it includes the disk's fsyncs (group commit).
// Allocations include the client's.
func BenchmarkSendReceiveComplete(b *testing.B) {
	b.Run("memstore", func(b *testing.B) { benchSendReceiveComplete(b, memstore.New()) })
	b.Run("pebble", func(b *testing.B) {
		st, err := pebble.Open(b.TempDir(), pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		benchSendReceiveComplete(b, st)
	})
}

func benchSendReceiveComplete(b *testing.B, st store.Store) {
	e := newEnv(b, envOptions{store: st})
	e.queue("bench", broker.QueueProperties{})
	ctx := context.Background()
	dial := func() *goamqp.Session {
		c, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(rootKeyName, rootKey)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		s, err := c.NewSession(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	snd, err := dial().NewSender(ctx, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	rcv, err := dial().NewReceiver(ctx, "bench", &goamqp.ReceiverOptions{
		SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: 500,
	})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	const workers = 32
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var toSend, toRecv atomic.Int64
	toSend.Store(int64(b.N))
	toRecv.Store(int64(b.N))
	for range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for toSend.Add(-1) >= 0 {
				if err := snd.Send(ctx, goamqp.NewMessage(body), nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for toRecv.Add(-1) >= 0 {
				m, err := rcv.Receive(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if err := rcv.AcceptMessage(ctx, m); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
	if s := st.Stats(); s.Syncs > 0 {
		b.ReportMetric(float64(s.Commits)/float64(s.Syncs), "commits/sync")
		b.ReportMetric(float64(s.Commits)/float64(b.N), "commits/msg")
	}
}
