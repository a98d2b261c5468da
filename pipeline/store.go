package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// Reasons a task is set aside.
const (
	// ReasonFailed: the task's handler failed (after its retries, or with
	// a permanent error).
	ReasonFailed = "TaskFailed"
	// ReasonSkipped: the task was not run because an earlier task of its
	// job failed under the Stop policy.
	ReasonSkipped = "JobFailed"
	// ReasonNoHandler: no handler is registered for the task's type.
	ReasonNoHandler = "NoHandler"
	// ReasonMalformed: the message is not a pipeline task.
	ReasonMalformed = "Malformed"
)

// ErrNotFound is returned for a job the store does not hold.
var ErrNotFound = errors.New("pipeline: job not found in the failed-job store")

// FailedTask is a task set aside: not run, or run and failed.
type FailedTask struct {
	Job      string // the job id
	Origin   string // the job Job was resubmitted from, or ""
	Index    int    // the task's position in its job
	Count    int    // how many tasks the job was first submitted with
	Last     bool   // the job's last task
	Type     string
	Body     []byte
	Reason   string // ReasonFailed, ReasonSkipped, ...
	Error    string // the handler's error text, or why it was skipped
	Attempts int    // how many times it ran (0 when skipped)
	FailedAt time.Time
}

// FailedJob is a job's set-aside tasks, in task order.
type FailedJob struct {
	Job    string
	Origin string
	Tasks  []FailedTask
}

// FailedAt is when the job's first task was set aside.
func (j FailedJob) FailedAt() time.Time {
	var t time.Time
	for _, ft := range j.Tasks {
		if t.IsZero() || ft.FailedAt.Before(t) {
			t = ft.FailedAt
		}
	}
	return t
}

// Failed returns the first task set aside for another reason than
// ReasonSkipped (the one that failed the job), or the first task.
func (j FailedJob) Failed() FailedTask {
	for _, ft := range j.Tasks {
		if ft.Reason != ReasonSkipped {
			return ft
		}
	}
	if len(j.Tasks) > 0 {
		return j.Tasks[0]
	}
	return FailedTask{}
}

// Store keeps set-aside tasks per job. Implementations must be safe for
// concurrent use.
type Store interface {
	// Add stores a set-aside task. It is idempotent per (Job, Index): a
	// second Add of the same task keeps the first.
	Add(ctx context.Context, t FailedTask) error
	// Job returns the job's tasks in index order, or ErrNotFound.
	Job(ctx context.Context, job string) (FailedJob, error)
	// Jobs returns every stored job, in job id order.
	Jobs(ctx context.Context) ([]FailedJob, error)
	// Remove deletes the job's tasks; removing a job not stored is not an
	// error.
	Remove(ctx context.Context, job string) error
}

// Filter selects failed jobs. The zero Filter matches every job.
type Filter struct {
	Job           string    // the job id starts with this
	TaskType      string    // the failing task has this type
	ErrorContains string    // the failing task's error text contains this
	Before, After time.Time // the job failed before / after (zero: any)
}

// Match reports whether j passes the filter.
func (f Filter) Match(j FailedJob) bool {
	ft := j.Failed()
	at := j.FailedAt()
	return strings.HasPrefix(j.Job, f.Job) &&
		(f.TaskType == "" || ft.Type == f.TaskType) &&
		(f.ErrorContains == "" || strings.Contains(ft.Error, f.ErrorContains)) &&
		(f.Before.IsZero() || at.Before(f.Before)) &&
		(f.After.IsZero() || at.After(f.After))
}

// sortTasks orders tasks by index and drops repeated indices, keeping the
// first of each: the shared normalisation of stores that may hold
// duplicates.
func sortTasks(ts []FailedTask) []FailedTask {
	slices.SortStableFunc(ts, func(a, b FailedTask) int { return a.Index - b.Index })
	return slices.CompactFunc(ts, func(a, b FailedTask) bool { return a.Index == b.Index })
}
