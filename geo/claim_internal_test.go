package geo

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
)

// hangingJournal is a journal whose Renew neither succeeds nor fails: it
// waits until its context is done, as a connection that hangs would.
type hangingJournal struct {
	Journal
	renewing chan struct{}
}

func (j hangingJournal) Renew(ctx context.Context, _ Record) error {
	j.renewing <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

// A claim whose renewal hangs is lost when its lease runs out, when
// another region may take the record over, and ending it does not wait
// for the journal.
func TestClaimIsLostWhenARenewalOutlastsTheLease(t *testing.T) {
	start := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	j := hangingJournal{renewing: make(chan struct{}, 1)}
	c := &Consumer{journal: j, lease: 3 * time.Second, clock: clk, logger: slog.New(slog.DiscardHandler)}
	cl := c.hold(Record{Key: Key{Session: "s", Position: 1}, LeaseUntil: start.Add(3 * time.Second)}, nil)
	poll.Until(t, 10*time.Second, "the renewer's wait", func() bool { return clk.Pending() == 1 })
	clk.Advance(time.Second) // a third of the lease: the renewal starts, and hangs
	<-j.renewing
	poll.Until(t, 10*time.Second, "the renewal's deadline", func() bool { return clk.Pending() == 1 })
	select {
	case <-cl.lost:
		t.Fatal("lost before the lease ran out")
	default:
	}
	clk.Advance(2 * time.Second) // the lease held runs out
	if !poll.Wait(10*time.Second, func() bool {
		select {
		case <-cl.lost:
			return true
		default:
			return false
		}
	}) {
		t.Fatal("the claim was not lost when its lease ran out during a renewal that hangs")
	}
	cl.end()
	if n := c.stats.journalErrors.Load(); n != 1 {
		t.Errorf("%d journal errors counted, want 1", n)
	}
}
