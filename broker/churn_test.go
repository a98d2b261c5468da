package broker

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
)

// Session churn is cheap: accepting a session and closing it again costs
// no goroutine, no timer and no store commit of its own.
func TestSessionAcceptAndCloseCostNoCommitGoroutineOrTimer(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	for i := range 100 {
		e.send("s", sessMsg(strconv.Itoa(i), "m"))
	}
	commits := e.st.Stats().Commits
	goroutines := runtime.NumGoroutine()
	timers := e.b.wheel.len()
	var cs []*Consumer
	for i := range 50 {
		c, err := e.b.AcceptNextSession(e.ctx, "s", 0, ConsumerOptions{Deliver: func(*Message) {}})
		e.must(err)
		cs = append(cs, c)
		c2, _ := e.accept("s", "named-"+strconv.Itoa(i))
		cs = append(cs, c2)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Fatalf("%d goroutines with 100 sessions accepted, %d before", n, goroutines)
	}
	if n := e.b.wheel.len(); n > timers+1 { // one shared deadline for the session-lock list
		t.Fatalf("%d deadlines with 100 sessions accepted, %d before", n, timers)
	}
	for _, c := range cs {
		e.must(c.Close())
	}
	if n := e.st.Stats().Commits; n != commits {
		t.Fatalf("accepting and closing 100 sessions made %d store commits", n-commits)
	}
}

// BenchmarkSessionChurn accepts the next available session, receives its
// one message, completes it and closes the session, on 4 goroutines: the
// pattern of a consumer working through many short sessions. It reports
// sessions/s and the accept-next latency (p50, p99), on Pebble: every
// completion waits for its fsync (shared by the four workers).
func BenchmarkSessionChurn(b *testing.B) {
	const sessions, workers = 20000, 4
	for range b.N {
		b.StopTimer()
		br := openBench(b, benchStores[0].open(b), clock.Real())
		ctx := context.Background()
		if err := br.CreateQueue(ctx, "s", QueueProperties{RequiresSession: true}); err != nil {
			b.Fatal(err)
		}
		batch := make([]*Message, 0, 1000)
		for s := range sessions {
			batch = append(batch, &Message{SessionID: strconv.Itoa(s), Body: []byte("x")})
			if len(batch) == cap(batch) {
				if err := br.Send(ctx, "s", batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		b.StartTimer()
		start := time.Now()
		lat := make(chan []time.Duration, workers)
		for range workers {
			go func() {
				var ds []time.Duration
				for {
					ch := make(chan *Message, 1)
					t0 := time.Now()
					c, err := br.AcceptNextSession(ctx, "s", 0, ConsumerOptions{Deliver: func(m *Message) { ch <- m }})
					if err != nil {
						lat <- ds
						return
					}
					ds = append(ds, time.Since(t0))
					c.AddCredit(1)
					m := <-ch
					if err := br.Complete(ctx, "s", m.LockToken); err != nil {
						b.Error(err)
					}
					c.Close()
				}
			}()
		}
		var all []time.Duration
		for range workers {
			all = append(all, <-lat...)
		}
		el := time.Since(start)
		if len(all) != sessions {
			b.Fatalf("accepted %d sessions, want %d", len(all), sessions)
		}
		slices.Sort(all)
		b.ReportMetric(float64(sessions)/el.Seconds(), "sessions/s")
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "accept-p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "accept-p99-ns")
	}
}
