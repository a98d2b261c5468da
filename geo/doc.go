// Package geo keeps Service Bus sessions in order and processed once across
// two independent namespaces in two regions (active/active), on the
// official Go SDK only, so it works against Azure Service Bus and Busbar
// alike.
//
// A [Sender] writes every message to both namespaces with the same
// MessageId and SessionId, the secondary copy scheduled [SenderOptions].Delay
// later so that the primary region normally does the work; a send succeeds
// when at least one namespace accepted it and reports which did. Each
// message carries its position in its session (1, 2, 3, … in the
// application property [PositionProperty]).
//
// A [Consumer] per region receives the sessions of its namespace and
// coordinates with the other region's consumer through a [Journal]: a
// strongly consistent store of versioned records with create-or-conflict
// and optimistic replacement (package geopg keeps it in PostgreSQL; package
// geotest is the suite every implementation passes). The journal is the
// only authority on what has been done:
//
//   - A region may process message k of a session only while the journal
//     says every position below k is done and no one else holds a live
//     claim on k. So a region that gets ahead of the other (the secondary
//     copy ready first, a message only one namespace accepted) waits: it
//     cannot process k before k-1.
//   - A message the journal says is done is completed (or, if it failed,
//     dead-lettered with the same reason) without running the handler.
//   - A claim is a lease, renewed while its holder works; a consumer that
//     dies stops renewing, and the other region takes over when the lease
//     runs out, with a new record version, so the dead one's late writes
//     are refused.
//
// [Granularity] chooses the records: [PerSession] keeps one record per
// session (the next position and the claim on the whole session, which a
// region holds for as long as it holds the Service Bus session);
// [PerMessage] keeps one per message (its status Working, Completed or
// Failed), so the two regions can alternate within a session, message by
// message.
//
// Waiting is never a sleep loop: the consumer holds the message and waits
// for the journal's notification of a change in the session
// ([Journal.Watch], LISTEN/NOTIFY in PostgreSQL) or the expiry of the
// other holder's lease; after [ConsumerOptions].WaitTimeout it abandons the
// message and releases the session. [Consumer.Stats] counts the message and
// journal operations, for the traffic per processed message.
//
// The handler's effects happen once when they commit together with the
// journal record (geopg.Store.CompleteWith); other effects happen at least
// once when a consumer dies after the effect and before the journal write.
//
// The package owns the sender, the consumer, the journal interface and its
// record format; it owns no storage.
package geo
