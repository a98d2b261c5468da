// Package benchcore is the workload engine behind `busbar bench` and the
// peer benchmarks in bench/: it drives N producers and M consumers through a
// [Driver] (one per broker and client library), paces sends on a fixed
// schedule or open throttle, embeds an id, a per-key sequence number and the
// intended send time in every message body, and on delivery records
// send→receive latency in a log-linear [Histogram] and checks that every
// acknowledged message arrived exactly once and, for keyed workloads, in
// order per key.
//
// Latency is measured from the intended send time of the schedule, not from
// the moment the send call began, so a broker that stalls its producers is
// charged for every message the stall delayed (no coordinated omission). In
// open-throttle mode the intended time is the moment the send began.
//
// Every result carries the CPU time per delivered message of the broker's
// processes (utime + stime from /proc/<pid>/stat, descendants included) and
// of the load generator itself (/proc/self), next to msg/s.
//
// The package owns only workload generation, measurement and reporting. It
// knows nothing of a particular broker except through drivers; the drivers
// for Busbar (the official azservicebus SDK, go-amqp, and the bench's own raw
// AMQP 1.0 client, which costs far less CPU per message than the broker so
// that a small machine measures the broker) live here, the peers' drivers
// live in the separate bench/ module so the broker's own dependencies stay
// lean. It must not import the broker's internals: the raw client uses only
// the wire codecs amqp/encoding, amqp/frames and amqp/message.
package benchcore
