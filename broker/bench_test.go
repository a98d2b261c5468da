package broker

import (
	"context"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
	"github.com/busbar-io/busbar/store/pebble"
)

// Benchmarks report msg/s (and other figures) as custom metrics. Run with
// e.g. go test -run XXX -bench . -benchtime 1x ./broker/

type storeKind struct {
	name string
	open func(b *testing.B) store.Store
}

var benchStores = []storeKind{
	{"pebble", func(b *testing.B) store.Store {
		s, err := pebble.Open(b.TempDir(), pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"memstore", func(b *testing.B) store.Store { return memstore.New() }},
}

func openBench(b *testing.B, st store.Store, clk clock.Clock) *Broker {
	br, err := Open(context.Background(), st, Options{Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Close() })
	return br
}

// BenchmarkSendReceiveComplete: 64 producers sending 1 KiB messages (one
// per Send, or batches of 32), 64 peek-lock consumers completing every
// message; completions run concurrently, as dispositions arriving on many
// links do, so that they share group commits.
func BenchmarkSendReceiveComplete(b *testing.B) {
	for _, sk := range benchStores {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/batch=%d", sk.name, batch), func(b *testing.B) {
				benchSendReceiveComplete(b, sk.open(b), batch)
			})
		}
	}
}

func benchSendReceiveComplete(b *testing.B, st store.Store, batch int) {
	br := openBench(b, st, clock.Real())
	ctx := context.Background()
	if err := br.CreateQueue(ctx, "q", QueueProperties{}); err != nil {
		b.Fatal(err)
	}
	const workers, credit = 64, 64
	body := make([]byte, 1024)
	var received atomic.Int64
	done := make(chan struct{})
	total := int64(b.N)
	var consumers []*Consumer
	for range workers {
		var c *Consumer
		c, err := br.NewConsumer(ctx, "q", ConsumerOptions{Deliver: func(m *Message) {
			go func() {
				if err := br.Complete(ctx, "q", m.LockToken); err != nil {
					b.Error(err)
				}
				if received.Add(1) == total {
					close(done)
				}
				c.AddCredit(1)
			}()
		}})
		if err != nil {
			b.Fatal(err)
		}
		consumers = append(consumers, c)
		c.AddCredit(credit)
	}
	b.ResetTimer()
	start := time.Now()
	var pwg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			ms := make([]*Message, 0, batch)
			for {
				ms = ms[:0]
				for len(ms) < batch && next.Add(1) <= total {
					ms = append(ms, &Message{Body: body})
				}
				if len(ms) == 0 {
					return
				}
				if err := br.Send(ctx, "q", ms); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	pwg.Wait()
	<-done
	el := time.Since(start)
	b.StopTimer()
	for _, c := range consumers {
		c.Close()
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
	s := st.Stats()
	if s.Syncs > 0 {
		b.ReportMetric(float64(s.Commits)/float64(s.Syncs), "commits/sync")
	}
}

// BenchmarkSessions: 10,000 sessions × 10 messages, received by 4 session
// consumers (accept next, take the session's 10 messages, checking FIFO,
// complete them in one call), settling synchronously or asynchronously.
// The timed part is the receiving.
func BenchmarkSessions(b *testing.B) {
	for _, sk := range benchStores {
		for _, async := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/async-settle=%v", sk.name, async), func(b *testing.B) {
				benchSessions(b, sk, async)
			})
		}
	}
}

// benchSessions runs BenchmarkSessions; with async each consumer hands the
// session's completion (and close) to a goroutine and accepts the next
// session at once, as a client settling asynchronously does.
func benchSessions(b *testing.B, sk storeKind, async bool) {
	const sessions, perSession, workers = 10000, 10, 4
	for range b.N {
		b.StopTimer()
		br := openBench(b, sk.open(b), clock.Real())
		ctx := context.Background()
		if err := br.CreateQueue(ctx, "s", QueueProperties{RequiresSession: true}); err != nil {
			b.Fatal(err)
		}
		for i := range perSession {
			batch := make([]*Message, 0, sessions)
			for s := range sessions {
				batch = append(batch, &Message{SessionID: strconv.Itoa(s), Body: []byte(strconv.Itoa(i))})
			}
			for len(batch) > 0 {
				n := min(1000, len(batch))
				if err := br.Send(ctx, "s", batch[:n]); err != nil {
					b.Fatal(err)
				}
				batch = batch[n:]
			}
		}
		b.StartTimer()
		start := time.Now()
		var got atomic.Int64
		var wg, settling sync.WaitGroup
		inflight := make(chan struct{}, 256)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ch := make(chan *Message, perSession)
					c, err := br.AcceptNextSession(ctx, "s", 0, ConsumerOptions{Deliver: func(m *Message) { ch <- m }})
					if err != nil {
						return // ErrTimeout: all sessions taken
					}
					c.AddCredit(perSession)
					tokens := make([]LockToken, 0, perSession)
					for i := range perSession {
						m := <-ch
						if string(m.Body) != strconv.Itoa(i) {
							b.Errorf("session %s: message %q at position %d", c.SessionID(), m.Body, i)
						}
						tokens = append(tokens, m.LockToken)
					}
					settle := func() {
						if err := br.Complete(ctx, "s", tokens...); err != nil {
							b.Error(err)
						}
						got.Add(perSession)
						c.Close()
					}
					if !async {
						settle()
						continue
					}
					inflight <- struct{}{}
					settling.Add(1)
					go func() {
						defer settling.Done()
						settle()
						<-inflight
					}()
				}
			}()
		}
		wg.Wait()
		settling.Wait()
		el := time.Since(start)
		if got.Load() != sessions*perSession {
			b.Fatalf("received %d", got.Load())
		}
		b.ReportMetric(float64(sessions*perSession)/el.Seconds(), "msg/s")
	}
}

// BenchmarkScheduled1M schedules 1,000,000 small messages an hour ahead
// and reports the Go heap per scheduled message (the index, deadline heap
// included); then, with those in the deadline heap, it schedules 10,000
// probes spread over two seconds and reports the p50/p99 lateness of their
// delivery to a peek-lock consumer (activation commit included) on the
// real clock.
func BenchmarkScheduled1M(b *testing.B) {
	const n, probes = 1_000_000, 10_000
	for range b.N {
		b.StopTimer()
		st := benchStores[0].open(b)
		br := openBench(b, st, clock.Real())
		ctx := context.Background()
		if err := br.CreateQueue(ctx, "q", QueueProperties{}); err != nil {
			b.Fatal(err)
		}
		late := make([]time.Duration, 0, probes)
		var mu sync.Mutex
		c, err := br.NewConsumer(ctx, "q", ConsumerOptions{Deliver: func(m *Message) {
			d := time.Since(m.ScheduledEnqueueTime)
			mu.Lock()
			late = append(late, d)
			mu.Unlock()
		}})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		far := time.Now().Add(time.Hour)
		start := time.Now()
		batch := make([]*Message, 0, 1000)
		for i := range n {
			batch = append(batch, &Message{Body: []byte("x"), ScheduledEnqueueTime: far.Add(time.Duration(i) * time.Microsecond)})
			if len(batch) == cap(batch) {
				if err := br.Send(ctx, "q", batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		scheduleRate := n / time.Since(start).Seconds()
		br.cache = newMsgCache(br.opts.CacheBytes) // measure the index, not the cache
		runtime.GC()
		runtime.ReadMemStats(&after)
		c.AddCredit(probes)
		b.StartTimer()
		base := time.Now().Add(time.Second)
		for i := range probes / 100 {
			ps := make([]*Message, 100)
			for j := range ps {
				ps[j] = &Message{Body: []byte("p"), ScheduledEnqueueTime: base.Add(time.Duration(i*100+j) * 2 * time.Second / probes)}
			}
			if err := br.Send(ctx, "q", ps); err != nil {
				b.Fatal(err)
			}
		}
		// The probes fire within 2 s of base; a probe still missing long
		// after is a lost scheduled message, not slowness.
		poll.Until(b, time.Minute, "every scheduled probe to fire", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(late) == probes
		})
		b.StopTimer()
		slices.Sort(late)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heapB/msg")
		b.ReportMetric(scheduleRate, "schedule-msg/s")
		b.ReportMetric(float64(late[probes*99/100].Microseconds())/1000, "p99-late-ms")
		b.ReportMetric(float64(late[probes/2].Microseconds())/1000, "p50-late-ms")
		c.Close()
	}
}

// BenchmarkRecovery1M measures Open over a store holding a 1,000,000-message
// backlog (128-byte bodies) in one queue.
func BenchmarkRecovery1M(b *testing.B) {
	const n = 1_000_000
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		st, err := pebble.Open(dir, pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		br, err := Open(context.Background(), st, Options{})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if err := br.CreateQueue(ctx, "q", QueueProperties{}); err != nil {
			b.Fatal(err)
		}
		body := make([]byte, 128)
		batch := make([]*Message, 1000)
		for i := range batch {
			batch[i] = &Message{Body: body}
		}
		for range n / len(batch) {
			if err := br.Send(ctx, "q", batch); err != nil {
				b.Fatal(err)
			}
		}
		br.Close()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		st, err = pebble.Open(dir, pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		start := time.Now()
		br, err = Open(context.Background(), st, Options{})
		el := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// What the open broker keeps (its index, and what the store holds
		// after reading everything once) per message.
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/msg")
		qi, _ := br.GetQueue(ctx, "q")
		if qi.Runtime.ActiveMessageCount != n {
			b.Fatalf("recovered %d messages", qi.Runtime.ActiveMessageCount)
		}
		b.ReportMetric(el.Seconds(), "open-s")
		br.Close()
		st.Close()
	}
}
