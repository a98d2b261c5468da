package pipeline

import (
	"context"
	"fmt"
)

// ResubmitOptions configure Resubmit. The zero value resubmits from the
// task that failed the job.
type ResubmitOptions struct {
	// From, when set, is the index of the task to resubmit from; it must be
	// one of the job's stored tasks. Stored tasks before it are discarded.
	From *int
}

// Resubmit sends the failed job's stored tasks again, from its failed task
// (or o.From) on, in their original order and with their original indices,
// as the job ResubmittedID(job) whose origin is job; then it removes job
// from the store and returns the new id.
//
// It is safe to repeat: a repeat after it finished finds nothing and
// returns ErrNotFound; a repeat after a crash before the removal sends the
// same message ids to the same new job, which the queue's duplicate
// detection drops (CreateQueue turns it on; without it the new job's tasks
// would arrive twice).
func (p *Pipeline) Resubmit(ctx context.Context, job string, o *ResubmitOptions) (string, error) {
	fj, err := p.store.Job(ctx, job)
	if err != nil {
		return "", err
	}
	from := fj.Failed().Index
	if o != nil && o.From != nil {
		from = *o.From
		found := false
		for _, t := range fj.Tasks {
			found = found || t.Index == from
		}
		if !found {
			return "", fmt.Errorf("pipeline: task %d of job %s is not in the failed-job store (it completed, or the job has no such task)", from, job)
		}
	}
	var tasks []indexed
	count := 0
	for _, t := range fj.Tasks {
		count = max(count, t.Count)
		if t.Index >= from {
			tasks = append(tasks, indexed{t.Index, TaskSpec{Type: t.Type, Body: t.Body}})
		}
	}
	newJob := ResubmittedID(job)
	if err := p.send(ctx, newJob, job, count, tasks); err != nil {
		return "", err
	}
	if err := p.store.Remove(ctx, job); err != nil {
		return newJob, fmt.Errorf("pipeline: job %s was resubmitted as %s but is still in the store: %w", job, newJob, err)
	}
	p.metrics.JobsResubmitted.Add(1)
	p.logger.Info("pipeline job resubmitted", "job", job, "new_job", newJob, "from", from, "tasks", len(tasks))
	return newJob, nil
}

// Progress is called after each job ResubmitAll or PurgeAll handles: done
// of total, the job, its new id (resubmission) and its error.
type Progress func(done, total int, job, newJob string, err error)

// ResubmitAll resubmits every stored job the filter matches, in job id
// order, calling progress after each. It goes on after a failed job and
// returns how many were resubmitted and the first error.
func (p *Pipeline) ResubmitAll(ctx context.Context, f Filter, o *ResubmitOptions, progress Progress) (int, error) {
	return forMatching(ctx, p.store, f, progress, func(j FailedJob) (string, error) { return p.Resubmit(ctx, j.Job, o) })
}

// PurgeAll removes every stored job the filter matches from store,
// calling progress after each, and returns how many it removed.
func PurgeAll(ctx context.Context, store Store, f Filter, progress Progress) (int, error) {
	return forMatching(ctx, store, f, progress, func(j FailedJob) (string, error) { return "", store.Remove(ctx, j.Job) })
}

func forMatching(ctx context.Context, store Store, f Filter, progress Progress, do func(FailedJob) (string, error)) (int, error) {
	jobs, err := store.Jobs(ctx)
	if err != nil {
		return 0, err
	}
	var match []FailedJob
	for _, j := range jobs {
		if f.Match(j) {
			match = append(match, j)
		}
	}
	n := 0
	var first error
	for i, j := range match {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		newJob, err := do(j)
		if err == nil {
			n++
		} else if first == nil {
			first = err
		}
		if progress != nil {
			progress(i+1, len(match), j.Job, newJob, err)
		}
	}
	return n, first
}
