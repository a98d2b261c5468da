// Package servicebus is the Azure Service Bus dialect of AMQP 1.0: it binds
// the protocol engine (package amqp) to the broker (package broker). It owns
// address parsing, claims-based security ($cbs put-token with SAS
// validation, or SASL PLAIN), the $management request/response operations,
// the mapping between AMQP messages and broker messages (annotations, lock
// tokens as delivery tags), and the mapping of broker errors to the error
// conditions the SDKs expect.
//
// It must not reach below the broker's API into the store, and the broker
// must never import it: data flows one way, from here down.
//
// # Links
//
// A client sender to a queue or topic (sendlink.go) hands each delivery to
// a per-link worker that sends it to the broker and settles it once the
// broker has it durably; the link's credit window bounds the work in
// flight, and the connection's reader goroutine never waits for the store.
// A client receiver (recvlink.go) is fed by a broker consumer given as much
// credit as the client grants; its dispositions are applied by a worker.
// Session receivers (sessions.go) lock a named or the next available
// session; waiting for one defers the attach (amqp.ErrDeferAttach).
// Requests to $cbs (cbs.go) and <entity>/$management (mgmt.go) are answered
// on the client's reply link, found by the request's reply-to.
//
// In a cluster (Options.Forwarding), a link for a queue or topic the broker
// holds dormant is relayed to the node serving it (forward.go): a twin link
// on an internal go-amqp connection, the client's claims checked here.
//
// # Messages
//
// The broker stores, as a message's Body, the message the client sent,
// byte for byte (ingest.go), with a service-assigned message-id added when
// it had none. Deliveries (deliver.go) rewrite the header's delivery count
// and time to live, add the broker's annotations to the client's in the
// exact AMQP types the SDKs require, and copy the bare message and footer,
// re-encoding the properties sections only when the broker changed them.
package servicebus
