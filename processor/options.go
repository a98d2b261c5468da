package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/busbar-io/busbar/clock"
)

// Entity names what a processor receives from: a queue, or a subscription
// of a topic.
type Entity struct {
	Queue        string // the queue, or "" for a subscription
	Topic        string // the topic of Subscription
	Subscription string // the subscription, with Topic
}

// Queue returns the Entity of a queue.
func Queue(name string) Entity { return Entity{Queue: name} }

// Subscription returns the Entity of a topic's subscription.
func Subscription(topic, subscription string) Entity {
	return Entity{Topic: topic, Subscription: subscription}
}

// String returns the entity path: "queue" or "topic/subscriptions/sub".
func (e Entity) String() string {
	if e.Queue != "" {
		return e.Queue
	}
	return e.Topic + "/subscriptions/" + e.Subscription
}

// SendTarget returns the queue or topic that messages for this entity are
// sent to.
func (e Entity) SendTarget() string {
	if e.Queue != "" {
		return e.Queue
	}
	return e.Topic
}

func (e Entity) validate() error {
	switch {
	case e.Queue != "" && e.Topic == "" && e.Subscription == "":
		return nil
	case e.Queue == "" && e.Topic != "" && e.Subscription != "":
		return nil
	}
	return fmt.Errorf("processor: entity %+v must name a queue, or a topic and a subscription", e)
}

// RetryPolicy decides what happens to a message whose handler failed.
type RetryPolicy struct {
	// MaxAttempts is how many deliveries a message gets: a failure on the
	// MaxAttempts-th delivery dead-letters it. Zero leaves the decision to
	// the entity's MaxDeliveryCount (the broker dead-letters the message
	// when it is exceeded).
	MaxAttempts int
	// Backoff returns how long to hold a failed message, with its lock
	// renewed, before abandoning it, given its delivery count (1 for the
	// first delivery). Nil abandons at once.
	Backoff func(deliveryCount int) time.Duration
}

// ExponentialBackoff returns a RetryPolicy.Backoff that waits base after the
// first delivery and doubles for each further one, never more than max.
func ExponentialBackoff(base, max time.Duration) func(int) time.Duration {
	return func(n int) time.Duration {
		d := base
		for i := 1; i < n && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}

// DeadLetterReason is the dead-letter reason the processor gives a message
// whose handler failed for the last time.
const DeadLetterReason = "HandlerFailed"

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err so that a handler returning it has its message
// dead-lettered at once instead of retried. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was made by
// Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Error is a failure the processor reports to OnError.
type Error struct {
	Op        string // "accept", "receive", "handle", "complete", "abandon", "deadletter", "renew", "session"
	Entity    string // the entity path
	SessionID string // the session, for a SessionProcessor
	MessageID string // the message, when there is one
	Err       error
}

// Error describes the failure: the operation, where, and why.
func (e *Error) Error() string {
	s := "processor: " + e.Op + " on " + e.Entity
	if e.SessionID != "" {
		s += " session " + e.SessionID
	}
	if e.MessageID != "" {
		s += " message " + e.MessageID
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// common are the options both processors share.
type common struct {
	maxRenewal time.Duration
	retry      RetryPolicy
	onError    func(error)
	logger     *slog.Logger
	clock      clock.Clock
}

func newCommon(maxRenewal time.Duration, retry RetryPolicy, onError func(error), logger *slog.Logger, clk clock.Clock) common {
	if maxRenewal == 0 {
		maxRenewal = 5 * time.Minute
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = clock.Real()
	}
	return common{maxRenewal: maxRenewal, retry: retry, onError: onError, logger: logger, clock: clk}
}

// sleep waits d on the processor's clock, or until ctx is done; it reports
// whether d elapsed.
func (c *common) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

func (c *common) report(e *Error) {
	c.logger.Warn("processor error", "op", e.Op, "entity", e.Entity, "session", e.SessionID, "message_id", e.MessageID, "err", e.Err)
	if c.onError != nil {
		c.onError(e)
	}
}
