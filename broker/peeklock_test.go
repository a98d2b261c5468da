package broker

import (
	"fmt"
	"testing"
	"time"
)

// Peek-lock, as message-transfers-locks-settlement.md describes it.

func TestPeekLockLocksUntilSettled(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{LockDuration: 30 * time.Second})
	e.send("q", msg("a"))
	got := e.receive("q", PeekLock, 5)
	wantBodies(t, got, "a")
	m := got[0]
	if m.LockToken == (LockToken{}) || !m.LockedUntil.Equal(t0.Add(30*time.Second)) || m.DeliveryCount != 0 {
		t.Fatalf("locked message: token %v until %v count %d", m.LockToken, m.LockedUntil, m.DeliveryCount)
	}
	if m.LockToken[6]>>4 != 4 || m.LockToken[8]>>6 != 2 {
		t.Fatalf("lock token %v is not a version-4 UUID", m.LockToken)
	}
	// A locked message is invisible to other receivers.
	if got := e.receive("q", PeekLock, 5); len(got) != 0 {
		t.Fatalf("locked message delivered again: %q", bodies(got))
	}
	e.must(e.b.Complete(e.ctx, "q", m.LockToken))
	wantErr(t, e.b.Complete(e.ctx, "q", m.LockToken), ErrLockLost)
	if ri := e.info("q"); ri.TotalMessageCount != 0 || ri.SizeInBytes != 0 {
		t.Fatalf("after complete: %+v", ri)
	}
}

func TestAbandonRedeliversWithDeliveryCountAndModifiedProperties(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", &Message{Body: []byte("a"), Properties: map[string]any{"k": "v"}})
	m := e.receive("q", PeekLock, 1)[0]
	e.must(e.b.Abandon(e.ctx, "q", map[string]any{"hello": "world"}, m.LockToken))
	r := e.receive("q", PeekLock, 1)[0]
	if r.DeliveryCount != 1 || r.Properties["hello"] != "world" || r.Properties["k"] != "v" || !r.PropertiesModified {
		t.Fatalf("redelivered: count %d props %v modified %v", r.DeliveryCount, r.Properties, r.PropertiesModified)
	}
	if r.LockToken == m.LockToken {
		t.Fatal("a new delivery reuses the lock token")
	}
	if m.Properties["hello"] != nil {
		t.Fatal("abandon changed the earlier delivered copy")
	}
}

func TestLockExpiryRedeliversAndCountsADelivery(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{LockDuration: 10 * time.Second})
	e.send("q", msg("a"))
	c, s := e.consumer("q", PeekLock)
	c.AddCredit(1)
	m := s.take()[0]
	e.clk.Advance(9 * time.Second)
	if got := s.take(); len(got) != 0 {
		t.Fatal("redelivered before the lock expired")
	}
	until, err := e.b.RenewLock(e.ctx, "q", m.LockToken)
	e.must(err)
	if !until.Equal(t0.Add(19 * time.Second)) {
		t.Fatalf("renewed until %v", until)
	}
	e.clk.Advance(9 * time.Second)
	c.AddCredit(1)
	if got := s.take(); len(got) != 0 {
		t.Fatal("redelivered before the renewed lock expired")
	}
	e.clk.Advance(time.Second)
	got := s.take()
	wantBodies(t, got, "a")
	if got[0].DeliveryCount != 1 {
		t.Fatalf("delivery count %d, want 1", got[0].DeliveryCount)
	}
	wantErr(t, e.b.Complete(e.ctx, "q", m.LockToken), ErrLockLost)
	_, err = e.b.RenewLock(e.ctx, "q", m.LockToken)
	wantErr(t, err, ErrLockLost)
	e.must(e.b.Complete(e.ctx, "q", got[0].LockToken))
}

func TestMaxDeliveryCountDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxDeliveryCount: 3})
	e.send("q", msg("poison"))
	for i := range 3 {
		got := e.receive("q", PeekLock, 1)
		if len(got) != 1 || got[0].DeliveryCount != uint32(i) {
			t.Fatalf("attempt %d: %v", i, got)
		}
		e.must(e.b.Abandon(e.ctx, "q", nil, got[0].LockToken))
	}
	if got := e.receive("q", PeekLock, 1); len(got) != 0 {
		t.Fatal("message still in the queue after MaxDeliveryCount")
	}
	dl := e.receive("q/$DeadLetterQueue", PeekLock, 1)
	wantBodies(t, dl, "poison")
	d := dl[0]
	if d.Properties[PropDeadLetterReason] != ReasonMaxDeliveryCountExceeded ||
		d.Properties[PropDeadLetterErrorDescription] != "Message could not be consumed after 3 delivery attempts." {
		t.Fatalf("dead-letter properties %v", d.Properties)
	}
	if d.DeliveryCount != 3 {
		t.Fatalf("dead-lettered delivery count %d, want 3 (moving does not count)", d.DeliveryCount)
	}
	// Abandon in the dead-letter queue does not count deliveries.
	e.must(e.b.Abandon(e.ctx, "q/$deadletterqueue", nil, d.LockToken))
	if again := e.receive("q/$DeadLetterQueue", PeekLock, 1); again[0].DeliveryCount != 3 {
		t.Fatalf("count after abandon in DLQ %d", again[0].DeliveryCount)
	}
}

func TestSettlementWithUnknownTokenOrPath(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	wantErr(t, e.b.Complete(e.ctx, "q", LockToken{1}), ErrLockLost)
	wantErr(t, e.b.Complete(e.ctx, "nope", LockToken{1}), ErrNotFound)
	wantErr(t, e.b.Complete(e.ctx, "bad name", LockToken{1}), ErrInvalidArgument)
	_, err := e.b.RenewLock(e.ctx, "q", LockToken{1})
	wantErr(t, err, ErrLockLost)
}

func TestCloseLeavesLocksOrAbandons(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	c, s := e.consumer("q", PeekLock)
	c.AddCredit(1)
	kept := s.take()[0]
	c.Close()
	// Still locked after Close: settle it from anywhere.
	got := e.receive("q", PeekLock, 5)
	if len(got) != 1 || string(got[0].Body) != "b" {
		t.Fatalf("got %q", bodies(got))
	}
	e.must(e.b.Complete(e.ctx, "q", kept.LockToken))
	e.must(e.b.Abandon(e.ctx, "q", nil, got[0].LockToken))

	e.send("q", msg("c"))
	s2 := &sink{}
	c2, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: s2.deliver, AbandonOnClose: true})
	e.must(err)
	c2.AddCredit(5)
	c2.Close()
	wantBodies(t, s2.take(), "b", "c")
	got = e.receive("q", PeekLock, 5)
	wantBodies(t, got, "b", "c")
	if got[0].DeliveryCount != 1 || got[1].DeliveryCount != 0 {
		t.Fatalf("abandon-on-close counted a delivery: %d", got[0].DeliveryCount)
	}
}

// Closing a consumer with AbandonOnClose leaves alone a message whose
// settlement is committing: the settlement decides where it goes. When the
// settlement fails, the message is returned, not left locked to the
// closed consumer.
func TestAbandonOnCloseLeavesACommittingSettlementAlone(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("settlement fails %v", fail), func(t *testing.T) {
			e, g := newGatedEnv(t, failWith(fail))
			e.queue("q", QueueProperties{})
			e.send("q", msg("a"))
			s := &sink{}
			c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: s.deliver, AbandonOnClose: true})
			e.must(err)
			c.AddCredit(1)
			m := s.takeN(t, 1)[0]
			g.arm()
			done := make(chan error, 1)
			go func() { done <- e.b.Complete(e.ctx, "q", m.LockToken) }()
			<-g.entered
			c.Close()
			if got := e.receive("q", PeekLock, 5); len(got) != 0 {
				t.Fatalf("delivered %q while its completion was committing", bodies(got))
			}
			g.release <- struct{}{}
			err = <-done
			if fail != (err != nil) {
				t.Fatalf("Complete: %v, want failure %v", err, fail)
			}
			mustHoldInvariants(t, e.b)
			got := e.receive("q", PeekLock, 5)
			if !fail {
				if len(got) != 0 || e.info("q").TotalMessageCount != 0 {
					t.Fatalf("completed message still there: delivered %q", bodies(got))
				}
				return
			}
			wantBodies(t, got, "a")
			if got[0].DeliveryCount != 0 {
				t.Fatalf("returned with delivery count %d, want 0", got[0].DeliveryCount)
			}
			wantErr(t, e.b.Complete(e.ctx, "q", m.LockToken), ErrLockLost)
		})
	}
}

// A message whose TTL passed while it was locked expires once closing its
// consumer with AbandonOnClose returns it.
func TestAbandonOnCloseExpiresAMessageWhoseTTLPassed(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{LockDuration: 5 * time.Minute})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: time.Minute})
	s := &sink{}
	c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: s.deliver, AbandonOnClose: true})
	e.must(err)
	c.AddCredit(1)
	s.takeN(t, 1)
	e.clk.Advance(2 * time.Minute) // the expiry comes due while it is locked
	c.Close()
	mustHoldInvariants(t, e.b)
	e.clk.Advance(0)
	if ri := e.info("q"); ri.TotalMessageCount != 0 {
		t.Fatalf("runtime %+v: the expired message is still there", ri)
	}
}

func TestSettleManyTokensAllOrNothing(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"), msg("c"))
	got := e.receive("q", PeekLock, 3)
	wantErr(t, e.b.Complete(e.ctx, "q", got[0].LockToken, LockToken{9}), ErrLockLost)
	wantErr(t, e.b.Complete(e.ctx, "q", got[0].LockToken, got[0].LockToken), ErrInvalidArgument)
	wantErr(t, e.b.Complete(e.ctx, "q"), ErrInvalidArgument)
	if ri := e.info("q"); ri.ActiveMessageCount != 3 {
		t.Fatalf("a refused batch settled something: %+v", ri)
	}
	e.must(e.b.Complete(e.ctx, "q", got[0].LockToken, got[1].LockToken))
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "", nil, got[2].LockToken))
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
}

// Deliver may settle synchronously: the broker holds no lock while calling it.
func TestDeliverMaySettleSynchronously(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	var c *Consumer
	n := 0
	c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: func(m *Message) {
		n++
		e.must(e.b.Complete(e.ctx, "q", m.LockToken))
		c.AddCredit(1)
	}})
	e.must(err)
	c.AddCredit(1)
	e.send("q", msg("a"), msg("b"), msg("c"))
	if n != 3 || e.info("q").TotalMessageCount != 0 {
		t.Fatalf("delivered %d, runtime %+v", n, e.info("q"))
	}
}
