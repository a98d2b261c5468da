package geo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/processor"
)

// claim is a journal record this consumer holds, with its lease renewed at
// a third of Lease until end or until it is lost (a conflict, or the lease
// running out while the journal cannot be reached).
type claim struct {
	c      *Consumer
	mu     sync.Mutex
	rec    Record
	lost   chan struct{}
	lostMu sync.Once
	quit   chan struct{}
	ended  sync.Once
	done   chan struct{}
}

// hold starts renewing rec; released, if set, is called after end.
func (c *Consumer) hold(rec Record, released func()) *claim {
	cl := &claim{c: c, rec: rec, lost: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go cl.renew(released)
	return cl
}

func (cl *claim) current() Record {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rec
}

func (cl *claim) set(r Record) {
	cl.mu.Lock()
	cl.rec = r
	cl.mu.Unlock()
}

func (cl *claim) lose() { cl.lostMu.Do(func() { close(cl.lost) }) }

// onLost calls f if the claim is lost before the returned function is
// called.
func (cl *claim) onLost(f func()) (unhook func()) {
	stop := make(chan struct{})
	go func() {
		select {
		case <-cl.lost:
			f()
		case <-stop:
		}
	}()
	return func() { close(stop) }
}

// end stops renewing and waits for the renewer to exit.
func (cl *claim) end() {
	cl.ended.Do(func() { close(cl.quit) })
	<-cl.done
}

func (cl *claim) renew(released func()) {
	defer close(cl.done)
	if released != nil {
		defer released()
	}
	c := cl.c
	for {
		if !cl.wait(c.lease / 3) {
			return
		}
		r := cl.current()
		held := r.LeaseUntil
		r.LeaseUntil = c.clock.Now().Add(c.lease)
		ok, err := cl.renewWithin(r, held)
		if !ok {
			return
		}
		switch {
		case err == nil:
			cl.mu.Lock()
			if cl.rec.Version == r.Version {
				cl.rec.LeaseUntil = r.LeaseUntil
			}
			cl.mu.Unlock()
		case errors.Is(err, ErrConflict):
			if cl.current().Version == r.Version { // not just overtaken by our own write
				cl.lose()
				return
			}
		default:
			c.stats.journalErrors.Add(1)
			c.report("renew", r.Key.Session, r.Key.Position, err)
			if !c.clock.Now().Before(cl.current().LeaseUntil) {
				cl.lose() // another region may take over now
				return
			}
		}
	}
}

// renewWithin renews r's lease in the journal, giving up when the lease
// held now ends first: a journal that hangs instead of failing must not
// leave this region believing it holds a claim another region may take.
// ok is false when the claim is lost that way, or ended meanwhile.
func (cl *claim) renewWithin(r Record, held time.Time) (ok bool, err error) {
	c := cl.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a journal that honours ctx returns
	res := make(chan error, 1)
	go func() { res <- c.journal.Renew(ctx, r) }()
	ranOut := make(chan struct{})
	t := c.clock.AfterFunc(held.Sub(c.clock.Now()), func() { close(ranOut) })
	defer t.Stop()
	select {
	case err := <-res:
		return true, err
	case <-ranOut:
		c.stats.journalErrors.Add(1)
		c.report("renew", r.Key.Session, r.Key.Position, errors.New("the journal did not answer before the lease ran out"))
		cl.lose() // another region may take over now
		return false, nil
	case <-cl.quit:
		return false, nil
	}
}

// wait waits d on the consumer's clock; false once the claim is ended.
func (cl *claim) wait(d time.Duration) bool {
	fired := make(chan struct{})
	t := cl.c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-cl.quit:
		t.Stop()
		return false
	}
}

// holdSession makes rec the claim of the Service Bus session s (PerSession),
// ending the one it replaces.
func (c *Consumer) holdSession(s *processor.Session, rec Record) *claim {
	if old, ok := c.claims.Load(s); ok {
		old.(*claim).end()
	}
	cl := c.hold(rec, nil)
	c.claims.Store(s, cl)
	return cl
}

func (c *Consumer) sessionClaim(s *processor.Session) *claim {
	if v, ok := c.claims.Load(s); ok {
		cl := v.(*claim)
		select {
		case <-cl.lost:
			return nil
		default:
			return cl
		}
	}
	return nil
}

// sessionClosed releases the session's record, so that the other region
// need not wait for the lease to run out.
func (c *Consumer) sessionClosed(ctx context.Context, s *processor.Session) {
	v, ok := c.claims.LoadAndDelete(s)
	if !ok {
		return
	}
	cl := v.(*claim)
	cl.end()
	select {
	case <-cl.lost:
		return
	default:
	}
	r := cl.current()
	r.Status, r.LeaseUntil = Pending, time.Time{}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if _, err := c.journal.Replace(rctx, r); err != nil && !errors.Is(err, ErrConflict) {
		c.report("journal", s.ID(), 0, err)
	}
}

// Stats counts what a Consumer did, for the traffic per processed message.
type Stats struct {
	Received      int64 // messages delivered to this consumer
	Processed     int64 // messages whose handler succeeded here
	Failed        int64 // messages whose handler failed for good here
	Copies        int64 // messages settled because the journal said done elsewhere
	DeadLettered  int64 // dead-lettered here (failed, or failed elsewhere, or no position)
	Abandoned     int64 // given back after WaitTimeout
	Waits         int64 // times a message waited for the journal
	Notified      int64 // waits ended by the journal's notification
	JournalReads  int64
	JournalWrites int64 // Create, Replace, Renew, and records committed by the handler (Work.Finish)
	JournalErrors int64 // failed journal operations (unreachable)
}

type counters struct {
	received, processed, failed, copies, deadLettered, abandoned, waits, notified atomic.Int64
	reads, writes, journalErrors                                                  atomic.Int64
}

// Stats returns the consumer's counts so far.
func (c *Consumer) Stats() Stats {
	s := &c.stats
	return Stats{Received: s.received.Load(), Processed: s.processed.Load(), Failed: s.failed.Load(),
		Copies: s.copies.Load(), DeadLettered: s.deadLettered.Load(), Abandoned: s.abandoned.Load(),
		Waits: s.waits.Load(), Notified: s.notified.Load(), JournalReads: s.reads.Load(),
		JournalWrites: s.writes.Load(), JournalErrors: s.journalErrors.Load()}
}

// counted is a Journal that counts reads and writes.
type counted struct {
	Journal
	n *counters
}

func (j counted) Get(ctx context.Context, k Key) (Record, error) {
	j.n.reads.Add(1)
	return j.Journal.Get(ctx, k)
}

func (j counted) Create(ctx context.Context, r Record) (Record, error) {
	j.n.writes.Add(1)
	return j.Journal.Create(ctx, r)
}

func (j counted) Replace(ctx context.Context, r Record) (Record, error) {
	j.n.writes.Add(1)
	return j.Journal.Replace(ctx, r)
}

func (j counted) Renew(ctx context.Context, r Record) error {
	j.n.writes.Add(1)
	return j.Journal.Renew(ctx, r)
}
