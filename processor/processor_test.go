package processor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
)

func activeCount(t *testing.T, srv *busbartest.Server, queue string) int64 {
	t.Helper()
	info, err := srv.Broker().GetQueue(context.Background(), queue)
	if err != nil {
		t.Fatal(err)
	}
	return info.Runtime.ActiveMessageCount
}

func deadLetters(t *testing.T, c *azservicebus.Client, queue string, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("receiving dead letters: %v (have %d of %d)", err, len(out), n)
		}
		out = append(out, msgs...)
	}
	return out
}

func TestCompletesEachMessageOnce(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	const n = 40
	for i := range n {
		send(t, c, "work", text(fmt.Sprint(i), "", "job"))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	const calls = 4
	var active, peak atomic.Int32
	full := make(chan struct{}) // closed once calls handlers run at once
	var once sync.Once
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		a := active.Add(1)
		defer active.Add(-1)
		for {
			old := peak.Load()
			if a <= old || peak.CompareAndSwap(old, a) {
				break
			}
		}
		if a == calls {
			once.Do(func() { close(full) })
		}
		select { // the first handlers wait here until calls of them are active
		case <-full:
		case <-ctx.Done():
			return ctx.Err()
		}
		mu.Lock()
		seen[m.MessageID]++
		mu.Unlock()
		return nil
	}, &processor.Options{MaxConcurrentCalls: calls})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	select {
	case <-full:
	case <-time.After(20 * time.Second):
		t.Fatalf("only %d handlers ran at once, want %d", active.Load(), calls)
	}
	eventually(t, "all messages handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n })
	eventually(t, "the queue to empty", func() bool { return activeCount(t, srv, "work") == 0 })
	if err := stop(); err != nil {
		t.Fatalf("Close/Run: %v", err)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("message %s handled %d times", id, k)
		}
	}
	if pk := peak.Load(); pk != calls {
		t.Errorf("peak concurrency %d, want exactly MaxConcurrentCalls = %d", pk, calls)
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	send(t, c, "work", text("flaky", "", "x"))
	var mu sync.Mutex
	var counts []uint32
	var reported errs
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		mu.Lock()
		counts = append(counts, m.DeliveryCount)
		mu.Unlock()
		switch m.DeliveryCount {
		case 1:
			return errors.New("transient")
		case 2:
			panic("boom")
		}
		return nil
	}, &processor.Options{OnError: reported.add, Retry: processor.RetryPolicy{MaxAttempts: 5, Backoff: processor.ExponentialBackoff(time.Millisecond, 4*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	eventually(t, "the queue to empty", func() bool { return activeCount(t, srv, "work") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counts, []uint32{1, 2, 3}) {
		t.Fatalf("delivery counts %v, want [1 2 3]", counts)
	}
	got := reported.ops()
	if len(got) != 2 || !strings.Contains(got[0], "handle") || !strings.Contains(got[0], "transient") || !strings.Contains(got[1], "handler panicked: boom") {
		t.Fatalf("reported %q", got)
	}
}

func TestDeadLettersAfterMaxAttempts(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	send(t, c, "work", text("poison", "", "x"), text("fatal", "", "y"))
	var mu sync.Mutex
	calls := map[string][]uint32{}
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		mu.Lock()
		calls[m.MessageID] = append(calls[m.MessageID], m.DeliveryCount)
		mu.Unlock()
		if m.MessageID == "fatal" {
			return processor.Permanent(errors.New("cannot parse"))
		}
		return errors.New("still failing")
	}, &processor.Options{Retry: processor.RetryPolicy{MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	dl := deadLetters(t, c, "work", 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls["poison"], []uint32{1, 2, 3}) || !slices.Equal(calls["fatal"], []uint32{1}) {
		t.Fatalf("calls %v: want poison tried 3 times, fatal once", calls)
	}
	for _, m := range dl {
		want := map[string]string{"poison": "still failing", "fatal": "cannot parse"}[m.MessageID]
		if m.DeadLetterReason == nil || *m.DeadLetterReason != processor.DeadLetterReason ||
			m.DeadLetterErrorDescription == nil || *m.DeadLetterErrorDescription != want {
			t.Errorf("dead letter %s: reason %v description %v, want %q %q", m.MessageID, m.DeadLetterReason, m.DeadLetterErrorDescription, processor.DeadLetterReason, want)
		}
	}
}

func TestCloseWaitsForHandlersInFlight(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	send(t, c, "work", text("slow", "", "x"))
	started, release := make(chan struct{}), make(chan struct{})
	var handlerCtxErr error
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		close(started)
		<-release
		handlerCtxErr = ctx.Err()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(context.Background()) }()
	<-started
	closeDone := make(chan error, 1)
	go func() { closeDone <- p.Close(context.Background()) }()
	select {
	case err := <-closeDone:
		t.Fatalf("Close returned %v while a handler was running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-closeDone; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-runDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if handlerCtxErr != nil {
		t.Fatalf("a graceful Close cancelled the handler's context: %v", handlerCtxErr)
	}
	if n := activeCount(t, srv, "work"); n != 0 {
		t.Fatalf("%d messages left: the in-flight message was not completed", n)
	}
}

func TestCloseDeadlineCancelsHandlers(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	send(t, c, "work", text("stuck", "", "x"))
	started := make(chan struct{})
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Run(context.Background()) }()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
}

func TestRunContextCancellation(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("work", broker.QueueProperties{}))
	c := newClient(t, srv)
	send(t, c, "work", text("m", "", "x"))
	started := make(chan struct{})
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	<-started
	cancel()
	if err := <-runDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want Canceled", err)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("a second Run succeeded")
	}
}

// TestRenewsMessageLock holds a message across three lock durations of the
// broker's fake clock, moved from one renewal to the next; the processor
// keeps the lock, so completing works and the message is not delivered
// again. With renewal off, no renewal timer is armed and the test fails.
func TestRenewsMessageLock(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	const lock = 5 * time.Second
	srv := busbartest.Start(t, busbartest.WithFakeClock(start), busbartest.WithQueue("work", broker.QueueProperties{LockDuration: lock}))
	c := newClient(t, srv)
	send(t, c, "work", text("long", "", "x"))
	var reported errs
	h := newHeldHandler()
	clk := &recordingClock{Fake: srv.Clock()}
	p, err := processor.New(c, processor.Queue("work"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		return h.hold(ctx)
	}, &processor.Options{OnError: reported.add, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	requireRenewedWhileHeld(t, srv, "work", lock, clk, h, &reported, p.Run, p.Close)
}
