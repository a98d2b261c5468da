package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"
)

// Sessions: accepting, exclusive locks, state, renewal, listing, ordering.

// sessionQueue declares a session-enabled queue.
func sessionQueue(base string, p admin.QueueProperties) *queueSpec {
	p.RequiresSession = ptr(true)
	return declareQueue(base, p)
}

// sessionMessage is a message for session id.
func sessionMessage(id, body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body), SessionID: ptr(id)}
}

// acceptSession accepts a named session of a queue; the receiver is closed
// when the test ends.
func acceptSession(t *testing.T, c *azservicebus.Client, queue, id string) *azservicebus.SessionReceiver {
	t.Helper()
	r, err := c.AcceptSessionForQueue(ctxFor(t, opTimeout), queue, id, nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue(%s, %s): %v", queue, id, err)
	}
	t.Cleanup(func() { _ = r.Close(ctxFor(t, opTimeout)) })
	return r
}

var acceptNextQueue = sessionQueue("accept-next", admin.QueueProperties{})

// TestAcceptNextSession: AcceptNextSession locks the session that has
// messages, reports its id and lock, and delivers its messages.
func TestAcceptNextSession(t *testing.T) {
	t.Parallel()
	q := acceptNextQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("only", "m1"), sessionMessage("only", "m2"))
	r, err := c.AcceptNextSessionForQueue(ctxFor(t, 10*time.Second), q, nil)
	if err != nil {
		t.Fatalf("AcceptNextSessionForQueue: %v", err)
	}
	t.Cleanup(func() { _ = r.Close(ctxFor(t, opTimeout)) })
	if r.SessionID() != "only" {
		t.Fatalf("SessionID %q, want %q", r.SessionID(), "only")
	}
	if !r.LockedUntil().After(time.Now()) {
		t.Errorf("session LockedUntil %v, want a time in the future", r.LockedUntil())
	}
	got := receiveN(t, r, 2, receiveTimeout)
	if want := []string{"m1", "m2"}; !equalStrings(bodies(got), want) {
		t.Fatalf("bodies %q, want %q", bodies(got), want)
	}
	for _, m := range got {
		if strValue(m.SessionID) != "only" {
			t.Errorf("message %q has SessionID %q, want %q", m.Body, strValue(m.SessionID), "only")
		}
	}
	complete(t, r, got...)
}

var namedSessionQueue = sessionQueue("named-session", admin.QueueProperties{})

// TestAcceptNamedSession: AcceptSession(id) delivers that session's
// messages only.
func TestAcceptNamedSession(t *testing.T) {
	t.Parallel()
	q := namedSessionQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("a", "a1"), sessionMessage("b", "b1"), sessionMessage("a", "a2"), sessionMessage("b", "b2"))
	r := acceptSession(t, c, q, "b")
	if r.SessionID() != "b" {
		t.Fatalf("SessionID %q, want b", r.SessionID())
	}
	got := receiveN(t, r, 2, receiveTimeout)
	if want := []string{"b1", "b2"}; !equalStrings(bodies(got), want) {
		t.Fatalf("session b delivered %q, want %q", bodies(got), want)
	}
	complete(t, r, got...)
	// Session a's messages are untouched: first deliveries, in order.
	ra := acceptSession(t, c, q, "a")
	gotA := receiveN(t, ra, 2, receiveTimeout)
	if want := []string{"a1", "a2"}; !equalStrings(bodies(gotA), want) {
		t.Fatalf("session a delivered %q, want %q", bodies(gotA), want)
	}
	for _, m := range gotA {
		if m.DeliveryCount != 1 {
			t.Errorf("session a: %q has DeliveryCount %d, want 1", m.Body, m.DeliveryCount)
		}
	}
	complete(t, ra, gotA...)
}

var lockedSessionQueue = sessionQueue("locked-session", admin.QueueProperties{})

// TestSessionLockedElsewhere: a session accepted by one receiver cannot be
// accepted by another (com.microsoft:session-cannot-be-locked), and
// AcceptNextSession skips it.
func TestSessionLockedElsewhere(t *testing.T) {
	t.Parallel()
	q := lockedSessionQueue.create(t)
	c1, c2 := newClient(t), newClient(t)
	send(t, newSender(t, c1, q), sessionMessage("busy", "x"))
	_ = acceptSession(t, c1, q, "busy")

	r, err := c2.AcceptSessionForQueue(ctxFor(t, opTimeout), q, "busy", nil)
	if err == nil {
		_ = r.Close(ctxFor(t, opTimeout))
		t.Fatalf("a second AcceptSessionForQueue of a locked session succeeded")
	}
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != "com.microsoft:session-cannot-be-locked" {
		t.Errorf("error %v (%T), want the AMQP condition com.microsoft:session-cannot-be-locked", err, err)
	}
	requireAcceptNextTimeout(t, func(ctx context.Context) (*azservicebus.SessionReceiver, error) {
		return c2.AcceptNextSessionForQueue(ctx, q, nil)
	})
}

var noSessionQueue = sessionQueue("no-session", admin.QueueProperties{})

// TestAcceptNextSessionTimeout: with no session available AcceptNextSession
// fails with CodeTimeout when its context's deadline is near.
func TestAcceptNextSessionTimeout(t *testing.T) {
	t.Parallel()
	q := noSessionQueue.create(t)
	c := newClient(t)
	requireAcceptNextTimeout(t, func(ctx context.Context) (*azservicebus.SessionReceiver, error) {
		return c.AcceptNextSessionForQueue(ctx, q, nil)
	})
}

// acceptNextWait is the context deadline requireAcceptNextTimeout gives
// AcceptNextSession.
const acceptNextWait = 4 * time.Second

// requireAcceptNextTimeout checks that accept, with no session available,
// fails with CodeTimeout: the SDK asks the broker (com.microsoft:timeout)
// to give up slightly before the context's deadline, by a random jitter of
// up to 1% of it, and the broker answers with the condition
// com.microsoft:timeout. When the jitter happens to be near zero the
// context can expire first (context.DeadlineExceeded, as the SDK's own
// live tests allow); that attempt is repeated, up to three times.
func requireAcceptNextTimeout(t *testing.T, accept func(ctx context.Context) (*azservicebus.SessionReceiver, error)) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), acceptNextWait)
		start := time.Now()
		var r *azservicebus.SessionReceiver
		r, err = accept(ctx)
		cancel()
		if r != nil {
			t.Fatalf("AcceptNextSession returned session %q, want none available", r.SessionID())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			continue
		}
		requireCode(t, err, azservicebus.CodeTimeout)
		if d := time.Since(start); d < acceptNextWait-time.Second {
			t.Errorf("timed out after %v, want about the %v the context allowed", d, acceptNextWait)
		}
		return
	}
	t.Fatalf("three AcceptNextSession calls ended with %v instead of CodeTimeout: the broker did not answer com.microsoft:timeout before the context's deadline", err)
}

var sessionStateQueue = sessionQueue("session-state", admin.QueueProperties{})

// TestSessionState: state starts nil, is kept across receivers, and
// setting nil clears it.
func TestSessionState(t *testing.T) {
	t.Parallel()
	q := sessionStateQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("stateful", "s1"))
	r := acceptSession(t, c, q, "stateful")
	state, err := r.GetSessionState(ctxFor(t, opTimeout), nil)
	if err != nil {
		t.Fatalf("GetSessionState: %v", err)
	}
	if state != nil {
		t.Fatalf("initial session state %q, want nil", state)
	}
	want := []byte(`{"step":1,"bytes":"\u0000\u00ff"}`)
	if err := r.SetSessionState(ctxFor(t, opTimeout), want, nil); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	if got, err := r.GetSessionState(ctxFor(t, opTimeout), nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("GetSessionState = %q, %v; want %q", got, err, want)
	}
	if err := r.Close(ctxFor(t, opTimeout)); err != nil {
		t.Fatalf("closing the session receiver: %v", err)
	}

	r2 := acceptSession(t, c, q, "stateful")
	if got, err := r2.GetSessionState(ctxFor(t, opTimeout), nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after re-accepting, GetSessionState = %q, %v; want %q", got, err, want)
	}
	if err := r2.SetSessionState(ctxFor(t, opTimeout), nil, nil); err != nil {
		t.Fatalf("SetSessionState(nil): %v", err)
	}
	if got, err := r2.GetSessionState(ctxFor(t, opTimeout), nil); err != nil || got != nil {
		t.Fatalf("after clearing, GetSessionState = %q (nil: %t), %v; want nil", got, got == nil, err)
	}
	complete(t, r2, receiveOne(t, r2))
}

var renewSessionQueue = sessionQueue("renew-session", admin.QueueProperties{LockDuration: ptr("PT5S")})

// TestRenewSessionLock: RenewSessionLock moves the session's LockedUntil
// forward.
func TestRenewSessionLock(t *testing.T) {
	t.Parallel()
	q := renewSessionQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("renewed", "r1"))
	r := acceptSession(t, c, q, "renewed")
	before := r.LockedUntil()
	if before.IsZero() {
		t.Fatalf("no session LockedUntil after accepting")
	}
	moved := waitUntil(5*time.Second, 100*time.Millisecond, func() bool {
		if err := r.RenewSessionLock(ctxFor(t, opTimeout), nil); err != nil {
			t.Fatalf("RenewSessionLock: %v", err)
		}
		return r.LockedUntil().After(before)
	})
	if !moved {
		t.Fatalf("session LockedUntil stayed %v after renewals", r.LockedUntil())
	}
	if d := time.Until(r.LockedUntil()); d < 3*time.Second || d > 6*time.Second {
		t.Errorf("renewed LockedUntil is %v away, want about the LockDuration of 5s", d)
	}
	complete(t, r, receiveOne(t, r))
}

var listSessionsQueue = sessionQueue("list-sessions", admin.QueueProperties{})

// TestListSessions: the sessions pager lists the sessions with messages
// and those with state but no messages.
func TestListSessions(t *testing.T) {
	t.Parallel()
	q := listSessionsQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("with-messages-1", "x"), sessionMessage("with-messages-2", "y"))
	r := acceptSession(t, c, q, "state-only")
	if err := r.SetSessionState(ctxFor(t, opTimeout), []byte("kept"), nil); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	if err := r.Close(ctxFor(t, opTimeout)); err != nil {
		t.Fatalf("Close: %v", err)
	}

	var ids []string
	pager := c.NewListSessionsForQueuePager(q, nil)
	for pager.More() {
		page, err := pager.NextPage(ctxFor(t, opTimeout))
		if err != nil {
			t.Fatalf("NextPage: %v", err)
		}
		ids = append(ids, page.Sessions...)
	}
	slices.Sort(ids)
	if want := []string{"state-only", "with-messages-1", "with-messages-2"}; !equalStrings(ids, want) {
		t.Fatalf("listed sessions %q, want %q", ids, want)
	}
}

var fifoSessionQueue = sessionQueue("fifo-session", admin.QueueProperties{})

// TestSessionFIFO: messages of interleaved sessions come out of each
// session in the order they were sent.
func TestSessionFIFO(t *testing.T) {
	t.Parallel()
	q := fifoSessionQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	want := map[string][]string{}
	for i := range 10 {
		for _, id := range []string{"red", "blue"} {
			body := fmt.Sprintf("%s-%02d", id, i)
			want[id] = append(want[id], body)
			send(t, s, sessionMessage(id, body))
		}
	}
	for _, id := range []string{"blue", "red"} {
		r := acceptSession(t, c, q, id)
		var got []*azservicebus.ReceivedMessage
		for len(got) < 10 {
			// Receive in small batches, completing as we go, as a
			// processor does.
			batch := receiveN(t, r, min(3, 10-len(got)), receiveTimeout)
			complete(t, r, batch...)
			got = append(got, batch...)
		}
		if !equalStrings(bodies(got), want[id]) {
			t.Fatalf("session %s delivered %q, want %q", id, bodies(got), want[id])
		}
	}
}

var sessionAbandonQueue = sessionQueue("session-abandon", admin.QueueProperties{})

// TestSessionAbandonHeadOfLine: in a session an abandoned message is
// delivered again before the ones after it.
func TestSessionAbandonHeadOfLine(t *testing.T) {
	t.Parallel()
	q := sessionAbandonQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("hol", "first"), sessionMessage("hol", "second"))
	r := acceptSession(t, c, q, "hol")
	m := receiveN(t, r, 1, receiveTimeout)[0]
	if string(m.Body) != "first" {
		t.Fatalf("first delivery %q, want %q", m.Body, "first")
	}
	if err := r.AbandonMessage(ctxFor(t, opTimeout), m, nil); err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	again := receiveN(t, r, 1, receiveTimeout)[0]
	if string(again.Body) != "first" || again.DeliveryCount != 2 {
		t.Fatalf("after abandon delivered %q with DeliveryCount %d, want %q with 2", again.Body, again.DeliveryCount, "first")
	}
	complete(t, r, again)
	complete(t, r, receiveOne(t, r))
}
