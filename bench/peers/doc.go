// Package peers holds the benchmark drivers for the brokers Busbar is
// compared with: RabbitMQ (quorum queue, publisher confirms, manual acks),
// NATS JetStream (file store, acknowledged publish, explicit ack) and a
// PostgreSQL queue (SELECT … FOR UPDATE SKIP LOCKED). Each implements
// benchcore.Driver, so every broker runs the same workloads through the
// same engine, measurement and verification.
//
// Keyed workloads on these brokers use partitions: key k goes to partition
// k mod C (C consumers), and consumer i alone reads partition i, which is
// how each of them keeps per-key order (RabbitMQ: one quorum queue per
// partition with a single consumer; NATS: one subject per partition with
// one pull consumer filtered to it; PostgreSQL: a partition column read in
// id order by one consumer).
package peers
