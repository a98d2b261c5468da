package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Network bounds of a host (real time: they bound SDK calls).
const (
	acceptTimeout  = 30 * time.Second // one wait for a schedule with a due message
	receiveTimeout = 10 * time.Second // reading the messages of an accepted session
	handleTimeout  = 30 * time.Second // handling them, even while stopping
)

// Run makes the Scheduler a host: it accepts the sessions of schedules
// whose wake-ups (or done reports) are due, MaxConcurrentSessions at a
// time, handles them and releases each session at once, until ctx is
// cancelled; it then finishes the messages in hand and returns ctx.Err().
// Any number of hosts may run on one control queue: the broker gives each
// session to one of them at a time. Run may be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	s.runMu.Lock()
	if s.running {
		s.runMu.Unlock()
		return errors.New("schedule: Run called twice")
	}
	s.running = true
	s.runMu.Unlock()
	var wg sync.WaitGroup
	for range s.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.slot(ctx)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// slot accepts a session with due messages, serves it, and again.
func (s *Scheduler) slot(ctx context.Context) {
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, acceptTimeout)
		r, err := s.client.AcceptNextSessionForQueue(actx, s.queue, nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var sbErr *azservicebus.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout) {
				continue
			}
			s.report(fmt.Errorf("schedule: accepting a session of %s: %w", s.queue, err))
			if !realSleep(ctx, time.Second) {
				return
			}
			continue
		}
		if !s.serve(ctx, r) && !realSleep(ctx, time.Second) {
			return // after a failure, a pause keeps a broken schedule from spinning
		}
	}
}

// serve handles the messages available in one schedule's session, in
// order, and releases it; it reports whether all went well.
func (s *Scheduler) serve(ctx context.Context, r *azservicebus.SessionReceiver) bool {
	defer closeReceiver(r)
	rctx, cancel := context.WithTimeout(ctx, receiveTimeout)
	msgs, err := r.ReceiveMessages(rctx, 32, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: 2 * time.Millisecond})
	cancel()
	if err != nil && len(msgs) == 0 {
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			s.report(fmt.Errorf("schedule %s: receiving: %w", r.SessionID(), err))
			return false
		}
		return true
	}
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), handleTimeout)
	defer hcancel()
	raw, err := r.GetSessionState(hctx, nil)
	if err != nil {
		s.report(fmt.Errorf("schedule %s: reading its state: %w", r.SessionID(), err))
		return false
	}
	st, err := decodeState(raw)
	if err != nil {
		s.report(fmt.Errorf("schedule %s: %w", r.SessionID(), err))
		return false
	}
	for _, m := range msgs {
		h := handling{s: s, st: st, name: r.SessionID()}
		if err := h.handle(hctx, m); err != nil {
			// The session is released with the message unsettled: it comes
			// back, to this host or another, and is handled again.
			s.report(err)
			return false
		}
		if h.save {
			if err := saveState(hctx, r, h.st); err != nil {
				s.report(err)
				return false
			}
		}
		if err := r.CompleteMessage(hctx, m, nil); err != nil {
			s.report(fmt.Errorf("schedule %s: completing %s: %w", h.name, m.MessageID, err))
			return false
		}
		st = h.st
		if s.onEvent != nil {
			for _, e := range h.events {
				s.onEvent(e)
			}
		}
	}
	return true
}

func (s *Scheduler) report(err error) {
	s.log.Warn("schedule host error", "err", err)
	if s.onError != nil {
		s.onError(err)
	}
}

// handling is the handling of one message of a schedule: what it sends
// happens first, then the state is saved (when save is set), then the
// message is completed. A crash anywhere in between makes the message come
// back; handling it again sends the same firings with the same MessageIds
// (the target's duplicate detection drops them) and finds any wake-up it
// scheduled the first time stale or identical.
type handling struct {
	s      *Scheduler
	st     *state
	name   string
	save   bool
	events []Event
}

func (h *handling) event(e Event) {
	e.Schedule = h.name
	h.events = append(h.events, e)
}

func (h *handling) handle(ctx context.Context, m *azservicebus.ReceivedMessage) error {
	kind, gen, nominal, err := controlMessage(m)
	if err != nil {
		h.s.log.Warn("unreadable control message dropped", "schedule", h.name, "message_id", m.MessageID, "err", err)
		return nil
	}
	switch kind {
	case kindTick:
		return h.tick(ctx, gen, nominal)
	case kindDone:
		return h.done(ctx, nominal)
	}
	h.s.log.Warn("unknown control message dropped", "schedule", h.name, "message_id", m.MessageID, "kind", kind)
	return nil
}

// tick handles the wake-up for the firing at nominal. It is identified by
// the generation and nominal time it carries, never by the host's clock: a
// wake-up the state is waiting for fires, whatever time the host thinks it
// is, and any other is stale.
func (h *handling) tick(ctx context.Context, gen int64, nominal time.Time) error {
	st := h.st
	if st == nil || st.Paused || st.Finished || gen != st.Generation || !nominal.Equal(st.Next) {
		h.s.m.stale.Inc()
		h.event(Event{Kind: EventStale, Nominal: nominal})
		return nil
	}
	d := st.Def.withDefaults()
	times, err := d.validate(st.Created)
	if err != nil {
		return err
	}
	now := h.s.clk.Now()
	late := now.Sub(nominal.Add(jitter(d.Name, nominal, d.Jitter)))
	h.s.m.lateness.Observe(max(late, 0).Seconds())
	fire := []time.Time{nominal}
	trigger := TriggerSchedule
	next := times.Next(nominal)
	if late > time.Duration(d.MisfireThreshold) {
		// Missed while no host ran: the occurrences from nominal to now.
		trigger = TriggerMisfire
		keep := map[MisfirePolicy]int{MisfireOnce: 1, MisfireAll: d.MisfireLimit, MisfireSkip: 0}[d.Misfire]
		fire = fire[:min(1, keep)]
		missed := int64(1)
		for t := next; !t.IsZero() && !t.After(now) && missed < maxCounted; t = times.Next(t) {
			missed++
			if len(fire) < keep {
				fire = append(fire, t)
			}
		}
		next = times.Next(now)
		notSent := missed - int64(len(fire))
		st.Missed += notSent
		h.s.m.misfires.WithLabelValues(string(d.Misfire)).Add(float64(notSent))
		h.event(Event{Kind: EventMisfire, Nominal: nominal, Count: notSent, Lateness: late})
	}
	if err := h.fire(ctx, d, fire, trigger, now); err != nil {
		return err
	}
	if d.MaxFirings > 0 && st.Firings >= d.MaxFirings {
		next = time.Time{}
	}
	st.Next, st.TickSeq = time.Time{}, 0
	if next.IsZero() {
		st.Finished = true
		h.event(Event{Kind: EventFinished, Nominal: nominal})
	} else if err := h.s.scheduleTick(ctx, st, next); err != nil {
		return err
	}
	h.save = true
	h.event(Event{Kind: EventTick, Nominal: nominal, Next: st.Next, Lateness: late})
	return nil
}

// maxCounted bounds the count of missed firings after a long outage.
const maxCounted = 1_000_000

// fire sends the firings at the given nominal times under the overlap
// policy and MaxFirings.
func (h *handling) fire(ctx context.Context, d Definition, nominals []time.Time, trigger string, now time.Time) error {
	st := h.st
	if d.Overlap != OverlapAllow {
		st.Running = slices.DeleteFunc(st.Running, func(t time.Time) bool { return now.Sub(t) > time.Duration(d.MaxRunTime) })
	}
	for _, n := range nominals {
		if d.MaxFirings > 0 && st.Firings >= d.MaxFirings {
			break
		}
		if d.Overlap != OverlapAllow && len(st.Running) > 0 {
			if d.Overlap == OverlapQueue && len(st.Queued) < d.QueueLimit {
				st.Queued = append(st.Queued, n)
				h.s.m.overlaps.WithLabelValues("queued").Inc()
				h.event(Event{Kind: EventQueued, Nominal: n})
				continue
			}
			st.Skipped++
			h.s.m.overlaps.WithLabelValues("skipped").Inc()
			h.event(Event{Kind: EventOverlapSkipped, Nominal: n})
			continue
		}
		if err := h.s.send(ctx, d, n, trigger); err != nil {
			return err
		}
		if d.Overlap != OverlapAllow {
			st.Running = append(st.Running, n)
		}
		st.Firings++
		if n.After(st.LastFired) {
			st.LastFired = n
		}
		h.event(Event{Kind: EventFired, Nominal: n, Trigger: trigger, Lateness: now.Sub(n)})
	}
	return nil
}

// done handles a worker's report that the firing at nominal finished: the
// firing stops counting as running, and a queued firing is sent.
func (h *handling) done(ctx context.Context, nominal time.Time) error {
	st := h.st
	if st == nil {
		return nil
	}
	i := slices.IndexFunc(st.Running, nominal.Equal)
	if i < 0 {
		return nil // reported twice, or expired by MaxRunTime
	}
	st.Running = slices.Delete(st.Running, i, i+1)
	h.save = true
	h.event(Event{Kind: EventDone, Nominal: nominal})
	d := st.Def.withDefaults()
	if len(st.Queued) == 0 || len(st.Running) > 0 || st.Paused {
		return nil
	}
	q := st.Queued[0]
	st.Queued = st.Queued[1:]
	return h.fire(ctx, d, []time.Time{q}, TriggerQueued, h.s.clk.Now())
}
