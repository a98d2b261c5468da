package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

// Every operation applies completely or not at all: after a failure, the
// store and the runtime counts are exactly as before, and every lock that
// was held is still held.

// state is what a failed operation must leave untouched: every record in
// the store, and the runtime counts of the named queues.
type state struct {
	records string
	counts  map[string]RuntimeInfo
}

func (e *env) state(queues ...string) state {
	e.t.Helper()
	var buf bytes.Buffer
	e.must(e.st.Scan(e.ctx, nil, nil, func(k, v []byte) error {
		fmt.Fprintf(&buf, "%x=%x\n", k, v)
		return nil
	}))
	s := state{records: buf.String(), counts: map[string]RuntimeInfo{}}
	for _, q := range queues {
		ri := e.info(q)
		ri.AccessedAt = time.Time{} // reading is access
		s.counts[q] = ri
	}
	return s
}

func (e *env) wantUnchanged(before state, queues ...string) {
	e.t.Helper()
	after := e.state(queues...)
	if after.records != before.records {
		e.t.Fatalf("a failed operation changed the store:\nbefore:\n%s\nafter:\n%s", before.records, after.records)
	}
	for q, ri := range before.counts {
		if after.counts[q] != ri {
			e.t.Fatalf("a failed operation changed the counts of %q:\nbefore %+v\nafter  %+v", q, ri, after.counts[q])
		}
	}
}

// lockedInBothSubqueues makes queue q with a message locked in its
// dead-letter subqueue and one locked in its main subqueue.
func (e *env) lockedInBothSubqueues(q string) (dlq, main *Message) {
	e.t.Helper()
	e.queue(q, QueueProperties{})
	e.send(q, msg("to-dlq"), msg("main"))
	first := e.locked(q, 1)[0]
	e.must(e.b.DeadLetter(e.ctx, q, "r", "", nil, first.LockToken))
	return e.locked(q+"/$DeadLetterQueue", 1)[0], e.locked(q, 1)[0]
}

// locked receives n messages of q in peek-lock mode on a consumer that
// stays open (locks survive).
func (e *env) locked(q string, n int) []*Message {
	e.t.Helper()
	c, s := e.consumer(q, PeekLock)
	c.AddCredit(n)
	c.Drain()
	got := s.take()
	if len(got) != n {
		e.t.Fatalf("received %d messages of %q, want %d", len(got), q, n)
	}
	return got
}

func TestSettlementWithABadTokenChangesNothing(t *testing.T) {
	ops := map[string]func(e *env, tokens ...LockToken) error{
		"complete": func(e *env, ts ...LockToken) error { return e.b.Complete(e.ctx, "q", ts...) },
		"abandon": func(e *env, ts ...LockToken) error {
			return e.b.Abandon(e.ctx, "q", map[string]any{"x": int64(1)}, ts...)
		},
		"defer":      func(e *env, ts ...LockToken) error { return e.b.Defer(e.ctx, "q", nil, ts...) },
		"deadletter": func(e *env, ts ...LockToken) error { return e.b.DeadLetter(e.ctx, "q", "r", "d", nil, ts...) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.queue("q", QueueProperties{})
			e.send("q", msg("a"), msg("b"), msg("c"))
			ms := e.locked("q", 3)
			before := e.state("q")
			// A valid token, then one that locks nothing, then another valid one.
			err := op(e, ms[0].LockToken, LockToken{9}, ms[2].LockToken)
			wantErr(t, err, ErrLockLost)
			e.wantUnchanged(before, "q")
			// A token given twice.
			err = op(e, ms[0].LockToken, ms[1].LockToken, ms[0].LockToken)
			wantErr(t, err, ErrInvalidArgument)
			e.wantUnchanged(before, "q")
			// The locks are intact: the same settlement with good tokens works.
			e.must(op(e, ms[0].LockToken, ms[1].LockToken, ms[2].LockToken))
		})
	}
}

// A settlement of several messages whose commit fails changes nothing:
// the store, the counts, the locks and the delivery counts are as before,
// and the same settlement then succeeds with the same tokens.
func TestSettlementWhoseCommitFailsChangesNothing(t *testing.T) {
	ops := map[string]struct {
		op func(e *env, ts ...LockToken) error
		// after checks the queue once the settlement has succeeded.
		after func(e *env)
	}{
		"complete": {
			func(e *env, ts ...LockToken) error { return e.b.Complete(e.ctx, "q", ts...) },
			func(e *env) {
				if ri := e.info("q"); ri.TotalMessageCount != 0 {
					e.t.Fatalf("runtime %+v after completing all", ri)
				}
			},
		},
		"abandon": {
			func(e *env, ts ...LockToken) error {
				return e.b.Abandon(e.ctx, "q", map[string]any{"x": int64(1)}, ts...)
			},
			func(e *env) {
				got := e.receive("q", PeekLock, 5)
				wantBodies(e.t, got, "a", "b", "c")
				for _, m := range got {
					if m.DeliveryCount != 1 || m.Properties["x"] != int64(1) {
						e.t.Fatalf("%s after one abandon: delivery count %d, properties %v", m.Body, m.DeliveryCount, m.Properties)
					}
				}
			},
		},
		"deadletter": {
			func(e *env, ts ...LockToken) error { return e.b.DeadLetter(e.ctx, "q", "r", "d", nil, ts...) },
			func(e *env) {
				if ri := e.info("q"); ri.DeadLetterMessageCount != 3 || ri.ActiveMessageCount != 0 {
					e.t.Fatalf("runtime %+v, want 3 dead-lettered", ri)
				}
			},
		},
		"defer": {
			func(e *env, ts ...LockToken) error { return e.b.Defer(e.ctx, "q", nil, ts...) },
			func(e *env) {
				if ri := e.info("q"); ri.DeferredMessageCount != 3 || ri.ActiveMessageCount != 0 {
					e.t.Fatalf("runtime %+v, want 3 deferred", ri)
				}
			},
		},
	}
	for name, tc := range ops {
		t.Run(name, func(t *testing.T) {
			e, g := newGatedEnv(t, failWith(true))
			e.queue("q", QueueProperties{})
			e.send("q", msg("a"), msg("b"), msg("c"))
			ms := e.locked("q", 3)
			ts := []LockToken{ms[0].LockToken, ms[1].LockToken, ms[2].LockToken}
			before := e.state("q")
			if err := failCommit(t, g, func() error { return tc.op(e, ts...) }); err == nil {
				t.Fatal("the settlement succeeded though its commit failed")
			}
			e.wantUnchanged(before, "q")
			if got := e.receive("q", PeekLock, 5); len(got) != 0 {
				t.Fatalf("after a failed settlement, %q were delivered again", bodies(got))
			}
			mustHoldInvariants(t, e.b)
			e.must(tc.op(e, ts...))
			tc.after(e)
		})
	}
}

// An Abandon of a dead-lettered message (nothing to write: no count
// outside the main subqueue) and a main-subqueue one (a count to write)
// whose commit fails returns neither.
func TestAbandonAcrossSubqueuesWhoseCommitFailsReturnsNothing(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	dlq, main := e.lockedInBothSubqueues("q")
	before := e.state("q")
	if err := failCommit(t, g, func() error { return e.b.Abandon(e.ctx, "q", nil, dlq.LockToken, main.LockToken) }); err == nil {
		t.Fatal("Abandon succeeded though its commit failed")
	}
	e.wantUnchanged(before, "q")
	if got := append(e.receive("q", PeekLock, 5), e.receive("q/$DeadLetterQueue", PeekLock, 5)...); len(got) != 0 {
		t.Fatalf("after a failed Abandon, %q were delivered again", bodies(got))
	}
	mustHoldInvariants(t, e.b)
	e.must(e.b.Abandon(e.ctx, "q", nil, dlq.LockToken, main.LockToken))
	wantBodies(t, e.receive("q", PeekLock, 5), "main")
	wantBodies(t, e.receive("q/$DeadLetterQueue", PeekLock, 5), "to-dlq")
}

// A settlement whose commit fails after the messages' locks expired (and,
// for one, its TTL passed) meanwhile returns them to the queue rather
// than stranding them: the expired one expires, the other is delivered
// again.
func TestSettlementWhoseCommitFailsAfterItsLocksExpiredReturnsThem(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	e.queue("q", QueueProperties{LockDuration: time.Minute})
	e.send("q", msg("a"), &Message{Body: []byte("b"), TimeToLive: 90 * time.Second})
	ms := e.locked("q", 2)
	g.arm()
	done := make(chan error, 1)
	go func() { done <- e.b.Complete(e.ctx, "q", ms[0].LockToken, ms[1].LockToken) }()
	<-g.entered
	e.clk.Advance(2 * time.Minute) // the locks expire, and b's TTL passes
	g.release <- struct{}{}
	if err := <-done; err == nil {
		t.Fatal("Complete succeeded though its commit failed")
	}
	mustHoldInvariants(t, e.b)
	e.clk.Advance(0)
	if ri := e.info("q"); ri.TotalMessageCount != 1 || ri.ActiveMessageCount != 1 {
		t.Fatalf("runtime %+v, want a alone, active", ri)
	}
	wantBodies(t, e.receive("q", PeekLock, 5), "a")
	wantErr(t, e.b.Complete(e.ctx, "q", ms[0].LockToken), ErrLockLost)
}

// The bug this guards against: a dead-letter of a main-queue message and
// a dead-letter-queue message (both locked on the queue's state) applied
// the first and then failed on the second.
func TestDeadLetterOfMainAndDeadLetteredMessageChangesNothing(t *testing.T) {
	e := newEnv(t)
	dlq, main := e.lockedInBothSubqueues("q")
	before := e.state("q")
	err := e.b.DeadLetter(e.ctx, "q", "again", "", nil, main.LockToken, dlq.LockToken)
	wantErr(t, err, ErrInvalidArgument)
	e.wantUnchanged(before, "q")
	e.must(e.b.DeadLetter(e.ctx, "q", "once", "", nil, main.LockToken))
	if ri := e.info("q"); ri.DeadLetterMessageCount != 2 || ri.ActiveMessageCount != 0 {
		t.Fatalf("runtime %+v, want 2 dead-lettered", ri)
	}
}

// flakyStore fails reads of message bodies on demand, to make the one step
// of a settlement that can fail after its checks (reading the message to
// change its properties) fail. It counts the reads of message records.
type flakyStore struct {
	*memstore.Store
	failGets atomic.Bool
	// gets counts Get calls for message records; getManys the GetMany calls
	// with one or more, and manyKeys their keys.
	gets, getManys, manyKeys atomic.Int64
}

var errInjected = errors.New("injected read failure")

// isMessageRecord says whether k may hold a message's record: its index
// record's value while it is inline, its body key after a rewrite.
func isMessageRecord(k []byte) bool { return len(k) > 0 && (k[0] == kBody || k[0] == kMessage) }

func (f *flakyStore) Get(ctx context.Context, k []byte) ([]byte, error) {
	if isMessageRecord(k) {
		f.gets.Add(1)
		if f.failGets.Load() {
			return nil, errInjected
		}
	}
	return f.Store.Get(ctx, k)
}

func (f *flakyStore) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if slices.ContainsFunc(keys, isMessageRecord) {
		f.getManys.Add(1)
		f.manyKeys.Add(int64(len(keys)))
		if f.failGets.Load() {
			return nil, errInjected
		}
	}
	return f.Store.GetMany(ctx, keys)
}

// newFlakyEnv is an env whose broker caches no bodies, over a flakyStore.
func newFlakyEnv(t *testing.T) (*env, *flakyStore) {
	e := &env{t: t, ctx: context.Background(), st: memstore.New(), clk: clock.NewFake(t0)}
	fs := &flakyStore{Store: e.st}
	b, err := Open(e.ctx, fs, Options{Clock: e.clk, Rand: seededRand{rand.NewChaCha8([32]byte{1})},
		Logger: slog.New(slog.DiscardHandler), CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	t.Cleanup(func() { b.Close() })
	return e, fs
}

func TestSettlementThatCannotReadItsMessageChangesNothing(t *testing.T) {
	e, fs := newFlakyEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	ms := e.locked("q", 2)
	before := e.state("q")
	fs.failGets.Store(true)
	err := e.b.Abandon(e.ctx, "q", map[string]any{"why": "x"}, ms[0].LockToken, ms[1].LockToken)
	if !errors.Is(err, errInjected) {
		t.Fatalf("Abandon with unreadable messages: %v, want the read error", err)
	}
	err = e.b.DeadLetter(e.ctx, "q", "r", "", nil, ms[0].LockToken, ms[1].LockToken)
	if !errors.Is(err, errInjected) {
		t.Fatalf("DeadLetter with unreadable messages: %v, want the read error", err)
	}
	fs.failGets.Store(false)
	e.wantUnchanged(before, "q")
	// Still locked by the same tokens, delivery counts unchanged.
	e.must(e.b.Abandon(e.ctx, "q", map[string]any{"why": "y"}, ms[0].LockToken, ms[1].LockToken))
	again := e.receive("q", PeekLock, 2)
	for _, m := range again {
		if m.DeliveryCount != 1 || m.Properties["why"] != "y" {
			t.Fatalf("after one abandon: delivery count %d, properties %v", m.DeliveryCount, m.Properties)
		}
	}
}

// A Release (or Abandon) of several messages, some of which go back with
// nothing to write and one of which needs a move that fails, returns none
// of them: the failed settlement leaves every lock in place.
func TestFailedReleaseReturnsNoneOfItsMessages(t *testing.T) {
	e, fs := newFlakyEnv(t)
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true, LockDuration: 5 * time.Minute})
	// a expires while locked: its release dead-letters it, which reads it.
	e.send("q", &Message{Body: []byte("a"), TimeToLive: time.Minute}, msg("b"), msg("c"))
	ms := e.locked("q", 3)
	e.clk.Advance(2 * time.Minute)
	before := e.state("q")
	fs.failGets.Store(true)
	err := e.b.Release(e.ctx, "q", ms[1].LockToken, ms[0].LockToken, ms[2].LockToken)
	fs.failGets.Store(false)
	if !errors.Is(err, errInjected) {
		t.Fatalf("Release that cannot dead-letter its expired message: %v, want the read error", err)
	}
	e.wantUnchanged(before, "q")
	if got := e.receive("q", PeekLock, 5); len(got) != 0 {
		t.Fatalf("after a failed Release, %q were delivered again", bodies(got))
	}
	mustHoldInvariants(t, e.b)
	e.must(e.b.Complete(e.ctx, "q", ms[0].LockToken, ms[1].LockToken, ms[2].LockToken))
	if ri := e.info("q"); ri.TotalMessageCount != 0 {
		t.Fatalf("runtime %+v after completing all", ri)
	}
}

// A Release whose commit fails leaves every lock in place, including those
// of messages that needed nothing written; one that succeeds returns them.
func TestReleaseWhoseCommitFailsReturnsNothing(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true, LockDuration: 5 * time.Minute})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: time.Minute}, msg("b"))
	ms := e.locked("q", 2)
	e.clk.Advance(2 * time.Minute)
	before := e.state("q")
	err := failCommit(t, g, func() error { return e.b.Release(e.ctx, "q", ms[1].LockToken, ms[0].LockToken) })
	if err == nil {
		t.Fatal("Release succeeded though its commit failed")
	}
	e.wantUnchanged(before, "q")
	if got := e.receive("q", PeekLock, 5); len(got) != 0 {
		t.Fatalf("after a failed Release, %q were delivered again", bodies(got))
	}
	mustHoldInvariants(t, e.b)
	e.must(e.b.Release(e.ctx, "q", ms[1].LockToken, ms[0].LockToken))
	if ri := e.info("q"); ri.ActiveMessageCount != 1 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("runtime %+v after the release, want b active and a dead-lettered", ri)
	}
	got := e.receive("q", PeekLock, 5)
	wantBodies(t, got, "b")
	if got[0].DeliveryCount != 0 {
		t.Fatalf("released message delivered with count %d, want 0", got[0].DeliveryCount)
	}
}

// A delivery whose body is not cached is read outside the queue's lock;
// when the read fails the message is not lost: receive-and-delete keeps it
// in the queue, peek-lock delivers it again after its lock expires.
func TestDeliveryThatCannotReadItsMessageLosesNothing(t *testing.T) {
	e, fs := newFlakyEnv(t)
	e.queue("q", QueueProperties{LockDuration: 10 * time.Second})
	e.send("q", msg("a"))
	fs.failGets.Store(true)
	if got := e.receive("q", ReceiveAndDelete, 1); len(got) != 0 {
		t.Fatalf("received %d messages from an unreadable store", len(got))
	}
	if ri := e.info("q"); ri.ActiveMessageCount != 1 {
		t.Fatalf("receive-and-delete of an unreadable message: runtime %+v, want it still active", ri)
	}
	if got := e.receive("q", PeekLock, 1); len(got) != 0 {
		t.Fatalf("peek-lock delivered %d unreadable messages", len(got))
	}
	fs.failGets.Store(false)
	e.clk.Advance(11 * time.Second)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 1), "a")
}

func TestBatchWithOneBadMessageChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxSizeInMegabytes: 1})
	e.send("q", msg("existing"))
	before := e.state("q")
	bad := []*Message{
		{Body: []byte("ok")},
		{Body: []byte("bad"), Properties: map[string]any{"unsupported": struct{}{}}},
	}
	if err := e.b.Send(e.ctx, "q", bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("batch with a bad message: %v, want ErrInvalidArgument", err)
	}
	e.wantUnchanged(before, "q")
	// Over the quota halfway through the batch: nothing of it is stored.
	big := make([]*Message, 3)
	for i := range big {
		big[i] = &Message{Body: make([]byte, 400<<10)}
	}
	if err := e.b.Send(e.ctx, "q", big); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("batch over the quota: %v, want ErrQuotaExceeded", err)
	}
	e.wantUnchanged(before, "q")
	_, err := e.b.ScheduleEach(e.ctx, "q", []*Message{
		{Body: []byte("later"), ScheduledEnqueueTime: t0.Add(time.Hour)},
		{Body: []byte("no time")},
	})
	wantErr(t, err, ErrInvalidArgument)
	e.wantUnchanged(before, "q")
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "existing")
}

func TestCancelScheduledWithAnUnknownNumberChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	seqs, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Hour), []*Message{msg("a"), msg("b")})
	e.must(err)
	before := e.state("q")
	wantErr(t, e.b.CancelScheduled(e.ctx, "q", []int64{seqs[0], 999999, seqs[1]}), ErrMessageNotFound)
	e.wantUnchanged(before, "q")
	e.must(e.b.CancelScheduled(e.ctx, "q", seqs))
}

func TestReceiveDeferredWithAnUnknownNumberChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	ms := e.locked("q", 2)
	e.must(e.b.Defer(e.ctx, "q", nil, ms[0].LockToken, ms[1].LockToken))
	before := e.state("q")
	for _, mode := range []ReceiveMode{PeekLock, ReceiveAndDelete} {
		_, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{ms[0].SequenceNumber, 12345}, mode)
		wantErr(t, err, ErrMessageNotFound)
		e.wantUnchanged(before, "q")
	}
	got, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{ms[1].SequenceNumber, ms[0].SequenceNumber}, ReceiveAndDelete)
	e.must(err)
	wantBodies(t, got, "b", "a")
}

func TestRuleAndEntityUpdatesThatFailChangeNothing(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{})
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "a = 1"}}))
	e.queue("q", QueueProperties{})
	// What the failed updates must leave: the store, q's counts and times,
	// and in memory q's and s's properties and s's runtime and rules.
	memory := func() string {
		t.Helper()
		qi, err := e.b.GetQueue(e.ctx, "q")
		e.must(err)
		si, err := e.b.GetSubscription(e.ctx, "t", "s")
		e.must(err)
		si.Runtime.AccessedAt = time.Time{} // reading is access
		rs, err := e.b.ListRules(e.ctx, "t", "s", 0, 0)
		e.must(err)
		return fmt.Sprintf("queue %+v\nsubscription %+v %+v\nrules %+v", qi.Properties, si.Properties, si.Runtime, rs)
	}
	before, inMemory := e.state("q"), memory()
	err := e.b.UpdateRule(e.ctx, "t", "s", RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "a = = 1"}})
	wantErr(t, err, ErrInvalidArgument) // a broken filter
	err = e.b.UpdateRule(e.ctx, "t", "s", RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "a = 2"}, Action: "SET"})
	wantErr(t, err, ErrInvalidArgument) // a broken action
	wantErr(t, e.b.UpdateQueue(e.ctx, "q", QueueProperties{RequiresSession: true}), ErrInvalidArgument)
	wantErr(t, e.b.UpdateQueue(e.ctx, "q", QueueProperties{ForwardTo: "nowhere"}), ErrNotFound)
	e.wantUnchanged(before, "q")
	if after := memory(); after != inMemory {
		t.Fatalf("failed updates changed the entities in memory:\nbefore:\n%s\nafter:\n%s", inMemory, after)
	}
	rs, err := e.b.ListRules(e.ctx, "t", "s", 0, 0)
	e.must(err)
	i := slices.IndexFunc(rs, func(r RuleProperties) bool { return r.Name == "r" })
	if i < 0 || rs[i].Filter.SQL != "a = 1" || rs[i].Action != "" {
		t.Fatalf("rules after failed updates %+v, want r with filter \"a = 1\" and no action", rs)
	}
}

func TestCancelledContextAppliesNothing(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"))
	m := e.locked("q", 1)[0]
	before := e.state("q")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]error{
		"Send":            e.b.Send(ctx, "q", []*Message{msg("x")}),
		"Complete":        e.b.Complete(ctx, "q", m.LockToken),
		"Abandon":         e.b.Abandon(ctx, "q", nil, m.LockToken),
		"DeadLetter":      e.b.DeadLetter(ctx, "q", "r", "", nil, m.LockToken),
		"CreateQueue":     e.b.CreateQueue(ctx, "q2", QueueProperties{}),
		"UpdateQueue":     e.b.UpdateQueue(ctx, "q", QueueProperties{MaxDeliveryCount: 3}),
		"CancelScheduled": e.b.CancelScheduled(ctx, "q", []int64{1}),
	}
	_, calls["ScheduleEach"] = e.b.ScheduleEach(ctx, "q", []*Message{{Body: []byte("s"), ScheduledEnqueueTime: t0.Add(time.Hour)}})
	_, calls["RenewLock"] = e.b.RenewLock(ctx, "q", m.LockToken)
	for name, err := range calls {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	e.wantUnchanged(before, "q")
	e.must(e.b.Complete(e.ctx, "q", m.LockToken))
}

// Sequence numbers are never reused across restarts, though the
// high-water marks that guard them are written with the messages (in any
// commit order) rather than by commits of their own.
func TestSequenceNumbersNeverReusedAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	var last int64
	for round := range 3 {
		e.send("q", msg("a"), msg("b"))
		got := e.receive("q", ReceiveAndDelete, 2)
		for _, m := range got {
			if m.SequenceNumber <= last {
				t.Fatalf("round %d: sequence number %d after %d", round, m.SequenceNumber, last)
			}
			last = m.SequenceNumber
		}
		e.restart()
	}
	// Only the largest mark is kept.
	n := 0
	e.must(e.st.Scan(e.ctx, []byte{kCounter}, []byte{kCounter + 1}, func(k, _ []byte) error { n++; return nil }))
	if n != 1 {
		t.Fatalf("%d counter marks stored, want 1", n)
	}
}

func TestSequenceMarksCommittedOutOfOrderKeepTheLargest(t *testing.T) {
	st := memstore.New()
	c := &seqCounter{eid: 7}
	commit := func(mark uint64) {
		var bt batchBuf
		c.markOps(&bt, mark)
		if err := st.Commit(context.Background(), &bt.Batch); err != nil {
			t.Fatal(err)
		}
	}
	commit(300) // a later batch with a larger mark commits first...
	commit(200) // ...then an earlier one with a smaller mark
	var marks []string
	_ = st.Scan(context.Background(), nil, nil, func(k, _ []byte) error {
		marks = append(marks, fmt.Sprintf("%x", k))
		return nil
	})
	want := []string{fmt.Sprintf("%x", key2(kCounter, 7, 200)), fmt.Sprintf("%x", key2(kCounter, 7, 300))}
	if fmt.Sprint(marks) != fmt.Sprint(want) {
		t.Fatalf("marks %v, want %v", marks, want)
	}
	commit(400)
	n := 0
	_ = st.Scan(context.Background(), nil, nil, func(_, _ []byte) error { n++; return nil })
	if n != 1 {
		t.Fatalf("%d marks after a larger one, want 1", n)
	}
}

var _ store.Store = (*flakyStore)(nil)

// countingStore counts the range deletions committed through it.
type countingStore struct {
	*memstore.Store
	ranges atomic.Int64
}

func (c *countingStore) Commit(ctx context.Context, b *store.Batch) error {
	for _, op := range b.Ops {
		if op.Kind == store.OpDeleteRange {
			c.ranges.Add(1)
		}
	}
	return c.Store.Commit(ctx, b)
}

// A batch of messages that passes the durable high-water mark writes one
// mark (one range deletion), not one per message: overlapping range
// deletions by the thousand made the store's flush use gigabytes.
func TestBatchPastTheMarkWritesOneMark(t *testing.T) {
	st := &countingStore{Store: memstore.New()}
	ctx := context.Background()
	b, err := Open(ctx, st, Options{Clock: clock.NewFake(t0), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateQueue(ctx, "q", QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	before := st.ranges.Load()
	msgs := make([]*Message, 500)
	for i := range msgs {
		msgs[i] = &Message{MessageID: fmt.Sprint(i), Body: []byte("x")}
	}
	if err := b.Send(ctx, "q", msgs); err != nil {
		t.Fatal(err)
	}
	if n := st.ranges.Load() - before; n != 1 {
		t.Fatalf("a batch of 500 past the mark committed %d range deletions, want 1", n)
	}
}

// newGatedEnv is an env over a gatedStore whose held commits fail with
// fail (nil: succeed). It must not be restarted (the new broker would not
// be gated).
func newGatedEnv(t *testing.T, fail error) (*env, *gatedStore) {
	t.Helper()
	clk := clock.NewFake(t0)
	b, g := openGated(t, clk, 5, fail)
	e := &env{t: t, ctx: context.Background(), st: g.Store, clk: clk, b: b}
	e.checkOnCleanup(b)
	return e, g
}

// failCommit runs op while the gated store holds its next commit, lets
// that commit end (with the store's fail), and returns op's error. op must
// commit.
func failCommit(t *testing.T, g *gatedStore, op func() error) error {
	t.Helper()
	g.arm()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case <-g.entered:
	case err := <-done:
		t.Fatalf("the operation returned %v without committing", err)
	}
	g.release <- struct{}{}
	return <-done
}

// A receive-and-delete of deferred messages whose commit fails leaves them
// deferred: received by sequence number only, never by a plain consumer.
func TestFailedReceiveDeferredLeavesMessagesDeferred(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	ms := e.locked("q", 2)
	e.must(e.b.Defer(e.ctx, "q", nil, ms[0].LockToken, ms[1].LockToken))
	seqs := []int64{ms[0].SequenceNumber, ms[1].SequenceNumber}
	before := e.state("q")
	err := failCommit(t, g, func() error {
		_, err := e.b.ReceiveDeferred(e.ctx, "q", seqs, ReceiveAndDelete)
		return err
	})
	if err == nil {
		t.Fatal("ReceiveDeferred succeeded though its commit failed")
	}
	e.wantUnchanged(before, "q")
	if ri := e.info("q"); ri.DeferredMessageCount != 2 || ri.ActiveMessageCount != 0 {
		t.Fatalf("after the failed ReceiveDeferred: runtime %+v, want 2 deferred", ri)
	}
	mustHoldInvariants(t, e.b)
	if got := e.receive("q", PeekLock, 5); len(got) != 0 {
		t.Fatalf("a plain consumer received %q, deferred messages", bodies(got))
	}
	got, err := e.b.ReceiveDeferred(e.ctx, "q", seqs, ReceiveAndDelete)
	e.must(err)
	wantBodies(t, got, "a", "b")
}

// A delivery in receive-and-delete mode whose commit fails returns its
// message to the queue with its expiry armed, though the expiry came due
// (and found the message taken) while the deletion was committing.
func TestFailedReceiveAndDeleteKeepsTheMessageExpiry(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	e.queue("q", QueueProperties{})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: time.Minute})
	s := &sink{}
	c, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Mode: ReceiveAndDelete, Deliver: s.deliver})
	e.must(err)
	g.arm()
	done := make(chan struct{})
	go func() { c.AddCredit(1); close(done) }()
	<-g.entered
	e.clk.Advance(2 * time.Minute) // the expiry comes due while the deletion commits
	g.release <- struct{}{}
	<-done
	if got := s.take(); len(got) != 0 {
		t.Fatalf("delivered %q, whose deletion failed", bodies(got))
	}
	c.Close()
	mustHoldInvariants(t, e.b)
	e.clk.Advance(0)
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.TotalMessageCount != 0 {
		t.Fatalf("runtime %+v: the expired message is still there", ri)
	}
}
