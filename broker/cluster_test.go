package broker

import (
	"bytes"
	"context"
	"errors"
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
