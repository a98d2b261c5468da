// Package admin is Busbar's HTTP management plane: the Service Bus ATOM
// management API that the official administration clients (Go
// azservicebus/admin, JS ServiceBusAdministrationClient, .NET, Java, Python)
// speak, the Prometheus /metrics endpoint, the health endpoints (/healthz,
// /readyz and the emulator's /health) and, behind an option, pprof.
//
// It owns the wire format of that API: decoding QueueDescription,
// TopicDescription, SubscriptionDescription and RuleDescription documents
// (strictly: unknown or malformed properties are refused with the property
// named, before anything changes), rendering entries and paged feeds in the
// element order the service uses, the <Error> bodies and HTTP statuses the
// clients map to their error types, and SAS authorization of every request
// (the Manage right, audience = the request URL).
//
// It must not hold entity state of its own or touch the store (it only
// reports the store's Stats on /metrics): every change goes through the
// broker's API (the Backend interface), so it is durable and visible to
// connected AMQP clients at once. It knows nothing of AMQP.
package admin
