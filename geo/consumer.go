package geo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/processor"
)

// Granularity chooses what a journal record locks.
type Granularity int

const (
	// PerSession keeps one record per session: the next position and the
	// claim on the whole session, held by one region while it holds the
	// Service Bus session.
	PerSession Granularity = iota
	// PerMessage keeps one record per message, claimed, then Completed or
	// Failed; either region may process the next message of a session
	// once the one before is done.
	PerMessage
)

// String returns the granularity's name, "PerSession" or "PerMessage".
func (g Granularity) String() string {
	if g == PerMessage {
		return "PerMessage"
	}
	return "PerSession"
}

// Dead-letter reasons the consumer gives, besides a failed message's own.
const (
	// ReasonNoPosition: the message carries no valid PositionProperty.
	ReasonNoPosition = "GeoNoPosition"
	// ReasonHandlerFailed: the handler failed for the last time.
	ReasonHandlerFailed = "GeoHandlerFailed"
)

// Work is a message a region has claimed and may process.
type Work struct {
	Region   string
	Session  string
	Position int64
	Message  *azservicebus.ReceivedMessage
	cl       *claim
	g        Granularity
	mu       sync.Mutex
	done     *Record
	writes   *atomic.Int64
}

// Claim returns the journal record the region holds for this message (the
// session's under PerSession).
func (w *Work) Claim() Record { return w.cl.current() }

// Finished returns the journal record that marks the message done: what a
// store that commits the handler's effects with the journal (for example
// geopg.Store.CompleteWith) replaces the claim with, in the effects'
// transaction.
func (w *Work) Finished() Record {
	return finished(w.g, w.cl.current(), w.Position, w.Message.MessageID, Completed, "")
}

// Finish tells the consumer that r, the record Finished returned, was
// committed by the handler (with its effects), so that the consumer does
// not write it again. Stores that commit effects with the journal call it.
func (w *Work) Finish(r Record) {
	w.writes.Add(1)
	w.mu.Lock()
	w.done = &r
	w.mu.Unlock()
}

func (w *Work) finishedByHandler() *Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// Handler processes one claimed message. Returning nil finishes it in the
// journal and completes it; an error abandons it for a retry, or
// dead-letters it (and marks it Failed in the journal) when it is wrapped
// with processor.Permanent or the message has been delivered MaxAttempts
// times. ctx is cancelled when the claim or the session lock is lost.
type Handler func(ctx context.Context, w *Work) error

// ConsumerOptions configure a Consumer. The zero value is usable.
type ConsumerOptions struct {
	// Region names this consumer's region in the journal (default
	// "region"); a random suffix makes each Consumer a distinct owner.
	Region string
	// Granularity chooses the journal records (default PerSession).
	Granularity Granularity
	// Lease is how long a claim lasts without renewal; it is renewed at a
	// third of it. After a consumer dies, the other region takes over
	// within Lease (default 30 seconds).
	Lease time.Duration
	// WaitTimeout is how long a message is held waiting for the journal
	// (the other region working, an earlier position not done) before it
	// is abandoned and the session released (default 1 minute).
	WaitTimeout time.Duration
	// MaxConcurrentSessions is how many sessions are held at once
	// (default 8).
	MaxConcurrentSessions int
	// SessionIdleTimeout releases a session after this long without a
	// message (default 1 minute).
	SessionIdleTimeout time.Duration
	// MaxAttempts dead-letters a message whose handler fails on its
	// MaxAttempts-th delivery (zero: the entity's MaxDeliveryCount
	// decides). Deliveries a wait ended in count too.
	MaxAttempts int
	// Backoff is how long to hold a failed message before abandoning it
	// (nil: at once).
	Backoff func(deliveryCount int) time.Duration
	// JournalRetry is the longest pause between attempts at an
	// unreachable journal (default 2 seconds; they start at 50 ms).
	JournalRetry time.Duration
	// OnError receives failures the consumer cannot return; it must be
	// safe for concurrent use.
	OnError func(error)
	// Logger logs the same failures (default: discarded).
	Logger *slog.Logger
	// Clock times leases, waits and retries (default clock.Real()).
	Clock clock.Clock
}

// Consumer receives the sessions of one region's namespace and processes
// their messages in order, once across regions, through the Journal.
type Consumer struct {
	journal Journal
	handler Handler
	owner   string
	region  string
	g       Granularity
	lease   time.Duration
	wait    time.Duration
	retry   time.Duration
	max     int
	onError func(error)
	logger  *slog.Logger
	clock   clock.Clock
	stats   counters
	proc    *processor.SessionProcessor
	claims  sync.Map // *processor.Session → *claim (PerSession)
}

// NewConsumer returns a Consumer of a session-enabled entity of one
// region's namespace; Run starts it.
func NewConsumer(client *azservicebus.Client, entity processor.Entity, j Journal, h Handler, o *ConsumerOptions) (*Consumer, error) {
	if client == nil || j == nil || h == nil {
		return nil, errors.New("geo: NewConsumer needs a client, a journal and a handler")
	}
	if o == nil {
		o = &ConsumerOptions{}
	}
	if o.Granularity != PerSession && o.Granularity != PerMessage {
		return nil, fmt.Errorf("geo: unknown granularity %d", o.Granularity)
	}
	if o.Lease < 0 || o.WaitTimeout < 0 || o.JournalRetry < 0 {
		return nil, errors.New("geo: Lease, WaitTimeout and JournalRetry must not be negative")
	}
	c := &Consumer{handler: h, region: o.Region, g: o.Granularity, lease: o.Lease, wait: o.WaitTimeout,
		retry: o.JournalRetry, max: o.MaxAttempts, onError: o.OnError, logger: o.Logger, clock: o.Clock}
	if c.region == "" {
		c.region = "region"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c.owner = c.region + "#" + hex.EncodeToString(b)
	if c.lease == 0 {
		c.lease = 30 * time.Second
	}
	if c.wait == 0 {
		c.wait = time.Minute
	}
	if c.retry == 0 {
		c.retry = 2 * time.Second
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = clock.Real()
	}
	c.journal = counted{j, &c.stats}
	p, err := processor.NewSession(client, entity, c.handle, &processor.SessionOptions{
		MaxConcurrentSessions:        o.MaxConcurrentSessions,
		MaxConcurrentCallsPerSession: 1,
		SessionIdleTimeout:           o.SessionIdleTimeout,
		Retry:                        processor.RetryPolicy{Backoff: o.Backoff},
		OnError:                      o.OnError,
		OnSessionClose:               c.sessionClosed,
		Logger:                       o.Logger,
		Clock:                        o.Clock,
	})
	if err != nil {
		return nil, err
	}
	c.proc = p
	return c, nil
}

// Owner returns the name this consumer claims journal records under.
func (c *Consumer) Owner() string { return c.owner }

// Run receives and processes until Close is called or ctx is cancelled;
// see processor.SessionProcessor.Run.
func (c *Consumer) Run(ctx context.Context) error { return c.proc.Run(ctx) }

// Close stops receiving and waits for the messages in flight; see
// processor.SessionProcessor.Close.
func (c *Consumer) Close(ctx context.Context) error { return c.proc.Close(ctx) }

// Error is a failure the consumer reports to OnError.
type Error struct {
	Op       string // "journal", "claim", "complete", "abandon", "deadletter", "watch"
	Session  string
	Position int64
	Err      error
}

// Error says what failed, for which session and position, and why.
func (e *Error) Error() string {
	return fmt.Sprintf("geo: %s, session %s position %d: %v", e.Op, e.Session, e.Position, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func (c *Consumer) report(op, session string, pos int64, err error) {
	c.logger.Warn("geo consumer", "op", op, "session", session, "position", pos, "err", err)
	if c.onError != nil {
		c.onError(&Error{Op: op, Session: session, Position: pos, Err: err})
	}
}

// action is what decide found the consumer must do with a message.
type action int

const (
	actRun action = iota
	actComplete
	actDeadLetter
	actWait
)

type decision struct {
	act    action
	reason string    // actDeadLetter
	until  time.Time // actWait: when the holder's lease runs out (zero: none)
	cl     *claim    // actRun
}

const settleTimeout = 30 * time.Second

// handle is the processor's handler: decide what the journal allows, wait
// for it if need be, then run, complete or dead-letter.
func (c *Consumer) handle(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
	c.stats.received.Add(1)
	sid := s.ID()
	pos, err := Position(m)
	if err != nil {
		c.report("position", sid, 0, err)
		return c.deadLetter(ctx, s, m, ReasonNoPosition, err.Error())
	}
	deadline := c.clock.Now().Add(c.wait)
	pause := 50 * time.Millisecond
	for {
		changed, stop, werr := c.journal.Watch(ctx, sid)
		if werr != nil {
			c.report("watch", sid, pos, werr)
			changed, stop = nil, func() {}
		}
		d, err := c.decide(ctx, s, pos, m)
		if err != nil {
			stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.stats.journalErrors.Add(1)
			c.report("journal", sid, pos, err)
			if !c.sleep(ctx, pause) {
				return ctx.Err()
			}
			pause = min(2*pause, c.retry)
			continue
		}
		pause = 50 * time.Millisecond
		switch d.act {
		case actRun:
			stop()
			return c.run(ctx, s, m, pos, d.cl)
		case actComplete:
			stop()
			c.stats.copies.Add(1)
			return c.settle(ctx, "complete", sid, pos, func(ctx context.Context) error {
				return s.Receiver().CompleteMessage(ctx, m, nil)
			})
		case actDeadLetter:
			stop()
			c.stats.copies.Add(1)
			return c.deadLetter(ctx, s, m, d.reason, "the journal records this position as failed")
		}
		c.stats.waits.Add(1)
		woke := c.await(ctx, changed, d.until, deadline)
		stop()
		switch woke {
		case wokeCtx:
			return ctx.Err()
		case wokeDeadline:
			// Give the message and the session back instead of holding them.
			c.stats.abandoned.Add(1)
			s.Release()
			return c.settle(ctx, "abandon", sid, pos, func(ctx context.Context) error {
				return s.Receiver().AbandonMessage(ctx, m, nil)
			})
		case wokeNotified:
			c.stats.notified.Add(1)
		}
	}
}

type woke int

const (
	wokeNotified woke = iota
	wokeLease
	wokeDeadline
	wokeCtx
)

// await waits for a change in the journal, the holder's lease to run out,
// the deadline or ctx: on timers and the journal's notification, no
// polling.
func (c *Consumer) await(ctx context.Context, changed <-chan struct{}, until, deadline time.Time) woke {
	fired := make(chan woke, 2)
	dt := c.clock.AfterFunc(deadline.Sub(c.clock.Now()), func() { fired <- wokeDeadline })
	defer dt.Stop()
	if !until.IsZero() {
		lt := c.clock.AfterFunc(until.Sub(c.clock.Now())+time.Millisecond, func() { fired <- wokeLease })
		defer lt.Stop()
	}
	select {
	case <-changed:
		return wokeNotified
	case w := <-fired:
		return w
	case <-ctx.Done():
		return wokeCtx
	}
}

func (c *Consumer) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// decide reads the journal and, when the message may be processed here,
// claims it.
func (c *Consumer) decide(ctx context.Context, s *processor.Session, pos int64, m *azservicebus.ReceivedMessage) (decision, error) {
	if c.g == PerMessage {
		return c.decideMessage(ctx, s.ID(), pos, m)
	}
	return c.decideSession(ctx, s, pos, m)
}

func (c *Consumer) newClaim(now time.Time, k Key) Record {
	return Record{Key: k, Status: Working, Owner: c.owner, LeaseUntil: now.Add(c.lease)}
}

func (c *Consumer) decideSession(ctx context.Context, s *processor.Session, pos int64, m *azservicebus.ReceivedMessage) (decision, error) {
	k := Key{Session: s.ID()}
	now := c.clock.Now()
	rec, err := c.journal.Get(ctx, k)
	if errors.Is(err, ErrNotFound) {
		if pos != 1 {
			return decision{act: actWait}, nil // an earlier position is not in the journal yet
		}
		r := c.newClaim(now, k)
		r.Next = 1
		if rec, err = c.journal.Create(ctx, r); errors.Is(err, ErrConflict) {
			return c.decideSession(ctx, s, pos, m)
		} else if err != nil {
			return decision{}, err
		}
		return decision{act: actRun, cl: c.holdSession(s, rec)}, nil
	}
	if err != nil {
		return decision{}, err
	}
	switch {
	case pos < rec.Next:
		return decision{act: actComplete}, nil
	case pos > rec.Next:
		return decision{act: actWait}, nil
	}
	if cl := c.sessionClaim(s); cl != nil && cl.current().Version == rec.Version && rec.Owner == c.owner {
		return decision{act: actRun, cl: cl}, nil
	}
	if rec.Status == Working && rec.Owner != c.owner && now.Before(rec.LeaseUntil) {
		return decision{act: actWait, until: rec.LeaseUntil}, nil
	}
	r := c.newClaim(now, k)
	r.Next, r.MessageID, r.Reason, r.Version = rec.Next, rec.MessageID, rec.Reason, rec.Version
	if rec, err = c.journal.Replace(ctx, r); errors.Is(err, ErrConflict) {
		return c.decideSession(ctx, s, pos, m)
	} else if err != nil {
		return decision{}, err
	}
	return decision{act: actRun, cl: c.holdSession(s, rec)}, nil
}

func (c *Consumer) decideMessage(ctx context.Context, sid string, pos int64, m *azservicebus.ReceivedMessage) (decision, error) {
	k := Key{Session: sid, Position: pos}
	now := c.clock.Now()
	rec, err := c.journal.Get(ctx, k)
	if errors.Is(err, ErrNotFound) {
		prevDone := false
		if pos > 1 {
			prev, err := c.journal.Get(ctx, Key{Session: sid, Position: pos - 1})
			switch {
			case err == nil && prev.Status != Completed && prev.Status != Failed:
				return decision{act: actWait}, nil // the one before is not done: never get ahead
			case err == nil:
				prevDone = true
			case !errors.Is(err, ErrNotFound):
				return decision{}, err
			}
		}
		if !prevDone {
			// No record before: the session is new, or its done records
			// were pruned below the floor its position-0 record keeps.
			floor, err := c.journal.Get(ctx, Key{Session: sid})
			switch {
			case err == nil && pos < floor.Next:
				return decision{act: actComplete}, nil
			case err == nil && pos > floor.Next, errors.Is(err, ErrNotFound) && pos > 1:
				return decision{act: actWait}, nil
			case err != nil && !errors.Is(err, ErrNotFound):
				return decision{}, err
			}
		}
		r := c.newClaim(now, k)
		r.MessageID = m.MessageID
		if rec, err = c.journal.Create(ctx, r); errors.Is(err, ErrConflict) {
			return c.decideMessage(ctx, sid, pos, m)
		} else if err != nil {
			return decision{}, err
		}
		return decision{act: actRun, cl: c.hold(rec, nil)}, nil
	}
	if err != nil {
		return decision{}, err
	}
	switch {
	case rec.Status == Completed:
		return decision{act: actComplete}, nil
	case rec.Status == Failed:
		return decision{act: actDeadLetter, reason: rec.Reason}, nil
	case rec.Status == Working && rec.Owner != c.owner && now.Before(rec.LeaseUntil):
		return decision{act: actWait, until: rec.LeaseUntil}, nil
	}
	r := c.newClaim(now, k)
	r.MessageID, r.Version = m.MessageID, rec.Version
	if rec, err = c.journal.Replace(ctx, r); errors.Is(err, ErrConflict) {
		return c.decideMessage(ctx, sid, pos, m)
	} else if err != nil {
		return decision{}, err
	}
	return decision{act: actRun, cl: c.hold(rec, nil)}, nil
}

// finished returns the record that marks position pos done (status
// Completed or Failed) in place of the claim cur.
func finished(g Granularity, cur Record, pos int64, messageID string, st Status, reason string) Record {
	r := cur
	r.MessageID, r.Reason = messageID, reason
	if g == PerMessage {
		r.Status = st
	} else {
		r.Next = pos + 1
	}
	return r
}

// done reports whether rec says position pos was finished by this
// consumer (a store that wrote it in the handler's transaction).
func (c *Consumer) done(rec Record, pos int64) bool {
	if c.g == PerMessage {
		return rec.Owner == c.owner && (rec.Status == Completed || rec.Status == Failed)
	}
	return rec.Owner == c.owner && rec.Next > pos
}

// run processes a claimed message, then finishes it in the journal and
// settles it.
func (c *Consumer) run(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage, pos int64, cl *claim) error {
	sid := s.ID()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unhook := cl.onLost(cancel)
	defer unhook()
	if c.g == PerMessage {
		defer cl.end()
	}
	w := &Work{Region: c.region, Session: sid, Position: pos, Message: m, cl: cl, g: c.g, writes: &c.stats.writes}
	herr := call(func() error { return c.handler(hctx, w) })
	if herr == nil {
		if r := w.finishedByHandler(); r != nil {
			cl.set(*r)
		} else if err := c.finish(ctx, cl, pos, m, Completed, ""); err != nil {
			return err
		}
		c.stats.processed.Add(1)
		return c.settle(ctx, "complete", sid, pos, func(ctx context.Context) error {
			return s.Receiver().CompleteMessage(ctx, m, nil)
		})
	}
	c.report("handle", sid, pos, herr)
	if processor.IsPermanent(herr) || (c.max > 0 && int(m.DeliveryCount) >= c.max) {
		reason := ReasonHandlerFailed
		if err := c.finish(ctx, cl, pos, m, Failed, reason); err != nil {
			return err
		}
		c.stats.failed.Add(1)
		return c.deadLetter(ctx, s, m, reason, herr.Error())
	}
	if c.g == PerMessage {
		// Let go of the claim so that either region may try again.
		r := cl.current()
		r.Status, r.LeaseUntil = Pending, time.Time{}
		if _, err := c.journal.Replace(context.WithoutCancel(ctx), r); err != nil {
			c.report("journal", sid, pos, err)
		}
	}
	return herr // the processor abandons it, after Backoff
}

// finish writes the record that marks pos done, retrying while the
// journal is unreachable. It fails (and the message is left to its lock's
// expiry) only when the claim was lost to another consumer.
func (c *Consumer) finish(hard context.Context, cl *claim, pos int64, m *azservicebus.ReceivedMessage, st Status, reason string) error {
	ctx := context.WithoutCancel(hard)
	pause := 50 * time.Millisecond
	for {
		cur := cl.current()
		rec, err := c.journal.Replace(ctx, finished(c.g, cur, pos, m.MessageID, st, reason))
		if err == nil {
			cl.set(rec)
			return nil
		}
		if errors.Is(err, ErrConflict) {
			got, gerr := c.journal.Get(ctx, cur.Key)
			if gerr == nil && c.done(got, pos) {
				cl.set(got)
				return nil // written in the handler's transaction
			}
			if gerr == nil {
				c.report("claim", cur.Key.Session, pos, fmt.Errorf("lost the claim before finishing: %w", err))
				cl.lose()
				return processor.ErrSettled
			}
			err = gerr
		}
		c.stats.journalErrors.Add(1)
		c.report("journal", cur.Key.Session, pos, err)
		if !c.sleep(hard, pause) {
			return err
		}
		pause = min(2*pause, c.retry)
	}
}

func (c *Consumer) settle(ctx context.Context, op, sid string, pos int64, f func(context.Context) error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := f(sctx); err != nil {
		c.report(op, sid, pos, err)
	}
	return processor.ErrSettled
}

func (c *Consumer) deadLetter(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage, reason, desc string) error {
	if len(desc) > 1024 {
		desc = desc[:1024]
	}
	c.stats.deadLettered.Add(1)
	pos, _ := Position(m)
	return c.settle(ctx, "deadletter", s.ID(), pos, func(ctx context.Context) error {
		return s.Receiver().DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
	})
}

// call runs f, turning a panic into an error.
func call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return f()
}
