package processor_test

import (
	"context"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/clock"
)

func newClient(t testing.TB, srv *busbartest.Server) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func send(t testing.TB, c *azservicebus.Client, to string, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender(to, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func text(id, sessionID, body string) *azservicebus.Message {
	m := &azservicebus.Message{MessageID: &id, Body: []byte(body)}
	if sessionID != "" {
		m.SessionID = &sessionID
	}
	return m
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 20*time.Second, what, cond)
}

// errs collects what a processor reports to OnError.
type errs struct {
	mu   sync.Mutex
	list []error
}

func (e *errs) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, err)
}

func (e *errs) ops() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, err := range e.list {
		out = append(out, fmt.Sprint(err))
	}
	return out
}

// runInBackground runs a processor's Run and returns a function that
// closes it and returns Run's error.
func runInBackground(t testing.TB, run func(context.Context) error, closeFn func(context.Context) error) (stop func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- run(context.Background()) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if cerr := closeFn(ctx); cerr != nil {
				err = cerr
				return
			}
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// recordingClock is busbartest's fake clock, recording the delay of every
// timer the processor arms on it, once the timer is armed.
type recordingClock struct {
	*clock.Fake
	mu    sync.Mutex
	armed []time.Duration
}

func (c *recordingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Fake.AfterFunc(d, f)
	c.mu.Lock()
	c.armed = append(c.armed, d)
	c.mu.Unlock()
	return t
}

// renewals returns the delays of the timers armed so far that are no longer
// than lock: the lock-renewal timers (the session idle timer is longer).
func (c *recordingClock) renewals(lock time.Duration) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, d := range c.armed {
		if d <= lock {
			out = append(out, d)
		}
	}
	return out
}

// driveRenewals moves the fake clock from one lock renewal to the next, n
// times, each time waiting for the processor to have renewed the lock and
// armed its next renewal timer. It fails the test unless every timer is due
// at half the lock duration, which holds only when each renewal gave the
// lock a full lock duration again on the broker's clock.
func driveRenewals(t *testing.T, c *recordingClock, lock time.Duration, n int) {
	t.Helper()
	for i := 0; i <= n; i++ {
		eventually(t, fmt.Sprintf("lock renewal timer %d", i+1), func() bool { return len(c.renewals(lock)) > i })
		d := c.renewals(lock)[i]
		if d != lock/2 {
			t.Fatalf("renewal timer %d armed for %v, want %v (half a renewed lock)", i+1, d, lock/2)
		}
		if i < n {
			c.Advance(d)
		}
	}
}

// heldHandler counts its calls and holds each one until release is closed
// or the call's context ends: a handler that outlives several locks.
type heldHandler struct {
	calls   atomic.Int32
	release chan struct{}
}

func newHeldHandler() *heldHandler { return &heldHandler{release: make(chan struct{})} }

func (h *heldHandler) hold(ctx context.Context) error {
	h.calls.Add(1)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// requireRenewedWhileHeld runs a processor whose handler is h over a queue
// holding one message, drives six renewals (three lock durations) on clk,
// then releases the handler and requires that the message was handled
// once, completed, and that no error was reported.
func requireRenewedWhileHeld(t *testing.T, srv *busbartest.Server, queue string, lock time.Duration,
	clk *recordingClock, h *heldHandler, reported *errs, run, closeFn func(context.Context) error) {
	t.Helper()
	stop := runInBackground(t, run, closeFn)
	eventually(t, "the handler to start", func() bool { return h.calls.Load() == 1 })
	driveRenewals(t, clk, lock, 6) // 6 × lock/2: three lock durations
	close(h.release)
	eventually(t, "the queue to empty", func() bool { return activeCount(t, srv, queue) == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if h.calls.Load() != 1 || len(reported.ops()) != 0 {
		t.Fatalf("handler called %d times, errors %q: want once, none", h.calls.Load(), reported.ops())
	}
}
