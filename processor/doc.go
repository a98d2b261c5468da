// Package processor runs message handlers over the official Azure Service
// Bus Go SDK (azservicebus), the way the .NET ServiceBusProcessor and
// ServiceBusSessionProcessor do: it receives in a loop, calls a handler per
// message, settles the message from the handler's result, renews locks while
// the handler runs, and stops gracefully.
//
// Two processors are provided:
//
//   - [Processor] receives from a queue or subscription without sessions,
//     with up to MaxConcurrentCalls handlers at once, renewing every
//     in-flight message lock.
//   - [SessionProcessor] accepts up to MaxConcurrentSessions sessions at a
//     time, runs up to MaxConcurrentCallsPerSession handlers per session,
//     renews the session lock while it holds the session and releases the
//     session after SessionIdleTimeout without a message. Its handler gets
//     the [Session], whose state it can read and write.
//
// A handler that returns nil has its message completed. One that returns an
// error (or panics) has it abandoned, after the RetryPolicy's backoff, so the
// broker delivers it again; once the message has been delivered
// RetryPolicy.MaxAttempts times, or when the error is wrapped with
// [Permanent], it is dead-lettered instead. Every failure the processor
// cannot return to a caller (a receive, a settlement, a lock renewal) goes
// to the OnError callback as an [*Error].
//
// Run blocks until Close is called or its context is cancelled. Close stops
// receiving and waits for the handlers in flight to finish and settle their
// messages; cancelling Run's context instead cancels the handlers' contexts
// too.
//
// Everything the processor times itself (lock renewal, MaxAutoLockRenewal,
// retry backoff, the session idle timeout) runs on the Clock option, the
// real clock by default; tests against busbartest pass the server's fake
// clock and move it with Advance.
//
// The package is a client of the SDK only: it works the same against Busbar
// and against Azure Service Bus.
package processor
