// Package conformance is Busbar's SDK conformance suite: scenarios written
// with the official Service Bus clients (Go azservicebus v1.11.0 and, under
// Node, @azure/service-bus 7.9.5) and run against a real `busbar serve`
// child process, or against any broker named by
// BUSBAR_CONFORMANCE_CONNECTION_STRING.
//
// The package holds tests only. TestMain builds ./cmd/busbar, starts it on
// free loopback ports over a temporary data directory, and stops it with
// SIGTERM when the tests end. Every test creates its own uniquely named
// entities (through the ATOM management API, as Microsoft's live tests do,
// or from a --config file when that API is not available), so the tests run
// in parallel. docs/conformance.md lists what is covered and how to run it.
//
// The suite asserts only what a client can observe; it never imports the
// broker's packages.
package conformance
