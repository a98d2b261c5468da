package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// ErrSettled is returned by a handler that settled its message itself,
// through the receiver (Session.Receiver): the processor leaves the message
// as it is and reports nothing.
var ErrSettled = errors.New("processor: the handler settled the message")

// settler is what Receiver and SessionReceiver have in common.
type settler interface {
	CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
	AbandonMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error
}

// minRenewDelay keeps a lock whose expiry is (nearly) now from being
// renewed in a tight loop.
const minRenewDelay = 100 * time.Millisecond

// settleTimeout bounds one settlement.
const settleTimeout = 30 * time.Second

// maxDescription bounds the dead-letter error description.
const maxDescription = 1024

// call runs f, turning a panic into an error.
func call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return f()
}

// process runs one message through a handler: with the lock kept renewed
// by renew (nil when the caller renews a session lock), waits the retry
// backoff after a failure and settles the message.
func (c *common) process(ctx context.Context, s settler, m *azservicebus.ReceivedMessage, at Error,
	handler func(context.Context) error, renew func(ctx context.Context, lost func(error)) (stop func())) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := func() {}
	if renew != nil {
		stop = renew(hctx, func(err error) {
			cancel()
			e := at
			e.Op, e.Err = "renew", err
			c.report(&e)
		})
	}
	herr := call(func() error { return handler(hctx) })
	if errors.Is(herr, ErrSettled) {
		stop()
		return
	}
	dead := herr != nil && (IsPermanent(herr) || (c.retry.MaxAttempts > 0 && int(m.DeliveryCount) >= c.retry.MaxAttempts))
	if herr != nil {
		e := at
		e.Op, e.Err = "handle", herr
		c.report(&e)
		if !dead && c.retry.Backoff != nil {
			if d := c.retry.Backoff(int(m.DeliveryCount)); d > 0 {
				c.sleep(hctx, d)
			}
		}
	}
	stop()
	if hctx.Err() != nil && ctx.Err() == nil && herr != nil {
		// The lock was lost while the handler ran: the message is the
		// broker's again and cannot be settled by us.
		return
	}
	// A settlement the SDK keeps retrying (the link being recovered after
	// a lost lock) must not hold up Close for ever.
	ctx, cancelSettle := context.WithTimeout(ctx, settleTimeout)
	defer cancelSettle()
	var op string
	var err error
	switch {
	case herr == nil:
		op, err = "complete", s.CompleteMessage(ctx, m, nil)
	case dead:
		reason, desc := DeadLetterReason, herr.Error()
		if len(desc) > maxDescription {
			desc = desc[:maxDescription]
		}
		op, err = "deadletter", s.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
	default:
		op, err = "abandon", s.AbandonMessage(ctx, m, nil)
	}
	if err != nil {
		e := at
		e.Op, e.Err = op, err
		c.report(&e)
	}
}

// keepRenewed renews a lock, at half its remaining time, until stop is
// called, ctx is done, renewal fails (lost is called) or, when bounded, the
// processor's MaxAutoLockRenewal has elapsed. All of it is timed on the
// processor's clock; a renewal (a network call) runs in keepRenewed's own
// goroutine, never in the clock's timer function.
func (c *common) keepRenewed(ctx context.Context, bounded bool, until func() time.Time, renew func(context.Context) error, lost func(error)) (stop func()) {
	if c.maxRenewal < 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := c.clock.Now()
		for {
			now := c.clock.Now()
			d := max(until().Sub(now)/2, minRenewDelay)
			if bounded && now.Sub(start)+d > c.maxRenewal {
				return
			}
			if !c.sleep(ctx, d) {
				return
			}
			if err := renew(ctx); err != nil {
				if ctx.Err() == nil {
					lost(err)
				}
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}
