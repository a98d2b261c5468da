package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store/memstore"
)

// Recovery: close and reopen the store; everything acknowledged is back,
// locks are not.

func TestRecoveryRestoresEverythingAcknowledged(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{LockDuration: 30 * time.Second, MaxDeliveryCount: 5, UserMetadata: "meta"})
	e.queue("s", QueueProperties{RequiresSession: true})
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "sql", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "n > 1"}, Action: "SET seen = 1"}})

	e.send("q", msg("active"), msg("locked"), msg("deferred"), msg("dead"), msg("abandoned"))
	got := e.receive("q", PeekLock, 5)
	e.must(e.b.Defer(e.ctx, "q", nil, got[2].LockToken))
	e.must(e.b.DeadLetter(e.ctx, "q", "why", "because", nil, got[3].LockToken))
	e.must(e.b.Abandon(e.ctx, "q", nil, got[4].LockToken))
	e.must(e.b.Complete(e.ctx, "q", got[0].LockToken))
	e.send("q", msg("after"))
	_, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Hour), []*Message{msg("scheduled")})
	e.must(err)
	e.send("s", sessMsg("a", "s1"), sessMsg("b", "s2"))
	e.send("t", &Message{Body: []byte("t1"), Properties: map[string]any{"n": int64(2)}}, &Message{Body: []byte("t0"), Properties: map[string]any{"n": int64(0)}})
	before := e.info("q")
	lastSeq := mustPeek(e, "q")

	e.restart()

	qi, err := e.b.GetQueue(e.ctx, "Q")
	e.must(err)
	if qi.Properties.LockDuration != 30*time.Second || qi.Properties.MaxDeliveryCount != 5 || qi.Properties.UserMetadata != "meta" {
		t.Fatalf("properties %+v", qi.Properties)
	}
	after := qi.Runtime
	if after.ActiveMessageCount != before.ActiveMessageCount || after.DeferredMessageCount != 1 ||
		after.ScheduledMessageCount != 1 || after.DeadLetterMessageCount != 1 || after.SizeInBytes != before.SizeInBytes {
		t.Fatalf("runtime before %+v after %+v", before, after)
	}
	// The message locked at the restart is available again, its count kept.
	r := e.receive("q", PeekLock, 10)
	wantBodies(t, r, "locked", "abandoned", "after")
	if r[0].DeliveryCount != 0 || r[1].DeliveryCount != 1 {
		t.Fatalf("delivery counts %d %d", r[0].DeliveryCount, r[1].DeliveryCount)
	}
	dl := e.receive("q/$DeadLetterQueue", ReceiveAndDelete, 5)
	if len(dl) != 1 || dl[0].Properties[PropDeadLetterReason] != "why" {
		t.Fatalf("dead letters %+v", dl)
	}
	// Sequence numbers are never reused.
	e.send("q", msg("new"))
	p := mustPeek(e, "q")
	if p[len(p)-1].SequenceNumber <= lastSeq[len(lastSeq)-1].SequenceNumber {
		t.Fatalf("new sequence number %d reuses ≤ %d", p[len(p)-1].SequenceNumber, lastSeq[len(lastSeq)-1].SequenceNumber)
	}
	// Sessions, subscriptions and rules are back.
	c, s := e.accept("s", "b")
	c.AddCredit(5)
	wantBodies(t, s.take(), "s2")
	ids, _ := e.b.ListSessions(e.ctx, "s", time.Time{}, 0, 0)
	if fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("sessions %v", ids)
	}
	e.send("t", &Message{Body: []byte("t2"), Properties: map[string]any{"n": int64(5)}})
	ts := e.receive("t/Subscriptions/sql", ReceiveAndDelete, 5)
	wantBodies(t, ts, "t1", "t2")
	if ts[1].Properties["seen"] != int64(1) {
		t.Fatalf("action after restart: %v", ts[1].Properties)
	}
}

func TestSequenceNumbersNeverReusedAfterDrainAndRestart(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	e.receive("q", ReceiveAndDelete, 5)
	e.restart()
	e.send("q", msg("c"))
	if got := e.receive("q", ReceiveAndDelete, 5); got[0].SequenceNumber <= 2 {
		t.Fatalf("sequence number %d reused", got[0].SequenceNumber)
	}
}

// gone waits until queue name is deleted.
func (e *env) gone(name string) {
	e.t.Helper()
	poll.Until(e.t, 10*time.Second, fmt.Sprintf("queue %q deleted", name), func() bool {
		_, err := e.b.GetQueue(e.ctx, name)
		return errors.Is(err, ErrNotFound)
	})
}

func TestAutoDeleteOnIdle(t *testing.T) {
	e := newEnv(t)
	e.queue("idle", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute})
	e.queue("busy", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute})
	e.clk.Advance(4 * time.Minute)
	e.send("busy", msg("x"))
	e.clk.Advance(time.Minute)
	e.gone("idle")
	_, err := e.b.GetQueue(e.ctx, "busy")
	e.must(err)
	e.clk.Advance(4 * time.Minute)
	e.gone("busy")
	e.restart()
	if qs, _ := e.b.ListQueues(e.ctx, 0, 0); len(qs) != 0 {
		t.Fatalf("queues after restart %v", qs)
	}
}

// Deleting an idle entity waits for the management calls before it, which
// hold their lock across their commits; the deadlines of every other queue
// go on meanwhile.
func TestIdleDeletionDoesNotHoldUpOtherDeadlines(t *testing.T) {
	clk := clock.NewFake(t0)
	b, g := openGated(t, clk, 3, nil)
	ctx := context.Background()
	must(t, b.CreateQueue(ctx, "idle", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute}))
	must(t, b.CreateQueue(ctx, "other", QueueProperties{}))
	must(t, b.CreateQueue(ctx, "work", QueueProperties{LockDuration: 5 * time.Minute}))
	clk.Advance(time.Minute)
	must(t, b.Send(ctx, "work", []*Message{msg("w")}))
	consumeInto(t, b, "work", "", PeekLock, 1).takeN(t, 1)
	w, err := b.lookup("work")
	must(t, err)
	g.arm()
	updated := make(chan error, 1)
	go func() { updated <- b.UpdateQueue(ctx, "other", QueueProperties{MaxDeliveryCount: 3}) }()
	<-g.entered // the update holds the management lock, its commit held
	var once sync.Once
	release := func() { once.Do(func() { close(g.release) }) }
	t.Cleanup(release)
	go clk.Advance(10 * time.Minute) // "idle" is due for deletion, the lock of "work" expired
	poll.Until(t, 10*time.Second, "the expired lock released while a management commit is held", func() bool {
		w.q.mu.Lock()
		defer w.q.mu.Unlock()
		return len(w.q.locks) == 0
	})
	if _, err := b.GetQueue(ctx, "idle"); err != nil {
		t.Fatalf("the idle queue went before the management call ahead of its deletion: %v", err)
	}
	release()
	must(t, <-updated)
	poll.Until(t, 10*time.Second, "the idle queue deleted", func() bool {
		_, err := b.GetQueue(ctx, "idle")
		return errors.Is(err, ErrNotFound)
	})
}

// An idle entity's deletion, which waits for the management lock, deletes
// only the entity that was idle: not one created under its name meanwhile.
func TestIdleDeletionSparesAnEntityOfTheSameName(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute})
	old, err := e.b.lookup("q")
	e.must(err)
	e.must(e.b.DeleteQueue(e.ctx, "q"))
	e.queue("q", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute})
	e.clk.Advance(4 * time.Minute)
	e.send("q", msg("in use")) // the new queue is in use; the old one stays idle
	e.clk.Advance(2 * time.Minute)
	e.b.deleteIdle(old, 5*time.Minute) // as if old's deadline had fired just before its delete
	if _, err := e.b.GetQueue(e.ctx, "q"); err != nil {
		t.Fatalf("the queue created under the idle one's name: %v", err)
	}
}

func TestOpenValidatesOptions(t *testing.T) {
	e := newEnv(t)
	_, err := Open(e.ctx, e.st, Options{MaxMessageSizeInKilobytes: 200 * 1024})
	wantErr(t, err, ErrInvalidArgument)
	_, err = Open(e.ctx, nil, Options{})
	wantErr(t, err, ErrInvalidArgument)
	e.b.Close()
	_, err = e.b.GetQueue(e.ctx, "x")
	wantErr(t, err, ErrClosed)
}

// scanLog records the ranges a store is scanned over.
type scanLog struct {
	*memstore.Store
	mu     sync.Mutex
	ranges [][2][]byte
}

func (s *scanLog) Scan(ctx context.Context, start, end []byte, fn func(k, v []byte) error) error {
	s.mu.Lock()
	s.ranges = append(s.ranges, [2][]byte{start, end})
	s.mu.Unlock()
	return s.Store.Scan(ctx, start, end, fn)
}

// One entity is rebuilt from its own key ranges, never by scanning the
// namespace: what a cluster node taking over one entity relies on.
func TestLoadEntityReadsOnlyItsOwnRanges(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"a", "b", "c"} {
		e.queue(name, QueueProperties{RequiresDuplicateDetection: true})
		e.send(name, &Message{MessageID: "m-" + name, Body: []byte(name)}, msg(name+"2"))
	}
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{})
	e.send("t", msg("fan"))
	e.b.Close()

	log := &scanLog{Store: e.st.Reopen()}
	b, err := Open(e.ctx, log, Options{Clock: e.clk, Logger: slog.New(slog.DiscardHandler)})
	e.must(err)
	defer b.Close()
	for _, name := range []string{"b", "t"} {
		ent, err := b.lookup(name)
		e.must(err)
		targets := []*entity{ent}
		for _, s := range ent.subs {
			targets = append(targets, s)
		}
		for _, target := range targets {
			fresh := b.materialize(&entityRecord{id: target.id, kind: target.kind, name: target.name, p: *target.props()}, target.parent)
			log.mu.Lock()
			log.ranges = nil
			log.mu.Unlock()
			e.must(b.loadEntity(e.ctx, fresh, e.clk.Now().UnixNano()))
			for _, r := range log.ranges {
				if len(r[0]) != 9 || len(r[1]) != 9 || r[0][0] != r[1][0] {
					t.Fatalf("loading %q scanned [%x, %x), not one of its prefixes", target.path(), r[0], r[1])
				}
				if s, end := prefixRange(r[0][0], target.id); !bytes.Equal(s, r[0]) || !bytes.Equal(end, r[1]) {
					t.Fatalf("loading %q scanned [%x, %x), another entity's range", target.path(), r[0], r[1])
				}
			}
			if got, want := len(fresh.q.msgs), len(target.q.msgs); got != want {
				t.Fatalf("%q rebuilt with %d messages, want %d", target.path(), got, want)
			}
			if target.dd != nil && len(fresh.dd.seen) != len(target.dd.seen) {
				t.Fatalf("%q rebuilt with %d duplicate ids, want %d", target.path(), len(fresh.dd.seen), len(target.dd.seen))
			}
		}
	}
}
