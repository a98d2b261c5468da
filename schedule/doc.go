// Package schedule runs recurring schedules on a Service Bus broker with
// the official Go SDK, so that they survive restarts, clock drift, daylight
// saving and reprogramming, on Busbar and Azure Service Bus alike.
//
// # What it owns
//
// The calendar maths ([Spec], [Times]): cron expressions with seconds and
// macros, fixed intervals, calendar recurrences (every N days, weeks or
// months; weekdays; day of month, last day, Nth weekday), in an IANA time
// zone, between a start and an end, at most N times, with jitter. Wall
// times are resolved with two documented rules: a time that falls in the
// gap when clocks go forward fires at the first instant after the gap (the
// moment of the jump), and a time that happens twice when clocks go back
// fires at its first occurrence only.
//
// The durable schedules ([Scheduler]): each schedule is one session of a
// session-enabled control queue. The session state holds the definition,
// its generation, the next nominal firing and the sequence number of the
// wake-up for it, a scheduled message into that same session. The broker
// keeps both, so a schedule needs no database and survives any host's
// death; and the broker gives a session to one receiver at a time, so the
// host that holds the session is the only one acting on the schedule.
//
// A host ([Scheduler.Run]) accepts the sessions whose wake-ups are due,
// sends the firing to the schedule's target, schedules the next wake-up,
// saves the state and completes the wake-up, in that order. Each firing
// carries the application properties ScheduleName and ScheduledFireTime
// (the nominal time, RFC 3339 in UTC), a MessageId derived from both (so a
// target with duplicate detection drops the re-send of a host that crashed
// half-way) and a CorrelationId (and ConversationId property) of its own. A
// wake-up is recognised by the generation and nominal time it carries,
// never by the host's clock: a host whose clock runs behind still fires it.
//
// Put, Pause, Resume, Trigger, Delete, Get and List lock the schedule's
// session themselves and work without any host running. Put of an
// unchanged definition is a no-op; a changed one replaces the wake-up and
// takes effect at once.
//
// # What it must not touch
//
// It is a client of the SDK only: it never imports the broker and never
// reads or writes a message it did not make. The control queue holds
// schedules and nothing else. The targets are the application's: the
// package sends firings to them and, for the overlap policies, reads only
// the properties of the firings its workers report done.
//
// Time comes from the Options' Clock; tests on busbartest's fake clock run
// years of schedules in seconds.
package schedule
