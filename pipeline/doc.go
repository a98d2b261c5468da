// Package pipeline runs job pipelines over Service Bus sessions with the
// official Go SDK: a job is an ordered list of typed tasks, executed one
// after the other, with a failure policy per pipeline, a store for the
// tasks that failed or were never run, and resubmission of failed jobs.
//
// # Jobs and tasks
//
// A job is a session of a session-enabled queue: the job id is the session
// id, and [Pipeline.Submit] sends the job's tasks, in order, as the
// session's messages in one batch. Each message carries the task type (its
// Subject), its position and the job's size (application properties), and
// the last one is marked. A handler is registered per task type
// ([Pipeline.Handle], or [HandleJSON] for a typed payload). Because a
// session is handed to one receiver at a time and the pipeline runs one
// handler at a time per session, the tasks of a job run in order, while
// different jobs run in parallel.
//
// A task whose handler fails is retried, after Options.Backoff on the
// pipeline's clock, until it has been attempted Options.MaxAttempts times;
// an error wrapped with [Permanent] skips the retries. Then the task counts
// as failed and the pipeline's [Policy] decides: [Stop] marks the job
// failed in its session state, and every later task of the job is set
// aside unexecuted, in order; [Continue] sets aside only the failed task
// and goes on with the next.
//
// # State
//
// While a job runs, its progress is kept in the session state as JSON
// ([JobState]: the failed flag, the last task handled, when the job started
// and was last updated). The state is cleared when the last task is
// handled, so a finished job leaves nothing behind. A job whose last task
// never arrives would leave its state for ever: [Pipeline.Sweep] lists the
// sessions of the queue (the SDK's session listing, which Busbar and
// Service Bus both answer), and clears the state of those with no pending
// tasks that were not updated for a given age.
//
// # At least once
//
// A task runs at least once, not exactly once. Before running a task the
// pipeline has recorded in the session state that it started it (and how
// many times; for all but a job's first task this is written ahead, with
// the previous task's outcome), and after it the outcome, before it
// completes the message. A
// message redelivered after a crash between recording the outcome and
// completing is recognised and not run again. The last task is completed
// before the state is cleared, so a crash in between leaves a state for
// [Pipeline.Sweep] rather than a last task that would look new. A crash (or a lost lock)
// while the handler runs, or after it returned but before the outcome was
// recorded, makes the task run again, and [Task].Attempt tells the handler:
// it is the larger of the message's delivery count and the number of
// recorded starts, so it is above 1 whenever the task may have run before,
// even when the broker did not count the interrupted delivery (Busbar does
// not count a delivery whose session was released by a closed connection).
// A handler with side effects must make them idempotent, or check whether
// an attempt above 1 already did its work. Attempt 1 means no earlier run
// was recorded.
//
// # Failed jobs
//
// Tasks set aside go to a [Store], kept per job in task order with the
// reason ([ReasonFailed] or [ReasonSkipped]), the error text and the number
// of attempts. [BrokerStore] keeps them in the broker itself, in a
// session-enabled queue where the session is the job; package pipelinepg
// keeps them in PostgreSQL. Both pass the one suite in package
// pipelinetest.
//
// [Pipeline.Resubmit] sends a failed job again from its failed task (or a
// chosen one), in the original order, as a new job whose id is derived from
// the old one ([ResubmittedID]) and which records the old id as its origin;
// then it removes the old job from the store. Ids of the new job and its
// messages are deterministic, so a resubmission repeated after a crash
// sends the same messages, which the queue's duplicate detection drops
// ([CreateQueue] turns it on); a resubmission repeated after it finished
// finds nothing in the store and returns [ErrNotFound]. A resubmitted job
// that fails again is stored again under its new id.
//
// # Boundaries
//
// The package owns the work queue's messages and session states and the
// failed-job store; it must not touch other entities. Like package
// processor, on which it runs, it is a client of the SDK only (it never
// reaches into the broker), so it works against Busbar and Azure Service
// Bus alike; time (backoff, the session idle timeout, state timestamps)
// comes from Options.Clock.
package pipeline
