package pipeline

import "sync/atomic"

// Metrics are a pipeline's counters since it was created. After a crash a
// task may be counted twice (see the package documentation).
type Metrics struct {
	JobsSubmitted    atomic.Int64 // jobs sent by Submit or Resubmit
	JobsCompleted    atomic.Int64 // jobs whose last task was handled without the job failing
	JobsFailed       atomic.Int64 // jobs failed under the Stop policy
	JobsResubmitted  atomic.Int64 // failed jobs resubmitted
	TasksStarted     atomic.Int64 // handler calls
	TasksSucceeded   atomic.Int64 // handler calls that returned nil
	TasksRetried     atomic.Int64 // failed attempts that will be retried
	TasksFailed      atomic.Int64 // tasks set aside after failing
	TasksSkipped     atomic.Int64 // tasks set aside unexecuted (Stop policy)
	TasksRedelivered atomic.Int64 // redelivered tasks recognised as done and not run again
	StatesSwept      atomic.Int64 // orphaned job states cleared by Sweep
}

// Events returns the counters by event name (job_submitted,
// job_completed, job_failed, job_resubmitted, task_started,
// task_succeeded, task_retried, task_failed, task_skipped,
// task_redelivered, state_swept), for exporting: package pipelineprom
// turns them into Prometheus counters.
func (m *Metrics) Events() map[string]int64 {
	return map[string]int64{
		"job_submitted": m.JobsSubmitted.Load(), "job_completed": m.JobsCompleted.Load(), "job_failed": m.JobsFailed.Load(),
		"job_resubmitted": m.JobsResubmitted.Load(), "task_started": m.TasksStarted.Load(), "task_succeeded": m.TasksSucceeded.Load(),
		"task_retried": m.TasksRetried.Load(), "task_failed": m.TasksFailed.Load(), "task_skipped": m.TasksSkipped.Load(),
		"task_redelivered": m.TasksRedelivered.Load(), "state_swept": m.StatesSwept.Load(),
	}
}
