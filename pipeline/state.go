package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// JobState is a running job's progress, kept as JSON in its session state
// and cleared when the job's last task has been handled.
type JobState struct {
	// LastTask is the index of the last task handled (run, or set aside
	// under Continue), -1 before the first.
	LastTask int `json:"lastTask"`
	// Count is how many tasks the job was submitted with.
	Count int `json:"count"`
	// Failed is set when a task failed under the Stop policy: every later
	// task is set aside unexecuted.
	Failed bool `json:"failed,omitempty"`
	// FailedTask is the index of the task that failed the job.
	FailedTask int `json:"failedTask,omitempty"`
	// Error is that task's error text.
	Error string `json:"error,omitempty"`
	// Failures counts the tasks set aside under the Continue policy.
	Failures int `json:"failures,omitempty"`
	// Runs counts the recorded starts of the next task to run (the first
	// after LastTask). It is written before a job's first task runs, and
	// with each outcome for the task that follows (1, announced ahead of
	// its run to save a write); a task that arrives finding Runs set by
	// another session hold, or after a failed attempt, adds one before it
	// runs. A task redelivered with Runs set may have run before, whatever
	// the broker's delivery count says.
	Runs int `json:"runs,omitempty"`
	// Origin is the job this one was resubmitted from.
	Origin string `json:"origin,omitempty"`
	// Started is when the job's first task was handled; Updated when the
	// state last changed.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// next returns a copy of st to change after task t (a fresh state when st
// is nil), stamped now.
func (st *JobState) next(t *Task, now time.Time) *JobState {
	var n JobState
	if st != nil {
		n = *st
	} else {
		n = JobState{LastTask: -1, Count: t.Count, Origin: t.Origin, Started: now}
	}
	n.Updated = now
	return &n
}

func readState(ctx context.Context, get func(context.Context) ([]byte, error)) (*JobState, error) {
	b, err := get(ctx)
	if err != nil {
		return nil, fmt.Errorf("pipeline: reading job state: %w", err)
	}
	return decodeState(b)
}

func decodeState(b []byte) (*JobState, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var st JobState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("pipeline: decoding job state %q: %w", b, err)
	}
	// A state the pipeline did not write ("{}", "null") would read as task
	// 0 handled, and task 0 would be completed without running.
	if st.LastTask < -1 || st.Count < 1 || st.FailedTask < 0 || st.Failures < 0 || st.Runs < 0 {
		return nil, fmt.Errorf("pipeline: job state %q is not one the pipeline writes (lastTask %d, count %d)", b, st.LastTask, st.Count)
	}
	return &st, nil
}

func encodeState(st *JobState) ([]byte, error) {
	if st == nil {
		return nil, nil
	}
	return json.Marshal(st)
}

// JobProgress is what the queue shows of one job.
type JobProgress struct {
	Job string
	// State is the job's state; nil when none is set (the job has not
	// started, or has ended).
	State *JobState
	// Pending is how many of its tasks wait in the queue (up to the limit
	// Jobs was given).
	Pending int
	// Locked is set when a worker holds the job's session now: State and
	// Pending are then unknown.
	Locked bool
}

// maxPeek bounds how many pending tasks a progress report peeks per job.
const maxPeek = 250

// Jobs reports the progress of every job the queue holds (sessions with
// tasks or state), in job id order. It reads each job by locking its
// session for a moment; a job a worker is running is reported Locked.
func Jobs(ctx context.Context, client *azservicebus.Client, queue string) ([]JobProgress, error) {
	ids, err := listSessions(ctx, client, queue)
	if err != nil {
		return nil, err
	}
	out := make([]JobProgress, 0, len(ids))
	for _, id := range ids {
		jp, err := JobOf(ctx, client, queue, id)
		if err != nil {
			return out, err
		}
		out = append(out, jp)
	}
	return out, nil
}

// JobOf reports the progress of one job.
func JobOf(ctx context.Context, client *azservicebus.Client, queue, job string) (JobProgress, error) {
	jp := JobProgress{Job: job}
	err := withSession(ctx, client, queue, job, func(r *azservicebus.SessionReceiver) error {
		st, err := readState(ctx, func(ctx context.Context) ([]byte, error) { return r.GetSessionState(ctx, nil) })
		if err != nil {
			return err
		}
		jp.State = st
		msgs, err := peekSession(ctx, r, maxPeek)
		if err != nil {
			return err
		}
		jp.Pending = len(msgs)
		return nil
	})
	if errors.Is(err, errLocked) {
		jp.Locked = true
		return jp, nil
	}
	return jp, err
}

var errLocked = errors.New("session locked by another receiver")

// withSession locks job's session of queue, runs fn and releases it. A
// session another receiver holds gives errLocked.
func withSession(ctx context.Context, client *azservicebus.Client, queue, job string, fn func(*azservicebus.SessionReceiver) error) error {
	r, err := client.AcceptSessionForQueue(ctx, queue, job, nil)
	if err != nil {
		// The SDK has no error code for it: the AMQP condition is in the
		// error text.
		if strings.Contains(err.Error(), "session-cannot-be-locked") {
			return errLocked
		}
		return fmt.Errorf("pipeline: locking job %s: %w", job, err)
	}
	defer func() { _ = r.Close(context.WithoutCancel(ctx)) }()
	return fn(r)
}

func listSessions(ctx context.Context, client *azservicebus.Client, queue string) ([]string, error) {
	pager := client.NewListSessionsForQueuePager(queue, nil)
	var ids []string
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("pipeline: listing the jobs of %s: %w", queue, err)
		}
		ids = append(ids, page.Sessions...)
	}
	slices.Sort(ids)
	return ids, nil
}

// SweepOptions configure Sweep.
type SweepOptions struct {
	// OlderThan: only states not updated for this long are cleared
	// (default 24 hours).
	OlderThan time.Duration
	// DryRun reports what would be cleared without clearing it.
	DryRun bool
}

// Sweep clears the state of jobs whose last task never arrived: sessions
// of the queue with a state, no pending task, not held by a worker, and not
// updated for OlderThan (on the pipeline's clock). It returns the jobs it
// cleared. The jobs it finds are listed with the SDK's session listing;
// a job that fails to be read is reported to OnError and skipped.
func (p *Pipeline) Sweep(ctx context.Context, o *SweepOptions) ([]string, error) {
	if o == nil {
		o = &SweepOptions{}
	}
	age := o.OlderThan
	if age <= 0 {
		age = 24 * time.Hour
	}
	ids, err := listSessions(ctx, p.client, p.queue)
	if err != nil {
		return nil, err
	}
	cutoff := p.clock.Now().Add(-age)
	var swept []string
	for _, id := range ids {
		err := withSession(ctx, p.client, p.queue, id, func(r *azservicebus.SessionReceiver) error {
			st, err := readState(ctx, func(ctx context.Context) ([]byte, error) { return r.GetSessionState(ctx, nil) })
			if err != nil || st == nil || !st.Updated.Before(cutoff) {
				return err
			}
			msgs, err := peekSession(ctx, r, 1)
			if err != nil || len(msgs) > 0 {
				return err
			}
			if !o.DryRun {
				if err := r.SetSessionState(ctx, nil, nil); err != nil {
					return err
				}
				p.metrics.StatesSwept.Add(1)
			}
			p.logger.Warn("pipeline swept the state of an orphaned job", "job", id, "updated", st.Updated, "last_task", st.LastTask, "count", st.Count)
			swept = append(swept, id)
			return nil
		})
		if err != nil && !errors.Is(err, errLocked) {
			p.report(fmt.Errorf("pipeline: sweeping job %s: %w", id, err))
		}
	}
	return swept, nil
}
