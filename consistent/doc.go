// Package consistent makes the effects of a Service Bus message handler
// happen exactly once, although the broker delivers each message at least
// once: the state it changes is changed once, and the messages it publishes
// are published with one identity, the same on every retry. It is the
// state-based approach to consistent messaging.
//
// A [Handler] is a function of a [Context], the current state of one
// business entity (typed: any JSON-encodable S) and the input message; it
// returns the new state and the messages to publish. The state of each
// business id (read from the message by Options.BusinessID, an application
// property, or the session id) is a stream of versions in a [Store]; every
// version records the MessageId of the input that produced it and the
// context captured while handling it (the time and a random seed). For each
// input, the [Runner]:
//
//  1. loads the stream: its newest version, or, when the input's MessageId
//     is already in the stream (a redelivery or a re-send), the version just
//     before the one it produced, with that version's captured context;
//  2. runs the handler against that state, with a Context whose Now,
//     Random and NewID replay the captured values, so a duplicate yields
//     exactly the outputs of the first run;
//  3. stores the new version, unless the input is a duplicate, with
//     optimistic concurrency: a host that loaded an older version gets
//     [ErrConflict] and publishes nothing;
//  4. publishes the outputs, each with a MessageId derived from the input's
//     MessageId and the output's position (unless the handler set one), so
//     duplicate detection on the destination drops re-publishes; correctness
//     does not depend on it: a re-publish is byte-for-byte the same message;
//  5. returns nil, and the caller (package processor) completes the input.
//
// A crash between any two steps is repaired by the redelivery of the input.
//
// Old versions are removed by [Retention] (by count and age): a duplicate is
// recognised for as long as the version it produced is kept. Stores:
// package consistentpg keeps versions in PostgreSQL (and offers the outbox
// variant, for handlers that cannot be made deterministic: state and outputs
// are written in one transaction and a [Relay] publishes them);
// [SessionStateStore] keeps them in the session state on the broker, for
// sessions whose id is the business id. Every store passes the suite in
// package consistenttest.
//
// The package is a client of the official Go SDK only, and works against
// Busbar and Azure Service Bus alike. It owns the handling of one input
// message up to, not including, its settlement; it never settles messages
// (the processor does) and never touches entities other than the
// destinations it publishes to.
package consistent
