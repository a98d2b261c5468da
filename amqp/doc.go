// Package amqp is an AMQP 1.0 server engine: it accepts transport connections
// (plain TCP or TLS), negotiates the protocol headers and SASL, and runs the
// connection, session and link state machines of the OASIS AMQP 1.0
// specification (transport part 2, security part 5) with their flow control:
// max-frame-size and channel-max negotiation, idle timeouts, session windows
// in RFC-1982 serial arithmetic, link credit with drain and echo, multi-frame
// transfers, and both settlement modes in both roles.
//
// It owns the wire-level protocol state and nothing above it. It knows
// nothing of queues, addresses or Service Bus: what a connection, session or
// link means is decided by the application through a Handler (see
// handler.go). The byte-level codec lives in the sibling packages
// amqp/encoding and amqp/frames, which this package uses and must not change;
// message sections (amqp/message) are never parsed here: message bytes pass
// through untouched.
//
// # Concurrency
//
// Each connection has one reader goroutine, which decodes frames, updates
// state and calls the Handler, and one writer goroutine, which flushes a
// bounded buffer of encoded frames with one system call per batch; there is
// no goroutine per session, link or delivery. BatchConn lends that writer
// to a client library that writes each frame with its own system call (the
// cluster's relay, on go-amqp). Handler callbacks run on the
// reader goroutine, one at a time per connection, except those an
// application call causes itself: Conn.Close, Session.End and Detach run
// the resulting End, Detach and Lost-outcome callbacks on the calling
// goroutine before they return. Callbacks may call any method of this
// package, and must not block waiting for the peer (Sender.TrySend never
// does). The application may call every exported method from any goroutine.
//
// # Lifetimes
//
// Byte slices handed to callbacks (Delivery.Payload and Tag, binary values
// inside delivery states) alias the connection's read buffer and are valid
// only during the callback. The hot paths allocate nothing per message: a
// single-frame transfer is decoded in place and passed through; a sent
// message is encoded straight into the write buffer.
//
// # Backpressure
//
// Nothing is queued without bound. Incoming messages are limited by the link
// credit the engine grants (a bounded automatic window, or credit the
// application issues), outgoing messages by the credit the peer grants, and
// encoded frames by the writer's buffer limit, which blocks producers until
// the socket drains.
package amqp
