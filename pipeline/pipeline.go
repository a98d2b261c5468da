package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/processor"
)

// Policy says what a failed task does to the rest of its job.
type Policy int

const (
	// Stop (the default) sets aside the failed task and every later task
	// of the job, unexecuted: a purchase never sends the receipt of a
	// payment that failed.
	Stop Policy = iota
	// Continue sets aside only the failed task and runs the next: one bad
	// row does not stop a product import.
	Continue
)

// String returns the policy's name, "stop" or "continue", as the CLI and
// logs write it.
func (p Policy) String() string {
	if p == Continue {
		return "continue"
	}
	return "stop"
}

// Handler runs one task. Returning nil marks it done; an error is retried
// until Options.MaxAttempts, unless wrapped with Permanent. ctx is
// cancelled when the session lock is lost or the pipeline is stopped hard.
type Handler func(ctx context.Context, t *Task) error

// HandleJSON registers a handler for tasks of type typ whose payload is a
// JSON T. A payload that does not decode fails the task permanently.
func HandleJSON[T any](p *Pipeline, typ string, h func(ctx context.Context, t *Task, payload T) error) error {
	return p.Handle(typ, func(ctx context.Context, t *Task) error {
		var v T
		if err := t.Decode(&v); err != nil {
			return err
		}
		return h(ctx, t, v)
	})
}

// Options configure a Pipeline. The zero value is usable except for Store.
type Options struct {
	// Policy is what a failed task does to the rest of its job (default
	// Stop).
	Policy Policy
	// Store receives the tasks set aside. Required.
	Store Store
	// MaxAttempts is how many times a task runs before it counts as failed
	// (default 3). Keep it below the queue's MaxDeliveryCount, or the
	// broker dead-letters the task before the pipeline sets it aside.
	MaxAttempts int
	// Backoff is how long to wait, holding the task, before its next
	// attempt, given the attempt that failed (default: 1s doubling up to
	// 1 minute).
	Backoff func(attempt int) time.Duration
	// MaxConcurrentJobs is how many jobs (sessions) run at once (default
	// 8).
	MaxConcurrentJobs int
	// SessionIdleTimeout is how long a job's session is held waiting for
	// its next task before it is released (default 5 seconds). A session
	// is released at once after its last task.
	SessionIdleTimeout time.Duration
	// OnError receives failures the pipeline cannot return (each failed
	// attempt, store and state errors). It must be safe for concurrent
	// use.
	OnError func(error)
	// Logger logs job and task transitions (default: discarded).
	Logger *slog.Logger
	// Clock is the pipeline's time (default clock.Real()): the retry
	// backoff, the idle timeout, lock renewal and the timestamps in the
	// job state. Tests on busbartest pass the server's fake clock.
	Clock clock.Clock
}

// Pipeline runs the jobs of one session-enabled queue.
type Pipeline struct {
	client   *azservicebus.Client
	queue    string
	policy   Policy
	store    Store
	attempts int
	backoff  func(int) time.Duration
	jobs     int
	idle     time.Duration
	onError  func(error)
	logger   *slog.Logger
	clock    clock.Clock
	metrics  *Metrics

	mu       sync.Mutex
	handlers map[string]Handler
	running  bool
	sender   *azservicebus.Sender
	proc     *processor.SessionProcessor
	states   map[*processor.Session]*sessionJob
}

// sessionJob is the cached state of a session the pipeline holds.
type sessionJob struct {
	loaded bool
	state  *JobState // nil: no state
	// announced: this hold recorded the next task as started (Runs 1)
	// with the last outcome, and has not run it yet.
	announced bool
}

// New returns a Pipeline over queue, a session-enabled queue; Handle
// registers handlers and Run starts it.
func New(client *azservicebus.Client, queue string, o *Options) (*Pipeline, error) {
	if client == nil || queue == "" {
		return nil, errors.New("pipeline: New needs a client and a queue")
	}
	if o == nil || o.Store == nil {
		return nil, errors.New("pipeline: Options.Store is required")
	}
	if o.Policy != Stop && o.Policy != Continue {
		return nil, fmt.Errorf("pipeline: unknown policy %d", o.Policy)
	}
	p := &Pipeline{
		client: client, queue: queue, policy: o.Policy, store: o.Store,
		attempts: o.MaxAttempts, backoff: o.Backoff, jobs: o.MaxConcurrentJobs, idle: o.SessionIdleTimeout,
		onError: o.OnError, logger: o.Logger, clock: o.Clock, metrics: &Metrics{},
		handlers: map[string]Handler{}, states: map[*processor.Session]*sessionJob{},
	}
	if p.attempts <= 0 {
		p.attempts = 3
	}
	if p.backoff == nil {
		p.backoff = processor.ExponentialBackoff(time.Second, time.Minute)
	}
	if p.jobs <= 0 {
		p.jobs = 8
	}
	if p.idle <= 0 {
		p.idle = 5 * time.Second
	}
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if p.clock == nil {
		p.clock = clock.Real()
	}
	return p, nil
}

// Queue returns the pipeline's work queue.
func (p *Pipeline) Queue() string { return p.queue }

// Store returns the pipeline's failed-job store.
func (p *Pipeline) Store() Store { return p.store }

// Metrics returns the pipeline's counters.
func (p *Pipeline) Metrics() *Metrics { return p.metrics }

// Handle registers the handler of task type typ. It must be called before
// Run.
func (p *Pipeline) Handle(typ string, h Handler) error {
	if typ == "" || h == nil {
		return errors.New("pipeline: Handle needs a task type and a handler")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return errors.New("pipeline: Handle called after Run")
	}
	if _, dup := p.handlers[typ]; dup {
		return fmt.Errorf("pipeline: task type %q already has a handler", typ)
	}
	p.handlers[typ] = h
	return nil
}

// Submit sends job's tasks, in order, in one batch; the last is marked.
// The job id is the session id. Submitting the same job again sends the
// same message ids, which a queue with duplicate detection drops.
func (p *Pipeline) Submit(ctx context.Context, job string, tasks []TaskSpec) error {
	ts := make([]indexed, len(tasks))
	for i, t := range tasks {
		ts[i] = indexed{i, t}
	}
	return p.send(ctx, job, "", len(tasks), ts)
}

// indexed is a task with its position in its job.
type indexed struct {
	index int
	spec  TaskSpec
}

// send sends tasks (in increasing index order) as the job's messages in
// one batch, the last marked; count is the job's original size.
func (p *Pipeline) send(ctx context.Context, job, origin string, count int, tasks []indexed) error {
	if job == "" || len(tasks) == 0 {
		return errors.New("pipeline: a job needs an id and at least one task")
	}
	for _, t := range tasks {
		if t.spec.Type == "" {
			return fmt.Errorf("pipeline: job %s: task %d has no type", job, t.index)
		}
	}
	s, err := p.getSender()
	if err != nil {
		return err
	}
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		return fmt.Errorf("pipeline: job %s: %w", job, err)
	}
	for i, t := range tasks {
		m := taskMessage(job, origin, t.index, count, i == len(tasks)-1, t.spec)
		if err := batch.AddMessage(m, nil); err != nil {
			if errors.Is(err, azservicebus.ErrMessageTooLarge) {
				return fmt.Errorf("pipeline: job %s does not fit one batch (%d tasks): %w", job, len(tasks), err)
			}
			return fmt.Errorf("pipeline: job %s: %w", job, err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		return fmt.Errorf("pipeline: sending job %s: %w", job, err)
	}
	p.metrics.JobsSubmitted.Add(1)
	return nil
}

func (p *Pipeline) getSender() (*azservicebus.Sender, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sender == nil {
		s, err := p.client.NewSender(p.queue, nil)
		if err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
		p.sender = s
	}
	return p.sender, nil
}

// Run runs jobs until Close is called (it then returns nil once the tasks
// in flight are settled) or ctx is cancelled (it returns ctx.Err()). It may
// be called once.
func (p *Pipeline) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("pipeline: Run called twice")
	}
	p.running = true
	proc, err := processor.NewSession(p.client, processor.Queue(p.queue), p.handle, &processor.SessionOptions{
		MaxConcurrentSessions: p.jobs,
		SessionIdleTimeout:    p.idle,
		Retry:                 processor.RetryPolicy{Backoff: p.backoff},
		OnError:               p.onError,
		OnSessionClose:        func(_ context.Context, s *processor.Session) { p.forget(s) },
		Logger:                p.logger,
		Clock:                 p.clock,
	})
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.proc = proc
	p.mu.Unlock()
	return proc.Run(ctx)
}

// Close stops taking jobs, waits for the tasks in flight and closes the
// pipeline's sender. If ctx ends first, it cancels the handlers.
func (p *Pipeline) Close(ctx context.Context) error {
	p.mu.Lock()
	proc, s := p.proc, p.sender
	p.sender = nil
	p.mu.Unlock()
	var err error
	if proc != nil {
		err = proc.Close(ctx)
	}
	if s != nil {
		_ = s.Close(ctx)
	}
	return err
}

func (p *Pipeline) forget(s *processor.Session) {
	p.mu.Lock()
	delete(p.states, s)
	p.mu.Unlock()
}

func (p *Pipeline) report(err error) {
	if p.onError != nil {
		p.onError(err)
	}
}

// jobState returns the state of the session's job, read once per session
// hold (the pipeline holds the lock, so nobody else writes it meanwhile).
func (p *Pipeline) jobState(ctx context.Context, s *processor.Session) (*sessionJob, error) {
	p.mu.Lock()
	sj := p.states[s]
	if sj == nil {
		sj = &sessionJob{}
		p.states[s] = sj
	}
	p.mu.Unlock()
	if !sj.loaded {
		st, err := readState(ctx, s.State)
		if err != nil {
			return nil, err
		}
		sj.state, sj.loaded = st, true
	}
	return sj, nil
}

// save writes st as the job's state (nil clears it).
func (p *Pipeline) save(ctx context.Context, s *processor.Session, sj *sessionJob, st *JobState) error {
	if st == nil && sj.state == nil {
		return nil
	}
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	if err := s.SetState(ctx, b); err != nil {
		sj.loaded = false // unknown now: read it again
		return fmt.Errorf("pipeline: writing the state of job %s: %w", s.ID(), err)
	}
	sj.state = st
	return nil
}

// handle runs one task message; see the package documentation for the
// order of the steps.
func (p *Pipeline) handle(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
	t, derr := decodeTask(m)
	sj, err := p.jobState(ctx, s)
	if err != nil {
		return err // abandoned and delivered again
	}
	now := p.clock.Now()
	st := sj.state
	if derr != nil {
		return p.setAside(ctx, s, sj, t, m, ReasonMalformed, derr.Error(), 0, st)
	}
	if st != nil && !st.Failed && t.Index <= st.LastTask {
		// Redelivered after its outcome was recorded: do not run it again.
		p.metrics.TasksRedelivered.Add(1)
		return p.advance(ctx, s, sj, t, m, st)
	}
	if st != nil && st.Failed {
		return p.setAside(ctx, s, sj, t, m, ReasonSkipped,
			fmt.Sprintf("task %d of the job failed: %s", st.FailedTask, st.Error), 0, st)
	}
	p.mu.Lock()
	h := p.handlers[t.Type]
	p.mu.Unlock()
	if h == nil {
		return p.failed(ctx, s, sj, t, m, ReasonNoHandler, fmt.Errorf("no handler for task type %q", t.Type), st, now)
	}
	// Record the start before running, so that a run cut short by a crash
	// is known to the next delivery even if the broker did not count it.
	// After a task, the pipeline records the next one as started along
	// with the outcome (announced): that next task's first run in the same
	// session hold needs no write of its own. A task found recorded as
	// started by another hold may have run: it gets the next attempt.
	runs := 1
	if !sj.announced {
		if st != nil {
			runs = st.Runs + 1
		}
		started := st.next(t, now)
		started.Runs = runs
		if err := p.save(ctx, s, sj, started); err != nil {
			p.report(err)
			return err
		}
		st = started
	}
	sj.announced = false
	t.Attempt = max(t.Attempt, runs)
	p.metrics.TasksStarted.Add(1)
	herr := run(ctx, h, t)
	if herr == nil {
		p.metrics.TasksSucceeded.Add(1)
		next := st.next(t, now)
		next.LastTask, next.Runs = t.Index, 1 // the next task, announced
		return p.advance(ctx, s, sj, t, m, next)
	}
	if ctx.Err() != nil {
		return herr // lock lost or stopping: the broker delivers it again
	}
	if !IsPermanent(herr) && t.Attempt < p.attempts {
		p.metrics.TasksRetried.Add(1)
		p.logger.Info("pipeline task failed, will retry", "job", t.Job, "task", t.Index, "type", t.Type, "attempt", t.Attempt, "err", herr)
		return herr // the processor waits the backoff and abandons it
	}
	return p.failed(ctx, s, sj, t, m, ReasonFailed, herr, st, now)
}

// run calls h, turning a panic into an error.
func run(ctx context.Context, h Handler, t *Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task handler panicked: %v", r)
		}
	}()
	return h(ctx, t)
}

// failed sets aside a task that failed for good and applies the policy.
func (p *Pipeline) failed(ctx context.Context, s *processor.Session, sj *sessionJob, t *Task, m *azservicebus.ReceivedMessage,
	reason string, herr error, st *JobState, now time.Time) error {
	p.logger.Warn("pipeline task failed", "job", t.Job, "task", t.Index, "type", t.Type, "attempt", t.Attempt, "policy", p.policy.String(), "err", herr)
	next := st.next(t, now)
	if p.policy == Stop {
		next.Failed, next.FailedTask, next.Error, next.Runs = true, t.Index, herr.Error(), 0
		p.metrics.JobsFailed.Add(1)
	} else {
		next.LastTask, next.Runs = t.Index, 1 // the next task, announced
		next.Failures++
	}
	return p.setAside(ctx, s, sj, t, m, reason, herr.Error(), t.Attempt, next)
}

// setAside stores the task in the failed-job store, then records next as
// the job's state (or clears it after the last task).
func (p *Pipeline) setAside(ctx context.Context, s *processor.Session, sj *sessionJob, t *Task, m *azservicebus.ReceivedMessage,
	reason, text string, attempts int, next *JobState) error {
	ft := FailedTask{Job: t.Job, Origin: t.Origin, Index: t.Index, Count: t.Count, Last: t.Last, Type: t.Type, Body: m.Body,
		Reason: reason, Error: text, Attempts: attempts, FailedAt: p.clock.Now()}
	if err := p.store.Add(ctx, ft); err != nil {
		err = fmt.Errorf("pipeline: storing task %d of failed job %s: %w", t.Index, t.Job, err)
		p.report(err)
		return err
	}
	if reason == ReasonSkipped {
		p.metrics.TasksSkipped.Add(1)
	} else {
		p.metrics.TasksFailed.Add(1)
	}
	if reason == ReasonMalformed {
		return nil // not part of any job's progress
	}
	return p.advance(ctx, s, sj, t, m, next)
}

// advance records the job's progress after task t, clearing the state and
// releasing the session after the last task.
func (p *Pipeline) advance(ctx context.Context, s *processor.Session, sj *sessionJob, t *Task, m *azservicebus.ReceivedMessage, next *JobState) error {
	if t.Last {
		// Complete the last task before clearing the state: a crash in
		// between leaves a state for Sweep, never a last task that runs
		// again as if it were new.
		if err := s.Receiver().CompleteMessage(ctx, m, nil); err != nil {
			err = fmt.Errorf("pipeline: completing the last task of job %s: %w", t.Job, err)
			p.report(err)
			return processor.ErrSettled // not settled, but the lock is gone or going: the broker delivers it again
		}
		if err := p.save(ctx, s, sj, nil); err != nil {
			p.report(err)
		}
		s.Release()
		if next == nil || !next.Failed {
			p.metrics.JobsCompleted.Add(1)
		}
		p.logger.Info("pipeline job ended", "job", t.Job, "failed", next != nil && next.Failed)
		return processor.ErrSettled
	}
	if next == sj.state {
		return nil
	}
	if err := p.save(ctx, s, sj, next); err != nil {
		p.report(err)
		return err
	}
	sj.announced = next.Runs > 0 && !next.Failed
	return nil
}
