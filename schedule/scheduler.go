package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Scheduler. The zero value is usable.
type Options struct {
	// Clock is the scheduler's time (default clock.Real()): when a
	// definition is created or changed, the next firing is computed from
	// its Now, and a host compares its Now with a firing's due time to
	// detect misfires. Tests on busbartest's fake clock pass srv.Clock().
	// Waits that bound the SDK's network calls stay on real time.
	Clock clock.Clock
	// MaxConcurrentSessions is how many schedules a host handles at once
	// (default 16).
	MaxConcurrentSessions int
	// Logger receives the scheduler's logs (default: discarded).
	Logger *slog.Logger
	// Registerer, when set, has the scheduler's Prometheus metrics
	// registered (firings, lateness, misfires, overlaps, stale wake-ups,
	// changes).
	Registerer prometheus.Registerer
	// OnEvent is called by a host after it has handled a message of a
	// schedule and settled it. It must be safe for concurrent use.
	OnEvent func(Event)
	// OnError receives failures a host cannot return (a receive, a send, a
	// settlement). It must be safe for concurrent use.
	OnError func(error)
}

// EventKind is what happened to a schedule.
type EventKind string

// The events a host reports.
const (
	EventFired          EventKind = "fired"           // a firing was sent
	EventTick           EventKind = "tick"            // a wake-up was handled; Next is the next one
	EventStale          EventKind = "stale"           // a wake-up for an older version of the schedule was discarded
	EventMisfire        EventKind = "misfire"         // the wake-up came later than MisfireThreshold; Count firings were missed
	EventOverlapSkipped EventKind = "overlap-skipped" // a firing was dropped because the previous one still ran
	EventQueued         EventKind = "queued"          // a firing was held back until the previous one is done
	EventDone           EventKind = "done"            // a worker reported a firing done
	EventFinished       EventKind = "finished"        // the schedule passed its End or MaxFirings
)

// Event is one thing a host did to a schedule.
type Event struct {
	Kind     EventKind
	Schedule string
	Nominal  time.Time     // the firing concerned
	Next     time.Time     // EventTick: the next nominal firing, zero when none
	Lateness time.Duration // EventFired, EventTick: how late by the host's clock
	Trigger  string        // EventFired: PropTrigger's value
	Count    int64         // EventMisfire: firings missed and not sent
}

// Scheduler keeps schedules in the sessions of a session-enabled control
// queue. Its operations (Put, Pause, Resume, Trigger, Delete, Get, List)
// work without a host running; Run makes it a host, which sends the
// firings. Any number of Schedulers may work on one control queue.
type Scheduler struct {
	client   *azservicebus.Client
	queue    string
	clk      clock.Clock
	log      *slog.Logger
	onEvent  func(Event)
	onError  func(error)
	sessions int
	m        *metrics
	senders  sync.Map // entity -> *azservicebus.Sender
	sendMu   sync.Mutex
	runMu    sync.Mutex
	running  bool
}

// New returns a Scheduler on queue, a session-enabled queue that holds
// nothing but schedules.
func New(client *azservicebus.Client, queue string, o *Options) (*Scheduler, error) {
	if client == nil || queue == "" {
		return nil, errors.New("schedule: New needs a client and a control queue")
	}
	if o == nil {
		o = &Options{}
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("schedule: registering metrics: %w", err)
	}
	s := &Scheduler{client: client, queue: queue, clk: o.Clock, log: o.Logger, onEvent: o.OnEvent, onError: o.OnError,
		sessions: 16, m: m}
	if s.clk == nil {
		s.clk = clock.Real()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.MaxConcurrentSessions > 0 {
		s.sessions = o.MaxConcurrentSessions
	}
	return s, nil
}

// Queue returns the control queue.
func (s *Scheduler) Queue() string { return s.queue }

// Put creates the schedule d.Name, or replaces its definition. A definition
// equal to the stored one changes nothing (changed is false), so a program
// may Put its schedules every time it starts. A changed one takes effect at
// once: the pending wake-up is cancelled and the next firing computed anew
// from now, whether it is sooner or later than the old one.
func (s *Scheduler) Put(ctx context.Context, d Definition) (info Info, changed bool, err error) {
	if _, err := d.validate(s.clk.Now()); err != nil {
		return Info{}, false, err
	}
	hash := d.hash()
	err = s.withSession(ctx, d.Name, func(r *azservicebus.SessionReceiver, st *state) (*state, error) {
		if st != nil && st.Hash == hash {
			info = st.info()
			return nil, nil
		}
		now := s.clk.Now()
		if st == nil {
			st = &state{Format: stateFormat, Created: now}
		}
		st.Def, st.Hash, st.Finished = d, hash, false
		if err := s.reschedule(ctx, st, now); err != nil {
			return nil, err
		}
		changed = true
		info = st.info()
		return st, nil
	})
	if changed {
		s.m.changes.WithLabelValues("put").Inc()
	}
	return info, changed, err
}

// reschedule bumps the generation (so wake-ups already scheduled are
// recognised as stale) and schedules the first firing after now (and after
// the last one sent), unless the schedule is paused or has no more.
func (s *Scheduler) reschedule(ctx context.Context, st *state, now time.Time) error {
	st.Generation++
	st.Updated = now
	st.Next, st.TickSeq = time.Time{}, 0
	if st.Paused {
		return nil
	}
	times, err := st.Def.validate(st.Created)
	if err != nil {
		return err
	}
	after := now
	if st.LastFired.After(after) {
		after = st.LastFired
	}
	next := times.Next(after)
	if next.IsZero() || (st.Def.MaxFirings > 0 && st.Firings >= st.Def.MaxFirings) {
		st.Finished = true
		return nil
	}
	return s.scheduleTick(ctx, st, next)
}

// scheduleTick schedules the wake-up for the firing at nominal (delayed by
// the jitter) and records it.
func (s *Scheduler) scheduleTick(ctx context.Context, st *state, nominal time.Time) error {
	snd, err := s.sender(s.queue)
	if err != nil {
		return err
	}
	due := nominal.Add(jitter(st.Def.Name, nominal, st.Def.Jitter))
	seqs, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{tickMessage(st.Def.Name, st.Generation, nominal)}, due, nil)
	if err != nil {
		return fmt.Errorf("schedule %s: scheduling the wake-up for %s: %w", st.Def.Name, formatNominal(nominal), err)
	}
	st.Next, st.TickSeq = nominal, seqs[0]
	return nil
}

// Pause stops the schedule from firing until Resume; firings that come due
// meanwhile are not sent, then or later.
func (s *Scheduler) Pause(ctx context.Context, name string) error {
	return s.change(ctx, name, "pause", func(st *state, now time.Time) (bool, error) {
		if st.Paused {
			return false, nil
		}
		st.Paused = true
		return true, s.reschedule(ctx, st, now)
	})
}

// Resume lets a paused schedule fire again, from its next firing after now.
func (s *Scheduler) Resume(ctx context.Context, name string) error {
	return s.change(ctx, name, "resume", func(st *state, now time.Time) (bool, error) {
		if !st.Paused {
			return false, nil
		}
		st.Paused = false
		return true, s.reschedule(ctx, st, now)
	})
}

// Trigger sends a firing now, with the current time as its nominal time
// and TriggerManual; the schedule's own firings are unchanged. It returns
// the nominal time.
func (s *Scheduler) Trigger(ctx context.Context, name string) (time.Time, error) {
	var at time.Time
	err := s.change(ctx, name, "trigger", func(st *state, now time.Time) (bool, error) {
		at = now.UTC()
		if err := s.send(ctx, st.Def, at, TriggerManual); err != nil {
			return false, err
		}
		st.Triggered++
		st.Updated = now
		if st.Def.withDefaults().Overlap != OverlapAllow {
			st.Running = append(st.Running, at)
		}
		return true, nil
	})
	return at, err
}

// Delete removes the schedule: its pending wake-up is cancelled and its
// state cleared. Firings already sent are not recalled.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	var seq int64
	err := s.withSession(ctx, name, func(r *azservicebus.SessionReceiver, st *state) (*state, error) {
		if st == nil {
			return nil, ErrNotFound
		}
		seq = st.TickSeq
		if err := r.SetSessionState(ctx, nil, nil); err != nil {
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	s.m.changes.WithLabelValues("delete").Inc()
	s.cancel(ctx, name, seq)
	return nil
}

// Get returns the schedule name, or ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, name string) (Info, error) {
	var info Info
	err := s.withSession(ctx, name, func(_ *azservicebus.SessionReceiver, st *state) (*state, error) {
		if st == nil {
			return nil, ErrNotFound
		}
		info = st.info()
		return nil, nil
	})
	return info, err
}

// List returns every schedule of the control queue, by name.
func (s *Scheduler) List(ctx context.Context) ([]Info, error) {
	pager := s.client.NewListSessionsForQueuePager(s.queue, nil)
	var names []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("schedule: listing the sessions of %s: %w", s.queue, err)
		}
		names = append(names, page.Sessions...)
	}
	slices.Sort(names)
	out := make([]Info, 0, len(names))
	for _, n := range names {
		info, err := s.Get(ctx, n)
		if errors.Is(err, ErrNotFound) {
			continue // a deleted schedule with messages left over
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Done reports that the work of firing f is finished, for the overlap
// policies skip and queue: it lets the next firing run (and sends one that
// was queued).
func (s *Scheduler) Done(ctx context.Context, f Firing) error {
	snd, err := s.sender(s.queue)
	if err != nil {
		return err
	}
	id := "done-" + f.Nominal.UTC().Format("20060102T150405.999999999Z")
	m := &azservicebus.Message{MessageID: &id, SessionID: &f.Schedule, Body: []byte{},
		ApplicationProperties: map[string]any{propKind: kindDone, PropScheduledFireTime: formatNominal(f.Nominal)}}
	if err := snd.SendMessage(ctx, m, nil); err != nil {
		return fmt.Errorf("schedule %s: reporting %s done: %w", f.Schedule, formatNominal(f.Nominal), err)
	}
	return nil
}

// change runs fn on the existing schedule name under its session lock and
// saves the state when fn reports a change.
func (s *Scheduler) change(ctx context.Context, name, op string, fn func(st *state, now time.Time) (bool, error)) error {
	changed := false
	err := s.withSession(ctx, name, func(_ *azservicebus.SessionReceiver, st *state) (*state, error) {
		if st == nil {
			return nil, ErrNotFound
		}
		ch, err := fn(st, s.clk.Now())
		if err != nil || !ch {
			return nil, err
		}
		changed = true
		return st, nil
	})
	if changed && err == nil {
		s.m.changes.WithLabelValues(op).Inc()
	}
	return err
}

// withSession locks the schedule's session, reads its state and runs fn;
// when fn returns a state, it is saved, and then the wake-up it replaced (if
// any) is cancelled. The session is then released.
func (s *Scheduler) withSession(ctx context.Context, name string, fn func(*azservicebus.SessionReceiver, *state) (*state, error)) error {
	r, err := s.lock(ctx, name)
	if err != nil {
		return err
	}
	defer closeReceiver(r)
	raw, err := r.GetSessionState(ctx, nil)
	if err != nil {
		return fmt.Errorf("schedule %s: reading its state: %w", name, err)
	}
	st, err := decodeState(raw)
	if err != nil {
		return err
	}
	var oldSeq int64
	if st != nil {
		oldSeq = st.TickSeq
	}
	next, err := fn(r, st)
	if err != nil || next == nil {
		return err
	}
	if err := saveState(ctx, r, next); err != nil {
		return err
	}
	if oldSeq != next.TickSeq {
		s.cancel(ctx, name, oldSeq)
	}
	return nil
}

func saveState(ctx context.Context, r *azservicebus.SessionReceiver, st *state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("schedule %s: encoding its state: %w", st.Def.Name, err)
	}
	if err := r.SetSessionState(ctx, b, nil); err != nil {
		return fmt.Errorf("schedule %s: saving its state: %w", st.Def.Name, err)
	}
	return nil
}

// cancel cancels a replaced wake-up. Failure is harmless (the wake-up
// carries an old generation and is discarded when it comes), so it is only
// logged.
func (s *Scheduler) cancel(ctx context.Context, name string, seq int64) {
	if seq == 0 {
		return
	}
	snd, err := s.sender(s.queue)
	if err == nil {
		err = snd.CancelScheduledMessages(ctx, []int64{seq}, nil)
	}
	if err != nil {
		s.log.Info("cancelling a replaced wake-up failed; it will be discarded when it comes", "schedule", name, "seq", seq, "err", err)
	}
}

// lockAttempts bounds how often lock retries a session another receiver
// holds (a host handling a firing holds it for a few round trips).
const lockAttempts = 40

// lock accepts the schedule's session, retrying while another receiver
// holds it.
func (s *Scheduler) lock(ctx context.Context, name string) (*azservicebus.SessionReceiver, error) {
	if name == "" || len(name) > MaxNameLength {
		return nil, fmt.Errorf("schedule: name %q must be 1 to %d bytes", name, MaxNameLength)
	}
	wait := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		r, err := s.client.AcceptSessionForQueue(ctx, s.queue, name, nil)
		if err == nil {
			return r, nil
		}
		var sbErr *azservicebus.Error
		if ctx.Err() != nil || attempt == lockAttempts || (errors.As(err, &sbErr) && (sbErr.Code == azservicebus.CodeNotFound || sbErr.Code == azservicebus.CodeUnauthorizedAccess)) {
			return nil, fmt.Errorf("schedule %s: locking its session in %s: %w", name, s.queue, err)
		}
		if !realSleep(ctx, wait) {
			return nil, ctx.Err()
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// realSleep waits d of real time (it bounds network retries, not schedule
// time), or until ctx ends; it reports whether d elapsed.
func realSleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := clock.Real().AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

func closeReceiver(r *azservicebus.SessionReceiver) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.Close(ctx)
}

// sender returns the (shared) sender to entity.
func (s *Scheduler) sender(entity string) (*azservicebus.Sender, error) {
	if v, ok := s.senders.Load(entity); ok {
		return v.(*azservicebus.Sender), nil
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if v, ok := s.senders.Load(entity); ok {
		return v.(*azservicebus.Sender), nil
	}
	snd, err := s.client.NewSender(entity, nil)
	if err != nil {
		return nil, fmt.Errorf("schedule: a sender to %s: %w", entity, err)
	}
	s.senders.Store(entity, snd)
	return snd, nil
}

// Close closes the senders the scheduler opened. The client is the
// caller's to close.
func (s *Scheduler) Close(ctx context.Context) error {
	var errs []error
	s.senders.Range(func(k, v any) bool {
		errs = append(errs, v.(*azservicebus.Sender).Close(ctx))
		s.senders.Delete(k)
		return true
	})
	return errors.Join(errs...)
}

// send sends the firing of d at nominal.
func (s *Scheduler) send(ctx context.Context, d Definition, nominal time.Time, trigger string) error {
	snd, err := s.sender(d.Target)
	if err != nil {
		return err
	}
	s.log.Debug("sending a firing", "schedule", d.Name, "nominal", formatNominal(nominal), "trigger", trigger, "target", d.Target)
	if err := snd.SendMessage(ctx, s.firedMessage(d, nominal, trigger), nil); err != nil {
		return fmt.Errorf("schedule %s: sending the firing at %s to %s: %w", d.Name, formatNominal(nominal), d.Target, err)
	}
	s.m.firings.WithLabelValues(trigger).Inc()
	return nil
}
