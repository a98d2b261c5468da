package benchcore

import "context"

// Info describes what a driver talks to, for reports.
type Info struct {
	// Broker is the system under test, e.g. "busbar 0.1", "rabbitmq 3.10.8".
	Broker string `json:"broker"`
	// Client is the client library, e.g. "azservicebus v1.11.0".
	Client string `json:"client"`
	// Durability states when the broker acknowledges a send, e.g.
	// "fsync before ack (group commit)".
	Durability string `json:"durability"`
	// Ordering says how keyed workloads keep per-key order, e.g. "sessions".
	Ordering string `json:"ordering,omitempty"`
}

// A Driver connects the engine to one broker through one client library.
// The engine calls Prepare once, then NewConsumer for every consumer and
// NewProducer for every producer, and Close at the end.
type Driver interface {
	Info() Info
	// Prepare readies the broker for w: creates (or empties) the queue,
	// stream or table the workload uses. Messages of earlier runs that are
	// left behind are recognised by their run id and ignored.
	Prepare(ctx context.Context, w Workload) error
	// NewProducer returns producer number index (0-based). When the
	// workload's Inflight is above 1 its Send is called concurrently.
	NewProducer(ctx context.Context, index int) (Producer, error)
	// NewConsumer returns consumer number index (0-based). For keyed
	// workloads on brokers without sessions, consumer i reads partition i
	// (Outgoing.Partition) alone, so per-key order survives.
	NewConsumer(ctx context.Context, index int) (Consumer, error)
	Close() error
}

// Outgoing is one message for a Producer.
type Outgoing struct {
	// Body is the message body; its first HeaderSize bytes are the engine's.
	Body []byte
	// Key is the ordering key ("k42"; a session id on Busbar), "" if none.
	Key string
	// Partition is the key's partition (key index mod the number of
	// consumers), 0 for unkeyed messages.
	Partition int
}

// A BodyCopier is a Producer that keeps no reference to an Outgoing's
// Body once Send returns; the engine then reuses the bodies' memory.
type BodyCopier interface {
	CopiesBodies() bool
}

// A Producer sends messages.
type Producer interface {
	// Send sends msgs, in order, and returns once the broker acknowledged
	// every one of them (a nil error means all are accepted).
	Send(ctx context.Context, msgs []Outgoing) error
	Close() error
}

// A Consumer receives messages.
type Consumer interface {
	// Run receives until ctx is done, hands every body to deliver (which is
	// safe for concurrent use, e.g. by several sessions) and settles the message (complete, ack, delete) after
	// deliver returns, unless the mode settles on receipt. A session or
	// partition consumer may move on once deliver reports Last. Run returns
	// nil when ctx ends it.
	Run(ctx context.Context, deliver DeliverFunc) error
	Close() error
}

// DeliverFunc is the engine's callback for each received body.
type DeliverFunc func(body []byte) Delivery

// Delivery is what the engine learned from a body.
type Delivery struct {
	Outcome Outcome
	// Keyed, Key and Last come from the body's header.
	Keyed bool
	Key   uint32
	Last  bool
}
