package broker

import (
	"errors"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Under concurrent producers, consumers and settlements every message is
// completed exactly once and the queue ends empty (run with -race).
func TestConcurrentSendReceiveSettle(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxDeliveryCount: 100})
	const producers, perProducer, consumers = 8, 200, 4
	total := producers * perProducer
	var mu sync.Mutex
	completed := map[string]int{}
	done := make(chan struct{})
	var cs []*Consumer
	var wg sync.WaitGroup
	for i := range consumers {
		work := make(chan *Message, 16)
		mode := PeekLock
		if i == 0 {
			mode = ReceiveAndDelete
		}
		c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Mode: mode, Deliver: func(m *Message) { work <- m }})
		e.must(err)
		cs = append(cs, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				select {
				case m := <-work:
					n++
					if mode == PeekLock && n%5 == 0 {
						e.check(e.b.Abandon(e.ctx, "q", nil, m.LockToken))
					} else {
						if mode == PeekLock {
							e.check(e.b.Complete(e.ctx, "q", m.LockToken))
						}
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
		c.AddCredit(16)
	}
	var pw sync.WaitGroup
	for p := range producers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := range perProducer {
				e.check(e.b.Send(e.ctx, "q", []*Message{msg(fmt.Sprint(p, "-", i))}))
			}
		}()
	}
	pw.Wait()
	<-done
	wg.Wait()
	for _, c := range cs {
		c.Close()
	}
	for k, n := range completed {
		if n != 1 {
			t.Fatalf("message %s completed %d times", k, n)
		}
	}
	if ri := e.info("q"); ri.TotalMessageCount != 0 || ri.SizeInBytes != 0 {
		t.Fatalf("queue not empty: %+v", ri)
	}
}

// Session consumers working in parallel see every session in order.
func TestConcurrentSessionsKeepFIFO(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	const sessions, per = 50, 20
	var pw sync.WaitGroup
	for s := range sessions {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := range per {
				e.check(e.b.Send(e.ctx, "s", []*Message{sessMsg(strconv.Itoa(s), strconv.Itoa(i))}))
			}
		}()
	}
	pw.Wait()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string][]string{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ch := make(chan *Message, per)
				c, err := e.b.AcceptNextSession(e.ctx, "s", 0, ConsumerOptions{Deliver: func(m *Message) { ch <- m }})
				if err != nil {
					return
				}
				c.AddCredit(per)
				var toks []LockToken
				for range per {
					m := <-ch
					mu.Lock()
					got[m.SessionID] = append(got[m.SessionID], string(m.Body))
					mu.Unlock()
					toks = append(toks, m.LockToken)
				}
				e.check(e.b.Complete(e.ctx, "s", toks...))
				c.Close()
			}
		}()
	}
	wg.Wait()
	if len(got) != sessions {
		t.Fatalf("%d sessions received", len(got))
	}
	for s, bs := range got {
		for i, b := range bs {
			if b != strconv.Itoa(i) {
				t.Fatalf("session %s out of order: %v", s, bs)
			}
		}
	}
}

// check reports err from a goroutine other than the test's.
func (e *env) check(err error) {
	if err != nil {
		e.t.Error(err)
	}
}

// Settlements made at once by many goroutines are combined into rounds;
// each call still gets its own answer: a lost lock fails only its call.
// Deliver settles synchronously, which must not wait on its own round.
func TestConcurrentSettlementsGetTheirOwnAnswers(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxDeliveryCount: 100})
	const n = 400
	for i := range n {
		e.send("q", msg(fmt.Sprint(i)))
	}
	var settleErrs, lost, renewed sync.WaitGroup
	var mu sync.Mutex
	var fails []error
	record := func(err error) {
		if err != nil {
			mu.Lock()
			fails = append(fails, err)
			mu.Unlock()
		}
	}
	got := 0
	var c *Consumer
	c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: func(m *Message) {
		got++
		switch got % 4 {
		case 0: // synchronously, from Deliver
			record(e.b.Complete(e.ctx, "q", m.LockToken))
		case 1: // complete, then complete again: the second call's lock is lost
			lost.Add(1)
			go func() {
				defer lost.Done()
				record(e.b.Complete(e.ctx, "q", m.LockToken))
				if err := e.b.Complete(e.ctx, "q", m.LockToken); !errors.Is(err, ErrLockLost) {
					record(fmt.Errorf("second complete: %v, want ErrLockLost", err))
				}
			}()
		case 2: // renew, then complete
			renewed.Add(1)
			go func() {
				defer renewed.Done()
				_, err := e.b.RenewLock(e.ctx, "q", m.LockToken)
				record(err)
				record(e.b.Complete(e.ctx, "q", m.LockToken))
			}()
		default:
			settleErrs.Add(1)
			go func() {
				defer settleErrs.Done()
				record(e.b.Complete(e.ctx, "q", m.LockToken))
			}()
		}
		c.AddCredit(1)
	}})
	e.must(err)
	for range 8 {
		go c.AddCredit(8)
	}
	poll.Wait(10*time.Second, func() bool { return e.info("q").TotalMessageCount == 0 }) // asserted below
	settleErrs.Wait()
	lost.Wait()
	renewed.Wait()
	c.Close()
	if len(fails) > 0 {
		t.Fatalf("%d settlements failed, first: %v", len(fails), fails[0])
	}
	if ri := e.info("q"); ri.TotalMessageCount != 0 {
		t.Fatalf("queue not empty: %+v", ri)
	}
}
