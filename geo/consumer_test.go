package geo_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/processor"
)

var granularities = []geo.Granularity{geo.PerSession, geo.PerMessage}

func eachGranularity(t *testing.T, f func(t *testing.T, g geo.Granularity)) {
	for _, g := range granularities {
		t.Run(g.String(), func(t *testing.T) { f(t, g) })
	}
}

// TestOrderAndOnce: consumers in both regions, the secondary copy a little
// later; every position of every session is applied once, in order, and
// both queues end empty with nothing dead-lettered.
func TestOrderAndOnce(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, err := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		je, jw := w.journal(t, nil), w.journal(t, nil)
		ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: g})
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g})
		run(t, ce)
		run(t, cw)
		sessions := names("pkg", 5)
		if p, sec := sendAll(t, s, sessions, 1, 8); p != 40 || sec != 40 {
			t.Fatalf("accepted: primary %d, secondary %d, want 40 each", p, sec)
		}
		w.waitApplied(t, 40, 60*time.Second)
		drained(t, east, west)
		by := w.verify(t, upTo(sessions, 8))
		se, sw := ce.Stats(), cw.Stats()
		if int(se.Processed+sw.Processed) != 40 || se.Copies+sw.Copies != 40 {
			t.Errorf("processed %d+%d and completed copies %d+%d, want 40 and 40", se.Processed, sw.Processed, se.Copies, sw.Copies)
		}
		t.Logf("applied by region %v; east %+v; west %+v", by, se, sw)
	})
}

// TestBothCopiesAtOnce: no delay, so both regions race for every message;
// the journal still gives each position to one region, in order.
func TestBothCopiesAtOnce(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: -1})
		je, jw := w.journal(t, nil), w.journal(t, nil)
		ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: g, SessionIdleTimeout: 50 * time.Millisecond})
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g, SessionIdleTimeout: 50 * time.Millisecond})
		run(t, ce)
		run(t, cw)
		sessions := names("race", 4)
		sendAll(t, s, sessions, 1, 10)
		w.waitApplied(t, 40, 60*time.Second)
		drained(t, east, west)
		by := w.verify(t, upTo(sessions, 10))
		t.Logf("applied by region %v; east %+v; west %+v", by, ce.Stats(), cw.Stats())
	})
}

// TestSecondaryCannotGetAhead is the article's open case: the secondary
// region holds message 2 of a session while message 1 is only in the
// primary (the secondary never got it). The secondary must wait, not
// process 2, until the journal says 1 is done; it wakes on the journal's
// notification, not by polling.
func TestSecondaryCannotGetAhead(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		ctx := context.Background()
		// Message 1 reaches the primary only.
		if err := newSender(t, east.client).SendMessage(ctx, withPosition(message("ship", 1), 1), nil); err != nil {
			t.Fatal(err)
		}
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: -1})
		sendAll(t, s, []string{"ship"}, 2, 3)
		jw := w.journal(t, nil)
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g})
		run(t, cw)
		poll.Until(t, 20*time.Second, "the secondary waiting on message 2", func() bool { return cw.Stats().Waits >= 1 })
		if got := w.applied(t); len(got) != 0 {
			t.Fatalf("the secondary applied %v before message 1 was done", got)
		}
		je := w.journal(t, nil)
		ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: g})
		run(t, ce)
		w.waitApplied(t, 3, 30*time.Second)
		drained(t, east, west)
		w.verify(t, map[string]int64{"ship": 3})
		st := cw.Stats()
		if st.Notified == 0 {
			t.Errorf("the secondary's wait did not end by notification: %+v", st)
		}
		if st.JournalReads > 20 {
			t.Errorf("the secondary read the journal %d times while waiting: polling? %+v", st.JournalReads, st)
		}
		t.Logf("east %+v; west %+v", ce.Stats(), st)
	})
}

// TestConsumerDiesMidMessage: the primary consumer stops in the middle of
// message 3 and loses the journal (it can no longer renew its claim, as if
// dead); the secondary takes over when the lease runs out and finishes the
// session, each position once, in order. The primary's late attempt to
// finish is refused.
func TestConsumerDiesMidMessage(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 200 * time.Millisecond})
		pgEast := newProxy(t, pgAddr(t, w))
		je, jw := w.journal(t, pgEast), w.journal(t, nil)
		entered := make(chan struct{})
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		var late atomic.Value
		hung := func(ctx context.Context, wk *geo.Work) error {
			if wk.Position == 3 {
				close(entered)
				<-release // hangs, as a process that stopped would
			}
			return nil
		}
		eastHandler := w.handler(je, hung)
		ce := consumer(t, east, je, func(ctx context.Context, wk *geo.Work) error {
			err := eastHandler(ctx, wk)
			if wk.Position == 3 {
				late.Store(errOrNil{err})
			}
			return err
		}, geo.ConsumerOptions{Granularity: g, Lease: time.Second})
		run(t, ce)
		// Cleanups run last first: the hung handler returns before the
		// consumer is closed, also when the test fails before unblocking it.
		t.Cleanup(unblock)
		sendAll(t, s, []string{"ship"}, 1, 6)
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the primary did not reach message 3 within 30s")
		}
		pgEast.Cut()
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g, Lease: time.Second})
		run(t, cw)
		w.waitApplied(t, 6, 30*time.Second)
		pgEast.Restore("")
		unblock()
		poll.Until(t, 20*time.Second, "the primary's late finish", func() bool { return late.Load() != nil })
		// Its claim was lost: the finish is refused (a version conflict) or
		// never attempted (its context cancelled when the lease ran out).
		if err := late.Load().(errOrNil).err; !errors.Is(err, geo.ErrConflict) && !errors.Is(err, context.Canceled) {
			t.Errorf("the primary's late finish of message 3: %v, want ErrConflict or context.Canceled", err)
		}
		by := w.verify(t, map[string]int64{"ship": 6})
		if by["west"] < 4 {
			t.Errorf("the secondary applied %d messages, want 3..6 at least", by["west"])
		}
		drained(t, east, west)
		t.Logf("applied by region %v; east %+v; west %+v", by, ce.Stats(), cw.Stats())
	})
}

type errOrNil struct{ err error }

// TestJournalBrieflyUnreachable: the journal is cut off from both regions
// while messages flow; processing pauses, resumes when it is back, and no
// position is applied twice or out of order.
func TestJournalBrieflyUnreachable(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 300 * time.Millisecond})
		pg := newProxy(t, pgAddr(t, w))
		je, jw := w.journal(t, pg), w.journal(t, pg)
		ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: g, Lease: 10 * time.Second, JournalRetry: 200 * time.Millisecond})
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g, Lease: 10 * time.Second, JournalRetry: 200 * time.Millisecond})
		run(t, ce)
		run(t, cw)
		sessions := names("pkg", 3)
		sendAll(t, s, sessions, 1, 3)
		w.waitApplied(t, 3, 30*time.Second)
		pg.Cut()
		sendAll(t, s, sessions, 4, 6)
		before := len(w.applied(t))
		poll.Until(t, 20*time.Second, "the consumers finding the journal gone", func() bool {
			return ce.Stats().JournalErrors+cw.Stats().JournalErrors > 0
		})
		if after := len(w.applied(t)); after != before {
			t.Fatalf("%d effects applied while the journal was unreachable", after-before)
		}
		pg.Restore("")
		w.waitApplied(t, 18, 60*time.Second)
		drained(t, east, west)
		by := w.verify(t, upTo(sessions, 6))
		t.Logf("applied by region %v; east %+v; west %+v", by, ce.Stats(), cw.Stats())
	})
}

// TestNamespaceDownWithBacklog: the primary namespace holds a backlog its
// consumer has not processed when it becomes unreachable; the sender keeps
// succeeding on the secondary alone and says so; the secondary processes
// everything; when the primary is back, its backlog is completed as
// copies, nothing applied twice.
func TestNamespaceDownWithBacklog(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 200 * time.Millisecond})
		sessions := names("pkg", 3)
		// The backlog: sent to both, the primary's consumer not running.
		sendAll(t, s, sessions, 1, 4)
		east.px.Cut()
		if p, sec := sendAll(t, s, sessions, 5, 6); p != 0 || sec != 6 {
			t.Fatalf("with the primary down: primary accepted %d, secondary %d; want 0 and 6", p, sec)
		}
		jw := w.journal(t, nil)
		cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: g})
		run(t, cw)
		w.waitApplied(t, 18, 60*time.Second)
		east.px.Restore("")
		je := w.journal(t, nil)
		ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: g})
		run(t, ce)
		sendAll(t, s, sessions, 7, 8)
		w.waitApplied(t, 24, 60*time.Second)
		drained(t, east, west)
		by := w.verify(t, upTo(sessions, 8))
		if se := ce.Stats(); se.Copies < 12 {
			t.Errorf("the primary completed %d copies of its backlog, want all 12: %+v", se.Copies, se)
		}
		t.Logf("applied by region %v; east %+v; west %+v", by, ce.Stats(), cw.Stats())
	})
}

// TestFailedMessageIsDeadLetteredInBothRegions: a handler failing for good
// marks the position Failed; the session moves on; the failing region
// dead-letters its copy with the reason and (PerMessage) so does the
// other.
func TestFailedMessageIsDeadLettered(t *testing.T) {
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		w := newWorld(t)
		east, west := newRegion(t, "east"), newRegion(t, "west")
		s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 200 * time.Millisecond})
		fail := func(ctx context.Context, wk *geo.Work) error {
			if wk.Position == 2 {
				return processor.Permanent(errors.New("address unknown"))
			}
			return nil
		}
		je, jw := w.journal(t, nil), w.journal(t, nil)
		ce := consumer(t, east, je, w.handler(je, fail), geo.ConsumerOptions{Granularity: g})
		cw := consumer(t, west, jw, w.handler(jw, fail), geo.ConsumerOptions{Granularity: g})
		run(t, ce)
		run(t, cw)
		sendAll(t, s, []string{"ship"}, 1, 3)
		poll.Until(t, 30*time.Second, "positions 1 and 3 applied", func() bool { return len(w.applied(t)) == 2 })
		wantDead := int32(1)
		if g == geo.PerMessage {
			wantDead = 2
		}
		poll.Until(t, 30*time.Second, "the dead-lettered copies", func() bool {
			_, _, de := east.counts(t)
			_, _, dw := west.counts(t)
			return de+dw == wantDead
		})
		got := w.applied(t)
		if got[0].position != 1 || got[1].position != 3 {
			t.Fatalf("applied %v, want positions 1 and 3", got)
		}
		rec, err := je.Get(context.Background(), geo.Key{Session: "ship", Position: map[geo.Granularity]int64{geo.PerSession: 0, geo.PerMessage: 2}[g]})
		if err != nil {
			t.Fatal(err)
		}
		if g == geo.PerMessage && (rec.Status != geo.Failed || rec.Reason != geo.ReasonHandlerFailed) {
			t.Errorf("journal record of position 2: %+v", rec)
		}
	})
}

// TestPrunedCopiesCompleted: under PerMessage the journal's done records
// are pruned (geopg.Store.Prune) while the secondary still holds their
// copies; the floor the pruning leaves makes the secondary complete them,
// not process them again, and the session goes on.
func TestPrunedCopiesCompleted(t *testing.T) {
	w := newWorld(t)
	east, west := newRegion(t, "east"), newRegion(t, "west")
	s, _ := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: -1})
	je := w.journal(t, nil)
	ce := consumer(t, east, je, w.handler(je, nil), geo.ConsumerOptions{Granularity: geo.PerMessage})
	run(t, ce)
	sendAll(t, s, []string{"ship"}, 1, 4)
	w.waitApplied(t, 4, 30*time.Second)
	n, err := je.Prune(context.Background(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("pruned %d records, want 3 (positions 1-3; 4 is the newest done)", n)
	}
	jw := w.journal(t, nil)
	cw := consumer(t, west, jw, w.handler(jw, nil), geo.ConsumerOptions{Granularity: geo.PerMessage})
	run(t, cw)
	poll.Until(t, 30*time.Second, "the secondary's copies completed", func() bool { return cw.Stats().Copies == 4 })
	sendAll(t, s, []string{"ship"}, 5, 5)
	w.waitApplied(t, 5, 30*time.Second)
	drained(t, east, west)
	w.verify(t, map[string]int64{"ship": 5})
}
