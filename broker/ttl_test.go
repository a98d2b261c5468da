package broker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
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

// failingStore fails every commit while failing is set, and counts them.
type failingStore struct {
	*memstore.Store
	failing atomic.Bool
	commits atomic.Int64
}

func (f *failingStore) Commit(ctx context.Context, b *store.Batch) error {
	if f.failing.Load() {
		f.commits.Add(1)
		return errCommitInjected
	}
	return f.Store.Commit(ctx, b)
}

// An expiry whose commit fails is tried again a second later, not at once:
// a store that keeps failing (a full disk) must not be retried in a loop.
func TestFailedExpiryIsRetriedASecondLater(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := &failingStore{Store: memstore.New()}
	b, err := Open(context.Background(), fs, Options{Clock: clk, Rand: seededRand{rand.NewChaCha8([32]byte{7})}, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	must(t, b.CreateQueue(ctx, "q", QueueProperties{DeadLetteringOnMessageExpiration: true}))
	must(t, b.Send(ctx, "q", []*Message{{Body: []byte("x"), TimeToLive: time.Minute}}))
	fs.failing.Store(true)
	advanced := make(chan struct{})
	go func() { clk.Advance(time.Minute + 10*time.Second); close(advanced) }()
	poll.Until(t, 10*time.Second, "the clock advanced past the expiry", func() bool {
		select {
		case <-advanced:
			return true
		default:
			return false
		}
	})
	// Due at 1m, then tried every second until 1m10s: 11 attempts.
	if n := fs.commits.Load(); n < 10 || n > 12 {
		t.Fatalf("%d commits of the expiry in 10 seconds, want about 11", n)
	}
	fs.failing.Store(false)
	clk.Advance(time.Second)
	poll.Until(t, 10*time.Second, "the message dead-lettered once the store works", func() bool {
		qi, err := b.GetQueue(ctx, "q")
		return err == nil && qi.Runtime.DeadLetterMessageCount == 1 && qi.Runtime.ActiveMessageCount == 0
	})
}
