package broker

import (
	"testing"
	"time"
)

// Expiration, after message-expiration.md.

func TestExpiredMessagesAreDroppedOrDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.queue("drop", QueueProperties{})
	e.queue("keep", QueueProperties{DeadLetteringOnMessageExpiration: true})
	e.send("drop", &Message{Body: []byte("a"), TimeToLive: time.Minute})
	e.send("keep", &Message{Body: []byte("a"), TimeToLive: time.Minute}, msg("forever"))
	e.clk.Advance(time.Minute)
	if ri := e.info("drop"); ri.TotalMessageCount != 0 {
		t.Fatalf("expired message kept: %+v", ri)
	}
	if ri := e.info("keep"); ri.ActiveMessageCount != 1 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
	dl := e.receive("keep/$DeadLetterQueue", ReceiveAndDelete, 5)
	wantBodies(t, dl, "a")
	if dl[0].Properties[PropDeadLetterReason] != ReasonTTLExpired {
		t.Fatalf("reason %v", dl[0].Properties)
	}
}

func TestEntityDefaultTTLIsACeiling(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{DefaultMessageTimeToLive: time.Minute})
	e.send("q", &Message{Body: []byte("long"), TimeToLive: time.Hour}, msg("default"), &Message{Body: []byte("short"), TimeToLive: time.Second})
	peek := mustPeek(e, "q")
	for i, want := range []time.Duration{time.Minute, time.Minute, time.Second} {
		if got := peek[i].ExpiresAt.Sub(peek[i].EnqueuedTime); got != want {
			t.Fatalf("message %d lives %v, want %v", i, got, want)
		}
	}
	e.clk.Advance(time.Second)
	wantBodies(t, mustPeek(e, "q"), "long", "default")
	e.clk.Advance(time.Minute)
	if n := len(mustPeek(e, "q")); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

func TestExpiryIsIgnoredWhileLockedAndAppliesOnAbandon(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: 10 * time.Second})
	m := e.receive("q", PeekLock, 1)[0]
	e.clk.Advance(20 * time.Second)
	if ri := e.info("q"); ri.ActiveMessageCount != 1 {
		t.Fatalf("locked message expired: %+v", ri)
	}
	e.must(e.b.Abandon(e.ctx, "q", nil, m.LockToken))
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("after abandon %+v", ri)
	}
}

func TestDeferredMessagesDoNotExpire(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: 10 * time.Second})
	m := e.receive("q", PeekLock, 1)[0]
	e.must(e.b.Defer(e.ctx, "q", nil, m.LockToken))
	e.clk.Advance(time.Hour)
	if ri := e.info("q"); ri.DeferredMessageCount != 1 || ri.DeadLetterMessageCount != 0 {
		t.Fatalf("runtime %+v", ri)
	}
}
