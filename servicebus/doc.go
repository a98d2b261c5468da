// Package servicebus is the Azure Service Bus dialect of AMQP 1.0: it binds
// the protocol engine (package amqp) to the broker (package broker). It owns
// address parsing, claims-based security ($cbs put-token with SAS
// validation), the $management request/response operations, the mapping
// between AMQP messages and broker messages (annotations, lock tokens as
// delivery tags), and the mapping of broker errors to the error conditions
// the SDKs expect.
//
// It must not reach below the broker's API into the store, and the broker
// must never import it: data flows one way, from here down.
package servicebus
