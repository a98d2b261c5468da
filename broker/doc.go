// Package broker is Busbar's engine: the Azure Service Bus semantics of a
// namespace, independent of any protocol. It owns the namespace of queues,
// topics, subscriptions and rules; messages and their sequence numbers;
// peek-lock and receive-and-delete delivery with credit; settlement (complete,
// abandon, defer, dead-letter, renew); sessions and session state; scheduled
// messages, deferral, TTL, duplicate detection, auto-forwarding,
// auto-delete-on-idle, quotas; and the key layout and record encodings it
// keeps in a store.Store.
//
// It must not touch AMQP or any wire format (a Message carries the client's
// encoded bare message as opaque bytes the broker never parses), must not do
// I/O except through store.Store, and must not read the time, sleep or start
// polling goroutines: time comes from the injected clock.Clock, and every
// deadline of the namespace (scheduled activation, TTL, message and session
// lock expiry, session-accept timeouts, idle entities) lives in one deadline
// heap behind a single clock timer. Randomness (lock tokens, message ids)
// comes from the injected io.Reader.
//
// Every acknowledged operation is committed to the store before the call
// returns (SendAsync: before its Pending reports success), and applies
// completely or not at all. Operations decide under the entity's lock, with
// no store I/O, and commit outside it. In-memory structures are indexes;
// message bodies are read back from the store through a bounded cache. A
// queue or subscription without sessions indexes at most a window of
// available messages (Options.PageWindow): the rest of its backlog stays in
// the store, counted, and is paged in, in sequence order, as receivers drain
// the window — on a goroutine started for that page-in, not a polling one.
// Open rebuilds the indexes, one entity from its own key ranges at a time,
// loading only each window and counting the rest in the background; locks
// do not survive a restart. Every method that takes a context checks it
// first and applies nothing when it is done.
//
// Errors are wrapped sentinels (ErrNotFound, ErrLockLost, ...) that the
// protocol layer maps to Service Bus conditions with errors.Is.
//
// # Using the engine
//
// Open a Broker over a store; manage entities with Create/Update/Get/List/
// Delete Queue, Topic and Subscription and Add/Remove/ListRules. Send puts an
// atomic batch on a queue or topic (SendAsync for a producer that pipelines
// its sends; Schedule and CancelScheduled for scheduled messages). Receivers are Consumers, one per AMQP receiver link:
// NewConsumer for a queue, subscription or dead-letter path, AcceptSession
// and AcceptNextSession for sessions; the protocol layer grants credit with
// AddCredit and the broker calls ConsumerOptions.Deliver for each message
// (Drain implements the AMQP drain). Settlement is by lock token, from any
// link: Complete, Abandon, Release (the AMQP "released" outcome), Defer,
// DeadLetter, RenewLock. The management operations are Peek, PeekSession,
// ReceiveDeferred, Get/SetSessionState, RenewSessionLock, ListSessions,
// DeleteMessages and Purge. Paths are "queue", "topic/Subscriptions/sub",
// with "/$DeadLetterQueue" or "/$Transfer/$DeadLetterQueue", case-insensitive.
package broker
