package broker

import (
	"fmt"
	"sync"

	"github.com/busbar-io/busbar/internal/poll"
	"testing"
	"time"
)

// hot is how many messages of q the index holds, after background paging.
func (e *env) hot(q string) int {
	e.t.Helper()
	e.b.bg.Wait()
	x, err := e.b.lookup(q)
	e.must(err)
	x.q.mu.Lock()
	defer x.q.mu.Unlock()
	return len(x.q.msgs)
}

func numbered(prefix string, from, n int) []*Message {
	ms := make([]*Message, n)
	for i := range ms {
		ms[i] = msg(fmt.Sprintf("%s%05d", prefix, from+i))
	}
	return ms
}

// A backlog beyond the window stays on disk, is counted, survives a
// restart (counted again in the background) and is received in order.
func TestPagingKeepsOrderAcrossRestart(t *testing.T) {
	e := newPagedEnv(t, 10)
	e.queue("q", QueueProperties{})
	const total = 1000
	for i := 0; i < total; i += 7 {
		e.send("q", numbered("m", i, min(7, total-i))...)
	}
	if got := e.info("q").ActiveMessageCount; got != total {
		t.Fatalf("active count %d, want %d", got, total)
	}
	if got := e.hot("q"); got != 10 {
		t.Fatalf("%d messages in memory, want the window of 10", got)
	}
	e.restart()
	if got := e.hot("q"); got != 10 {
		t.Fatalf("after a restart: %d messages in memory, want the window of 10", got)
	}
	if ri := e.info("q"); ri.ActiveMessageCount != total || ri.TotalMessageCount != total {
		t.Fatalf("after a restart: active %d, total %d, want %d", ri.ActiveMessageCount, ri.TotalMessageCount, total)
	}
	var got []*Message
	for len(got) < total {
		ms := e.receive("q", ReceiveAndDelete, 33)
		if len(ms) == 0 {
			t.Fatalf("received nothing after %d of %d", len(got), total)
		}
		got = append(got, ms...)
	}
	for i, m := range got {
		if want := fmt.Sprintf("m%05d", i); string(m.Body) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Body, want)
		}
	}
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.SizeInBytes != 0 {
		t.Fatalf("drained queue: active %d, size %d", ri.ActiveMessageCount, ri.SizeInBytes)
	}
}

// Producers, peek-lock consumers that abandon now and then, and a window
// far smaller than the backlog: every message is completed exactly once
// (run with -race; the invariants are checked at cleanup).
func TestPagingConcurrent(t *testing.T) {
	e := newPagedEnv(t, 16)
	e.queue("q", QueueProperties{MaxDeliveryCount: 100})
	const producers, batches, per, consumers = 6, 40, 5, 3
	total := producers * batches * per
	var mu sync.Mutex
	completed := map[string]int{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range consumers {
		work := make(chan *Message, 64)
		c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Mode: PeekLock, Deliver: func(m *Message) { work <- m }})
		e.must(err)
		c.AddCredit(8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			n := 0
			for {
				select {
				case m := <-work:
					if n++; n%7 == 0 {
						e.check(e.b.Abandon(e.ctx, "q", nil, m.LockToken))
					} else {
						e.check(e.b.Complete(e.ctx, "q", m.LockToken))
						mu.Lock()
						completed[string(m.Body)]++
						if len(completed) == total {
							close(done)
						}
						mu.Unlock()
					}
					c.AddCredit(1)
				case <-done:
					return
				}
			}
		}()
	}
	var pw sync.WaitGroup
	for p := range producers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for b := range batches {
				e.check(e.b.Send(e.ctx, "q", numbered(fmt.Sprintf("p%d-", p), b*per, per)))
			}
		}()
	}
	pw.Wait()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("completed %d of %d", len(completed), total)
	}
	wg.Wait()
	for k, n := range completed {
		if n != 1 {
			t.Errorf("%s completed %d times", k, n)
		}
	}
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.TotalMessageCount != 0 {
		t.Fatalf("queue not empty: %+v", ri)
	}
	x, _ := e.b.lookup("q")
	x.q.mu.Lock()
	paged := x.q.pg.pagedIn
	x.q.mu.Unlock()
	if paged == 0 {
		t.Fatal("nothing was paged in: the test did not exercise paging")
	}
	t.Logf("%d of %d messages were paged in", paged, total)
}

// A cold message whose TTL passed is dead-lettered when a receiver reaches
// it, as Service Bus does; one in memory at its TTL.
func TestPagedExpiry(t *testing.T) {
	e := newPagedEnv(t, 2)
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true})
	ms := numbered("m", 0, 10)
	for _, m := range ms {
		m.TimeToLive = time.Minute
	}
	e.send("q", ms...)
	e.clk.Advance(2 * time.Minute)
	e.b.bg.Wait()
	// Those in memory expired at their TTL; as they left, page-ins may
	// have brought more in, which expired as they came.
	if ri := e.info("q"); ri.ActiveMessageCount+ri.DeadLetterMessageCount != 10 || ri.DeadLetterMessageCount < 2 {
		t.Fatalf("before a receive: active %d, dead letters %d; want at least the 2 in memory expired, 10 in all", ri.ActiveMessageCount, ri.DeadLetterMessageCount)
	}
	if got := e.receive("q", PeekLock, 5); len(got) != 0 {
		t.Fatalf("received %q, all expired", bodies(got))
	}
	poll.UntilNil(t, 10*time.Second, "every message dead-lettered", func() error {
		if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.DeadLetterMessageCount != 10 {
			return fmt.Errorf("active %d, dead letters %d; want 0 and 10", ri.ActiveMessageCount, ri.DeadLetterMessageCount)
		}
		return nil
	})
	wantBodies(t, e.receive("q/$DeadLetterQueue", ReceiveAndDelete, 20),
		"m00000", "m00001", "m00002", "m00003", "m00004", "m00005", "m00006", "m00007", "m00008", "m00009")
}

// After a restart, scheduled and deferred messages beyond the window are
// found (by the background count, or directly by sequence number).
func TestPagingRestartFindsScheduledAndDeferred(t *testing.T) {
	e := newPagedEnv(t, 3)
	e.queue("q", QueueProperties{})
	e.send("q", numbered("a", 0, 10)...)
	at := t0.Add(time.Hour)
	seqs, err := e.b.Schedule(e.ctx, "q", at, numbered("s", 0, 2))
	e.must(err)
	e.send("q", numbered("b", 0, 10)...)
	e.restart()
	e.b.bg.Wait()
	if ri := e.info("q"); ri.ActiveMessageCount != 20 || ri.ScheduledMessageCount != 2 {
		t.Fatalf("after a restart: active %d, scheduled %d; want 20 and 2", ri.ActiveMessageCount, ri.ScheduledMessageCount)
	}
	e.must(e.b.CancelScheduled(e.ctx, "q", seqs[:1]))
	e.clk.Advance(2 * time.Hour)
	var got []string
	for {
		ms := e.receive("q", ReceiveAndDelete, 7)
		if len(ms) == 0 {
			break
		}
		got = append(got, bodies(ms)...)
	}
	want := append(append(bodies(numbered("a", 0, 10)), bodies(numbered("b", 0, 10))...), "s00001")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("received %q, want %q", got, want)
	}
}

// Purge reaches the messages on disk.
func TestPagingPurge(t *testing.T) {
	e := newPagedEnv(t, 5)
	e.queue("q", QueueProperties{})
	e.send("q", numbered("m", 0, 100)...)
	n, err := e.b.Purge(e.ctx, "q", time.Time{})
	e.must(err)
	if n != 100 {
		t.Fatalf("purged %d, want 100", n)
	}
	if ri := e.info("q"); ri.TotalMessageCount != 0 || ri.SizeInBytes != 0 {
		t.Fatalf("after the purge: %+v", ri)
	}
}
