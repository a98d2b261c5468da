package processor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
)

func sessionQueue(name string) busbartest.Option {
	return busbartest.WithQueue(name, broker.QueueProperties{RequiresSession: true})
}

// TestSessionsInOrderWithState: each session's messages are handled in
// order, one at a time, and the handler keeps a count in the session state.
func TestSessionsInOrderWithState(t *testing.T) {
	srv := busbartest.Start(t, sessionQueue("orders"))
	c := newClient(t, srv)
	sessions := []string{"a", "b", "c"}
	for i := range 5 {
		for _, s := range sessions {
			send(t, c, "orders", text(s+strconv.Itoa(i), s, strconv.Itoa(i)))
		}
	}
	var mu sync.Mutex
	order := map[string][]string{}
	var opened, closed atomic.Int32
	p, err := processor.NewSession(c, processor.Queue("orders"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		st, err := s.State(ctx)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(st))
		if string(m.Body) != strconv.Itoa(n) {
			return processor.Permanent(fmt.Errorf("session %s: message %s with state %d", s.ID(), m.Body, n))
		}
		mu.Lock()
		order[s.ID()] = append(order[s.ID()], string(m.Body))
		mu.Unlock()
		return s.SetState(ctx, []byte(strconv.Itoa(n+1)))
	}, &processor.SessionOptions{
		MaxConcurrentSessions: 2,
		SessionIdleTimeout:    100 * time.Millisecond,
		OnSessionOpen:         func(ctx context.Context, s *processor.Session) { opened.Add(1) },
		OnSessionClose:        func(ctx context.Context, s *processor.Session) { closed.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	eventually(t, "all sessions handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order["a"]) == 5 && len(order["b"]) == 5 && len(order["c"]) == 5
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if !slices.Equal(order[s], []string{"0", "1", "2", "3", "4"}) {
			t.Errorf("session %s handled %v", s, order[s])
		}
	}
	if opened.Load() < 3 || opened.Load() != closed.Load() {
		t.Errorf("opened %d sessions, closed %d", opened.Load(), closed.Load())
	}
	// The state is on the broker, readable by anyone who takes the session.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.AcceptSessionForQueue(ctx, "orders", "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	st, err := r.GetSessionState(ctx, nil)
	if err != nil || string(st) != "5" {
		t.Fatalf("state of b = %q, %v; want 5", st, err)
	}
}

// TestSessionIdleTimeoutReleasesSession: with one session slot, a second
// session is served only because the first is released when idle.
func TestSessionIdleTimeoutReleasesSession(t *testing.T) {
	srv := busbartest.Start(t, sessionQueue("q"))
	c := newClient(t, srv)
	send(t, c, "q", text("1", "first", "x"))
	var mu sync.Mutex
	var got []string
	var closedAt []string
	p, err := processor.NewSession(c, processor.Queue("q"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		mu.Lock()
		got = append(got, s.ID())
		mu.Unlock()
		return nil
	}, &processor.SessionOptions{
		MaxConcurrentSessions: 1,
		SessionIdleTimeout:    150 * time.Millisecond,
		OnSessionClose: func(ctx context.Context, s *processor.Session) {
			mu.Lock()
			closedAt = append(closedAt, s.ID())
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	eventually(t, "the first session", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	send(t, c, "q", text("2", "second", "y"))
	eventually(t, "the second session", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"first", "second"}) || len(closedAt) < 1 || closedAt[0] != "first" {
		t.Fatalf("handled %v, closed %v", got, closedAt)
	}
}

// TestSessionConcurrentCalls: MaxConcurrentCallsPerSession lets several
// messages of one session run at once.
func TestSessionConcurrentCalls(t *testing.T) {
	srv := busbartest.Start(t, sessionQueue("q"))
	c := newClient(t, srv)
	for i := range 3 {
		send(t, c, "q", text(strconv.Itoa(i), "s", "x"))
	}
	var active atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	p, err := processor.NewSession(c, processor.Queue("q"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		if active.Add(1) == 3 {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &processor.SessionOptions{MaxConcurrentSessions: 1, MaxConcurrentCallsPerSession: 3})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatalf("only %d handlers ran at once in one session, want 3", active.Load())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionAbandonKeepsOrder: a failed message comes back before the
// session's next one.
func TestSessionAbandonKeepsOrder(t *testing.T) {
	srv := busbartest.Start(t, sessionQueue("q"))
	c := newClient(t, srv)
	send(t, c, "q", text("m1", "s", "1"), text("m2", "s", "2"))
	var mu sync.Mutex
	var seen []string
	var reported errs
	p, err := processor.NewSession(c, processor.Queue("q"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s#%d", m.MessageID, m.DeliveryCount))
		mu.Unlock()
		if m.MessageID == "m1" && m.DeliveryCount == 1 {
			return errors.New("not yet")
		}
		return nil
	}, &processor.SessionOptions{MaxConcurrentSessions: 1, OnError: reported.add})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	eventually(t, "both messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"m1#1", "m1#2", "m2#1"}) {
		t.Fatalf("handled %v", seen)
	}
	var pe *processor.Error
	if ops := reported.ops(); len(ops) != 1 {
		t.Fatalf("reported %q", ops)
	}
	if !errors.As(reported.list[0], &pe) || pe.Op != "handle" || pe.SessionID != "s" || pe.MessageID != "m1" {
		t.Fatalf("reported %#v", reported.list[0])
	}
}

// TestSessionProcessorCloseReleasesSessions: after Close, another
// processor can take the session at once.
func TestSessionProcessorCloseReleasesSessions(t *testing.T) {
	srv := busbartest.Start(t, sessionQueue("q"))
	c := newClient(t, srv)
	send(t, c, "q", text("m1", "s", "1"))
	handled := make(chan string, 4)
	h := func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		handled <- m.MessageID
		return nil
	}
	p1, _ := processor.NewSession(c, processor.Queue("q"), h, &processor.SessionOptions{SessionIdleTimeout: time.Hour})
	stop1 := runInBackground(t, p1.Run, p1.Close)
	<-handled
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	send(t, c, "q", text("m2", "s", "2"))
	p2, _ := processor.NewSession(c, processor.Queue("q"), h, nil)
	stop2 := runInBackground(t, p2.Run, p2.Close)
	select {
	case id := <-handled:
		if id != "m2" {
			t.Fatalf("handled %s", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session was not released by Close")
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// TestRenewsSessionLock holds a session across three lock durations of the
// broker's fake clock, moved from one renewal to the next: the processor
// renews the session lock, so the handler's message completes and is not
// delivered again. With renewal off, no renewal timer is armed and the test
// fails.
func TestRenewsSessionLock(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	const lock = 5 * time.Second
	srv := busbartest.Start(t, busbartest.WithFakeClock(start),
		busbartest.WithQueue("q", broker.QueueProperties{RequiresSession: true, LockDuration: lock}))
	c := newClient(t, srv)
	send(t, c, "q", text("long", "s", "x"))
	var reported errs
	h := newHeldHandler()
	clk := &recordingClock{Fake: srv.Clock()}
	p, err := processor.NewSession(c, processor.Queue("q"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		return h.hold(ctx)
	}, &processor.SessionOptions{OnError: reported.add, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	requireRenewedWhileHeld(t, srv, "q", lock, clk, h, &reported, p.Run, p.Close)
}
