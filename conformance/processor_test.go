package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A small session processor, written with the SDK's public API only, the
// way an application without a toolkit would: accept the next session,
// handle its messages one at a time until it is idle, close it, repeat.
// The seed scenarios run on it.

// sessionHandler handles one message of an accepted session and settles it.
type sessionHandler func(ctx context.Context, r *azservicebus.SessionReceiver, m *azservicebus.ReceivedMessage) error

// processorOptions configure runSessionProcessors.
type processorOptions struct {
	// accept accepts the next session (of a queue or a subscription) with
	// the worker's client.
	accept func(ctx context.Context, c *azservicebus.Client) (*azservicebus.SessionReceiver, error)
	// concurrency is how many sessions are processed at once.
	concurrency int
	// acceptWait bounds one AcceptNextSession call.
	acceptWait time.Duration
	// idle closes a session that has delivered nothing for this long.
	idle time.Duration
	// done reports that the scenario has reached its end.
	done func() bool
	// limit bounds the whole run.
	limit time.Duration
	// log is printed when the run fails.
	log *eventLog
}

// runSessionProcessors runs opts.concurrency processors until done reports
// true, and fails the test if that does not happen within the limit or a
// handler fails. Each processor has its own client (connection): when an
// AcceptNextSession times out on the client side the SDK resets its
// connection, which must not cut the sessions other processors hold.
func runSessionProcessors(t *testing.T, handle sessionHandler, opts processorOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opts.limit)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		firstEr error
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstEr == nil {
			firstEr = err
		}
		cancel()
	}
	for range opts.concurrency {
		c := newClient(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && !opts.done() {
				if err := processNextSession(ctx, c, handle, opts); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstEr != nil {
		t.Fatalf("session processor: %v\nwhat the handlers did: %v", firstEr, opts.log)
	}
	if !opts.done() {
		t.Fatalf("the scenario did not finish within %v\nwhat the handlers did: %v", opts.limit, opts.log)
	}
}

// processNextSession accepts one session and handles its messages until it
// has been idle for opts.idle. Running out of time or of sessions is not an
// error.
func processNextSession(ctx context.Context, c *azservicebus.Client, handle sessionHandler, opts processorOptions) error {
	actx, cancel := context.WithTimeout(ctx, opts.acceptWait)
	r, err := opts.accept(actx, c)
	cancel()
	if err != nil {
		var sbErr *azservicebus.Error
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) ||
			(errors.As(err, &sbErr) && (sbErr.Code == azservicebus.CodeTimeout || sbErr.Code == azservicebus.CodeConnectionLost)) {
			return nil // no session available right now
		}
		return fmt.Errorf("AcceptNextSession: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = r.Close(cctx)
	}()
	for ctx.Err() == nil && !opts.done() {
		rctx, cancel := context.WithTimeout(ctx, opts.idle)
		msgs, err := r.ReceiveMessages(rctx, 1, nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return nil // idle: release the session
			}
			return fmt.Errorf("session %s: ReceiveMessages: %w", r.SessionID(), err)
		}
		for _, m := range msgs {
			hctx, cancel := context.WithTimeout(ctx, opTimeout)
			err := handle(hctx, r, m)
			cancel()
			if err != nil {
				return fmt.Errorf("session %s, message %q: %w", r.SessionID(), m.Body, err)
			}
		}
	}
	return nil
}

// eventLog records what handlers did, per session, safely across
// processors.
type eventLog struct {
	mu     sync.Mutex
	events map[string][]string
}

func newEventLog() *eventLog { return &eventLog{events: map[string][]string{}} }

func (l *eventLog) add(session, event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[session] = append(l.events[session], event)
}

func (l *eventLog) get(session string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events[session]...)
}

// String formats the log for failure messages.
func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%q", l.events)
}

func (l *eventLog) last(session string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events[session]
	if len(ev) == 0 {
		return ""
	}
	return ev[len(ev)-1]
}
