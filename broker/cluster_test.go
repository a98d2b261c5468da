package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store/memstore"
)

// rowScanStore reads a Scan one row per underlying scan, each starting
// after the last key read, as store/postgres reads pages: such a scan
// sees what is committed while it runs. After the first row of the message
// range it calls afterFirst.
type rowScanStore struct {
	*memstore.Store
	afterFirst func()
}

func (s *rowScanStore) Scan(ctx context.Context, start, end []byte, fn func(k, v []byte) error) error {
	cursor, first := start, true
	for {
		var k, v []byte
		err := s.Store.Scan(ctx, cursor, end, func(key, val []byte) error {
			if !first && bytes.Equal(key, cursor) {
				return nil // the last row read; the next one follows
			}
			k, v = bytes.Clone(key), bytes.Clone(val)
			return errStopScan
		})
		if err != nil && err != errStopScan {
			return err
		}
		if k == nil {
			return nil
		}
		if err := fn(k, v); err != nil {
			return err
		}
		if first && k[0] == kMessage && s.afterFirst != nil {
			s.afterFirst()
		}
		cursor, first = k, false
	}
}

// The bug this guards against (found by crashtest on PostgreSQL): a
// scheduled message whose time had passed was activated while its queue
// was being loaded. The activation wrote it under a new, higher sequence
// number, which the load's scan, still running, then read as a second
// message: the one message was delivered twice, and again after its
// completion. A node's Load and a restart's recovery both read entities
// while the deadline wheel runs.
func TestDueDeadlinesWaitUntilTheQueueIsRead(t *testing.T) {
	for _, dormant := range []bool{true, false} {
		name := map[bool]string{true: "Load", false: "Open"}[dormant]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.queue("q", QueueProperties{})
			if _, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Minute), []*Message{msg("scheduled")}); err != nil {
				t.Fatal(err)
			}
			e.send("q", msg("sent"))
			e.b.Close()
			e.clk.Advance(2 * time.Minute)

			st := &rowScanStore{Store: e.st.Reopen()}
			ranEarly := false
			st.afterFirst = func() {
				// The scheduled message (the first record) is indexed and
				// due: the wheel, run now, would commit its activation at
				// once.
				commits := st.Stats().Commits
				e.clk.Advance(0)
				ranEarly = ranEarly || st.Stats().Commits != commits
			}
			b, err := Open(e.ctx, st, Options{Clock: e.clk, Rand: seededRand{rand.NewChaCha8([32]byte{2})},
				Logger: slog.New(slog.DiscardHandler), Dormant: dormant})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if dormant {
				id, _ := b.Dormant("q")
				if err := b.Load(e.ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if ranEarly {
				t.Error("the activation committed while the queue was being read")
			}
			e.b = b
			if ri := e.info("q"); ri.ActiveMessageCount != 2 || ri.ScheduledMessageCount != 0 || ri.TotalMessageCount != 2 {
				t.Fatalf("after loading: %+v, want 2 active messages", ri)
			}
			wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "sent", "scheduled")
			if got := e.receive("q", ReceiveAndDelete, 10); len(got) != 0 {
				t.Fatalf("%d more messages after the two: %q", len(got), bodies(got))
			}
			mustHoldInvariants(t, b)
		})
	}
}

// A node whose notifications of another writer's changes were lost catches
// up with Resync: new entities appear, changed ones take their properties,
// deleted ones disappear, and subscriptions' rules are re-read.
func TestResyncCatchesUpWithAnotherWriter(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	open := func(seed byte) *Broker {
		b, err := Open(ctx, st, Options{Clock: clock.NewFake(t0), Rand: seededRand{rand.NewChaCha8([32]byte{seed})},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	writer := open(1)
	must(t, writer.CreateQueue(ctx, "changed", QueueProperties{}))
	must(t, writer.CreateQueue(ctx, "deleted", QueueProperties{}))
	must(t, writer.CreateTopic(ctx, "t", TopicProperties{}))
	must(t, writer.CreateSubscription(ctx, "t", "old", SubscriptionProperties{}))
	reader := open(2) // hears nothing of what follows
	must(t, writer.UpdateQueue(ctx, "changed", QueueProperties{MaxDeliveryCount: 3}))
	must(t, writer.DeleteQueue(ctx, "deleted"))
	must(t, writer.CreateQueue(ctx, "new", QueueProperties{}))
	must(t, writer.CreateSubscription(ctx, "t", "new", SubscriptionProperties{}))
	must(t, writer.AddRule(ctx, "t", "old", RuleProperties{Name: "red", Filter: RuleFilter{Kind: FilterSQL, SQL: "color = 'red'"}}))

	rules := func(sub string) []string {
		rs, err := reader.ListRules(ctx, "t", sub, 0, 0)
		must(t, err)
		var names []string
		for _, r := range rs {
			names = append(names, r.Name)
		}
		slices.Sort(names)
		return names
	}
	if _, err := reader.GetQueue(ctx, "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before Resync the reader knows the new queue: %v", err)
	}
	must(t, reader.Resync(ctx))
	q, err := reader.GetQueue(ctx, "changed")
	must(t, err)
	if q.Properties.MaxDeliveryCount != 3 {
		t.Fatalf("changed queue: MaxDeliveryCount %d after Resync, want 3", q.Properties.MaxDeliveryCount)
	}
	if _, err := reader.GetQueue(ctx, "deleted"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted queue after Resync: %v, want ErrNotFound", err)
	}
	if _, err := reader.GetQueue(ctx, "new"); err != nil {
		t.Fatalf("new queue after Resync: %v", err)
	}
	if _, err := reader.GetSubscription(ctx, "t", "new"); err != nil {
		t.Fatalf("new subscription after Resync: %v", err)
	}
	if got := rules("old"); !slices.Equal(got, []string{"$Default", "red"}) {
		t.Fatalf("rules of the old subscription after Resync: %v, want $Default and red", got)
	}
	// The reader takes ids after the writer's.
	must(t, reader.CreateQueue(ctx, "mine", QueueProperties{}))
	mine, _ := reader.Dormant("mine")
	newID, _ := reader.Dormant("new")
	if mine <= newID {
		t.Fatalf("the reader gave id %d, not above the writer's %d", mine, newID)
	}
}

// ruleScanStore calls onRule, when set, after each rule record a Scan
// reads; an error from it ends the scan with that error.
type ruleScanStore struct {
	*memstore.Store
	onRule func(n int) error // n: the rule records this scan has read
}

func (s *ruleScanStore) Scan(ctx context.Context, start, end []byte, fn func(k, v []byte) error) error {
	n := 0
	return s.Store.Scan(ctx, start, end, func(k, v []byte) error {
		if err := fn(k, v); err != nil {
			return err
		}
		if k[0] != kRule || s.onRule == nil {
			return nil
		}
		n++
		return s.onRule(n)
	})
}

// openDormantRules opens a dormant broker over a store holding topic t,
// whose subscription s has the rules $Default and r1 to r4 (rN: "a = N").
// It returns t's id.
func openDormantRules(t *testing.T) (*Broker, *ruleScanStore, uint64) {
	t.Helper()
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{})
	for i := 1; i <= 4; i++ {
		e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: fmt.Sprint("r", i), Filter: RuleFilter{Kind: FilterSQL, SQL: fmt.Sprint("a = ", i)}}))
	}
	e.b.Close()
	st := &ruleScanStore{Store: e.st.Reopen()}
	b, err := Open(e.ctx, st, Options{Clock: e.clk, Logger: slog.New(slog.DiscardHandler), Dormant: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	top, dormant := b.Dormant("t")
	if !dormant {
		t.Fatal("t is not dormant")
	}
	return b, st, top
}

// dormantRules is openDormantRules, after t was loaded and unloaded (it
// moved here and away again).
func dormantRules(t *testing.T) (*Broker, *ruleScanStore, uint64) {
	t.Helper()
	b, st, top := openDormantRules(t)
	if err := b.Load(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	b.Unload(top)
	return b, st, top
}

const allRules = "[$Default: r1:a = 1 r2:a = 2 r3:a = 3 r4:a = 4]"

// rulesOf lists subscription t/s's rules as name:filter.
func rulesOf(t *testing.T, b *Broker) string {
	t.Helper()
	rs, err := b.ListRules(context.Background(), "t", "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.Name+":"+r.Filter.SQL)
	}
	return fmt.Sprint(out)
}

// The bug this guards against: Load emptied a subscription's rules and
// read them back one by one, without the subscription's mu, while
// ListRules (which serves dormant entities too) read the list under it: a
// data race, and a listing of part of the rules.
func TestListRulesDuringLoadSeesEveryRule(t *testing.T) {
	b, st, top := dormantRules(t)
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules of the dormant copy %s, want %s", got, allRules)
	}
	during := ""
	st.onRule = func(n int) error {
		if n == 2 {
			during = rulesOf(t, b)
		}
		return nil
	}
	// ListRules from another goroutine throughout, for the race detector.
	stop, bad := make(chan struct{}), make(chan string, 1)
	go func() {
		defer close(bad)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs, err := b.ListRules(context.Background(), "t", "s", 0, 0)
			if err != nil || len(rs) != 5 {
				bad <- fmt.Sprintf("%d rules, %v", len(rs), err)
				return
			}
		}
	}()
	err := b.Load(context.Background(), top)
	close(stop)
	if msg := <-bad; msg != "" {
		t.Fatalf("ListRules during Load: %s, want the 5 rules", msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if during != allRules {
		t.Fatalf("rules listed while the rules were read %s, want %s", during, allRules)
	}
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules after Load %s, want %s", got, allRules)
	}
}

// The bug this guards against: a Load that failed while reading the rules
// left the dormant copy with the rules read so far, and AddRule on that
// node then took a stored rule's name for a new one and overwrote it.
func TestFailedLoadKeepsTheRules(t *testing.T) {
	b, st, top := dormantRules(t)
	st.onRule = func(n int) error {
		if n == 2 {
			return errInjected
		}
		return nil
	}
	if err := b.Load(context.Background(), top); !errors.Is(err, errInjected) {
		t.Fatalf("Load with a failing rule read: %v, want the read error", err)
	}
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules after the failed Load %s, want %s", got, allRules)
	}
	err := b.AddRule(context.Background(), "t", "s", RuleProperties{Name: "r3", Filter: RuleFilter{Kind: FilterSQL, SQL: "b = 1"}})
	wantErr(t, err, ErrAlreadyExists)
	st.onRule = nil
	if err := b.Load(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules after loading %s, want %s", got, allRules)
	}
}

// The bug this guards against: a broker opened with Options.Dormant read
// no rules for its dormant subscriptions, though management works on any
// node: ListRules listed none, and AddRule took a stored rule's name for a
// new one and overwrote it.
func TestDormantSubscriptionsKnowTheirRulesFromOpen(t *testing.T) {
	b, _, _ := openDormantRules(t)
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules of a dormant subscription %s, want %s", got, allRules)
	}
	err := b.AddRule(context.Background(), "t", "s", RuleProperties{Name: "r3", Filter: RuleFilter{Kind: FilterSQL, SQL: "b = 1"}})
	wantErr(t, err, ErrAlreadyExists)
	if got := rulesOf(t, b); got != allRules {
		t.Fatalf("rules after a refused AddRule %s, want %s", got, allRules)
	}
}
