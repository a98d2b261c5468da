package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/saga"
)

// OrderState is the saga's state: which of the two messages arrived, and
// how many timeouts it has waited through.
type OrderState struct {
	PaymentReceived bool
	ItemShipped     bool
	Retries         int
}

const (
	checkEvery = 5 * time.Second // the article's timeout
	maxRetries = 3               // timeouts before giving up
)

var errIncomplete = errors.New("an order message never arrived")

// console prints lines like the article's log, with the time of the clock
// the saga runs on.
type console struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, "[%s] %s\n", c.now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// newOrderSaga declares the article's orchestration: PaymentAccepted and
// ItemShipped may arrive in any order; while one is missing the saga checks
// again every 5 seconds, three times, then compensates.
// trace, when not nil, sees the message of every log record.
func newOrderSaga(out *console, now func() time.Time, finished func(id string), trace func(string)) *saga.Saga[OrderState] {
	sg := saga.New[OrderState](saga.Config{
		Name:         "order",
		TypeProperty: "MessageType",
		TimeoutType:  "Timeout",
		Logger:       slog.New(&articleLog{out: out, trace: trace}),
		Now:          now,
	})
	// check completes the saga, or asks to be woken up in 5 seconds.
	check := func(c *saga.Context[OrderState]) error {
		if c.State.PaymentReceived && c.State.ItemShipped {
			out.printf("Orchestration with session ID %s has successfully completed. Sending notification (TBD).", c.ID())
			c.Complete()
			finished(c.ID())
			return nil
		}
		if len(c.PendingTimeouts()) > 0 {
			return nil // already waiting
		}
		out.printf("Scheduling a timeout to check in %s", clock(checkEvery))
		c.State.Retries++
		_, err := c.RequestTimeout(checkEvery, nil)
		return err
	}
	sg.Starts("PaymentAccepted", func(c *saga.Context[OrderState], m *azservicebus.ReceivedMessage) error {
		c.State.PaymentReceived = true
		return check(c)
	})
	sg.Starts("ItemShipped", func(c *saga.Context[OrderState], m *azservicebus.ReceivedMessage) error {
		c.State.ItemShipped = true
		return check(c)
	})
	sg.OnTimeout(func(c *saga.Context[OrderState], t saga.Timeout) error {
		if c.State.Retries >= maxRetries {
			out.printf("Exhausted all retries (%d). Executing compensating action and completing session with ID %s", c.State.Retries, c.ID())
			c.Compensate(errIncomplete)
			return nil
		}
		return check(c)
	})
	sg.OnCompensate(func(c *saga.Context[OrderState], cause error) error {
		switch {
		case c.State.PaymentReceived:
			out.printf("Compensating: refunding the payment of order %s (%v)", c.ID(), cause)
		case c.State.ItemShipped:
			out.printf("Compensating: recalling the shipment of order %s (%v)", c.ID(), cause)
		}
		finished(c.ID())
		return nil
	})
	return sg
}

// clock formats a duration as the article's log does (00:00:05).
func clock(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// articleLog turns the saga's structured log into the article's lines for
// the transitions the article shows, and the cancellations it did not have.
type articleLog struct {
	out   *console
	trace func(string)
	attrs []slog.Attr
}

func (h *articleLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *articleLog) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if h.trace != nil {
		h.trace(r.Message)
	}
	switch r.Message {
	case "timeout for a missing saga discarded", "timeout after the saga finished discarded", "stale timeout discarded":
		h.out.printf("Orchestration ID %s has completed. Discarding timeout.", attrs["saga_id"])
	case "timeout cancelled":
		h.out.printf("Cancelled the pending timeout of %s", attrs["saga_id"])
	}
	return nil
}

func (h *articleLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &articleLog{out: h.out, trace: h.trace, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *articleLog) WithGroup(string) slog.Handler { return h }
