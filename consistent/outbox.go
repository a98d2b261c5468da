package consistent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
)

// Outgoing is one output message in an outbox.
type Outgoing struct {
	Seq        int64     // assigned by the store, increasing
	BusinessID string    // the stream it belongs to
	InputID    string    // the MessageId of the input that produced it
	Index      int       // its position among that input's outputs
	To         string    // the queue or topic it goes to
	Message    []byte    // the message, as EncodeMessage encodes it
	Stored     time.Time // when it was stored

	msg *azservicebus.Message
}

// OutboxStore is a Store that keeps outgoing messages with the state, for
// the outbox variant: the Runner stores a version and its outputs in one
// transaction, then publishes the outputs and removes them.
type OutboxStore interface {
	Store
	// AppendWithOutbox is Append that also stores outs, atomically with the
	// version. It returns outs with Seq and Stored set.
	AppendWithOutbox(ctx context.Context, key Key, v Version, outs []Outgoing) ([]Outgoing, error)
	// Pending returns the outputs of input inputID of key's stream still in
	// the outbox, in order.
	Pending(ctx context.Context, key Key, inputID string) ([]Outgoing, error)
	// PendingBefore returns up to limit outputs of any stream stored before
	// t, oldest first.
	PendingBefore(ctx context.Context, t time.Time, limit int) ([]Outgoing, error)
	// Sent removes the outputs seqs of key's stream from the outbox.
	Sent(ctx context.Context, key Key, seqs []int64) error
}

// RelayOptions configure a Relay.
type RelayOptions struct {
	// Delay is how old an output must be before the relay publishes it
	// (default 1 minute): younger ones are left to the Runner that stored
	// them.
	Delay time.Duration
	// Interval is the pause between two passes of Run (default 10 seconds).
	Interval time.Duration
	// Batch is how many outputs one pass reads at a time (default 100).
	Batch int
	// Clock is the relay's time (default clock.Real()).
	Clock clock.Clock
	// Logger logs failed passes (default: discarded).
	Logger *slog.Logger
}

// Relay publishes outputs left in an outbox: those of inputs whose host
// stopped after storing them and that were not redelivered (dead-lettered,
// for instance). A relay and a Runner may publish the same output twice; it
// has the same MessageId and body both times.
type Relay struct {
	client  *azservicebus.Client
	store   OutboxStore
	o       RelayOptions
	senders senders
}

// NewRelay returns a Relay for store, publishing with client.
func NewRelay(client *azservicebus.Client, store OutboxStore, o *RelayOptions) (*Relay, error) {
	if client == nil || store == nil {
		return nil, errors.New("consistent: NewRelay needs a client and a store")
	}
	r := &Relay{client: client, store: store}
	if o != nil {
		r.o = *o
	}
	if r.o.Delay <= 0 {
		r.o.Delay = time.Minute
	}
	if r.o.Interval <= 0 {
		r.o.Interval = 10 * time.Second
	}
	if r.o.Batch <= 0 {
		r.o.Batch = 100
	}
	if r.o.Clock == nil {
		r.o.Clock = clock.Real()
	}
	if r.o.Logger == nil {
		r.o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r.senders.client = client
	return r, nil
}

// Flush publishes every output stored more than Delay ago and removes it
// from the outbox; it returns how many it published.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	n := 0
	before := r.o.Clock.Now().Add(-r.o.Delay)
	for {
		outs, err := r.store.PendingBefore(ctx, before, r.o.Batch)
		if err != nil || len(outs) == 0 {
			return n, err
		}
		for _, o := range outs {
			m, err := DecodeMessage(o.Message)
			if err != nil {
				return n, fmt.Errorf("consistent: outbox entry %d: %w", o.Seq, err)
			}
			if err := r.senders.send(ctx, o.To, m); err != nil {
				return n, fmt.Errorf("consistent: relay outbox entry %d to %s: %w", o.Seq, o.To, err)
			}
			if err := r.store.Sent(ctx, Key{ID: o.BusinessID}, []int64{o.Seq}); err != nil {
				return n, err
			}
			n++
		}
	}
}

// Run calls Flush every Interval until ctx is cancelled, then closes its
// senders and returns ctx.Err().
func (r *Relay) Run(ctx context.Context) error {
	defer r.senders.close(context.Background())
	for {
		if _, err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.o.Logger.Warn("consistent: relay pass failed", "err", err)
		}
		wake := make(chan struct{})
		t := r.o.Clock.AfterFunc(r.o.Interval, func() { close(wake) })
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
		}
	}
}
