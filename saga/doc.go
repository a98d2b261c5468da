// Package saga runs long-lived, message-driven workflows (sagas, or process
// managers) over Service Bus sessions with the official Go SDK.
//
// A saga is declared with a typed state struct and a handler per message
// type. The type is read from an application property (Config.TypeProperty,
// e.g. "MessageType") or, by default, from the message's Subject. Every
// message of one saga instance carries the instance id as its SessionId, so
// the broker hands all of them, in order, to one handler at a time, and no
// lock or database is needed to keep two hosts from racing on one instance.
//
// The instance state lives in the session state by default
// ([SessionStateStore]); a [Store] can keep it elsewhere instead, such as
// PostgreSQL (package sagapg), where sagas can be queried and are guarded by
// optimistic concurrency.
//
// Handlers get a [Context]: the state to change, RequestTimeout (a
// scheduled message back to the saga, cancellable with CancelTimeout by its
// sequence number), Send, Complete and Compensate. What a handler asks for
// happens after it returns, in an order that survives a crash at any point:
// timeouts are scheduled and messages sent first (with ids derived from the
// incoming message, so duplicate detection can drop a re-send), then the
// state is saved, then cancelled timeouts are cancelled, and last the message
// is completed. A message redelivered after a crash is recognised by its
// MessageId (the state keeps the ids of the last messages it handled) and
// completed without running the handler again. A timeout that is no longer
// pending (cancelled, or arriving after the saga finished) is discarded.
//
// Complete clears the state (or keeps a tombstone for Config.Retention, so
// late duplicates are recognised); Compensate runs the compensation handler
// and then finishes the saga the same way. Config.Deadline bounds a saga's
// life: when it passes, the saga is compensated with [ErrDeadlineExceeded].
// Config.OnMissing says what to do with a message for a saga that does not
// exist or has finished. Every transition is logged with log/slog.
//
// State is stored as JSON: adding a field to the state struct does not
// break sagas in flight (the field starts at its zero value), and
// Config.Version with Config.Migrate upgrade older states explicitly.
//
// Like package processor, which runs it, the package is a client of the
// SDK only and works against Busbar and Azure Service Bus alike.
package saga
