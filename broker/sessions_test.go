package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
)

// Message sessions, following message-sessions.md.

func (e *env) accept(path, id string) (*Consumer, *sink) {
	e.t.Helper()
	s := &sink{}
	c, err := e.b.AcceptSession(e.ctx, path, id, ConsumerOptions{Deliver: s.deliver})
	e.must(err)
	return c, s
}

func sessMsg(session, body string) *Message {
	return &Message{SessionID: session, Body: []byte(body)}
}

// "A message without a session id sent to a session-enabled entity is refused."
func TestSessionEntityRequiresSessionID(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	wantErr(t, e.b.Send(e.ctx, "s", []*Message{msg("x")}), ErrSessionRequired)
	_, err := e.b.NewConsumer(e.ctx, "s", ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrSessionRequired)
	e.queue("plain", QueueProperties{})
	_, err = e.b.AcceptSession(e.ctx, "plain", "a", ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrInvalidArgument)
}

// "Sessions enable joint and ordered handling of unbounded sequences of
// related messages": FIFO within a session, only that session's messages.
func TestAcceptSessionDeliversOnlyItsMessagesInOrder(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", sessMsg("a", "a1"), sessMsg("b", "b1"), sessMsg("a", "a2"), sessMsg("a", "a3"))
	c, s := e.accept("s", "a")
	if c.SessionID() != "a" || !c.LockedUntil().Equal(t0.Add(time.Minute)) {
		t.Fatalf("session %q locked until %v", c.SessionID(), c.LockedUntil())
	}
	c.AddCredit(10)
	got := s.take()
	wantBodies(t, got, "a1", "a2", "a3")
	// Abandon → the same message is served again next (head of line).
	e.must(e.b.Abandon(e.ctx, "s", nil, got[0].LockToken))
	again := s.take()
	wantBodies(t, again, "a1")
	if again[0].DeliveryCount != 1 {
		t.Fatalf("delivery count %d", again[0].DeliveryCount)
	}
	e.send("s", sessMsg("a", "a4"))
	wantBodies(t, s.take(), "a4")
}

// "The session lock is exclusive": a second receiver cannot take it.
func TestSessionLockIsExclusive(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", sessMsg("a", "1"))
	c, _ := e.accept("s", "a")
	_, err := e.b.AcceptSession(e.ctx, "s", "A-other", ConsumerOptions{Deliver: func(*Message) {}})
	e.must(err) // another session is fine
	_, err = e.b.AcceptSession(e.ctx, "s", "a", ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrSessionCannotBeLocked)
	c.Close()
	c2, s2 := e.accept("s", "a")
	c2.AddCredit(1)
	wantBodies(t, s2.take(), "1")
}

// "AcceptNextSession takes the next unlocked session with messages",
// rotating fairly, and times out with nothing available.
func TestAcceptNextSessionRotatesAndTimesOut(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", sessMsg("x", "x1"), sessMsg("y", "y1"), sessMsg("z", "z1"))
	var order []string
	for range 3 {
		c, err := e.b.AcceptNextSession(e.ctx, "s", 0, ConsumerOptions{Deliver: func(*Message) {}})
		e.must(err)
		order = append(order, c.SessionID())
	}
	if fmt.Sprint(order) != "[x y z]" {
		t.Fatalf("order %v", order)
	}
	_, err := e.b.AcceptNextSession(e.ctx, "s", 0, ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrTimeout)

	// Waiting: times out on the broker's clock.
	done := make(chan error, 1)
	go func() {
		_, err := e.b.AcceptNextSession(e.ctx, "s", 5*time.Second, ConsumerOptions{Deliver: func(*Message) {}})
		done <- err
	}()
	waitFor(t, func() bool { return e.clk.Pending() > 0 && e.b.waitersOf("s") == 1 })
	e.clk.Advance(5 * time.Second)
	wantErr(t, <-done, ErrTimeout)
}

func TestAcceptNextSessionWaitsForAMessage(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	type res struct {
		c   *Consumer
		err error
	}
	done := make(chan res, 1)
	s := &sink{}
	go func() {
		c, err := e.b.AcceptNextSession(e.ctx, "s", time.Minute, ConsumerOptions{Deliver: s.deliver})
		done <- res{c, err}
	}()
	waitFor(t, func() bool { return e.b.waitersOf("s") == 1 })
	e.send("s", sessMsg("late", "hello"))
	r := <-done
	e.must(r.err)
	if r.c.SessionID() != "late" {
		t.Fatalf("session %q", r.c.SessionID())
	}
	r.c.AddCredit(1)
	wantBodies(t, s.take(), "hello")

	// A cancelled wait returns the context's error.
	ctx, cancel := context.WithCancel(e.ctx)
	go func() {
		_, err := e.b.AcceptNextSession(ctx, "s", time.Minute, ConsumerOptions{Deliver: func(*Message) {}})
		done <- res{nil, err}
	}()
	waitFor(t, func() bool { return e.b.waitersOf("s") == 1 })
	cancel()
	wantErr(t, (<-done).err, context.Canceled)
}

// "If the session lock expires, the delivery count of locked messages is
// raised"; "if the session is closed, it is not".
func TestSessionLockExpiryAndRelease(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true, LockDuration: 10 * time.Second})
	e.send("s", sessMsg("a", "1"), sessMsg("a", "2"))
	lost := make(chan error, 1)
	s := &sink{}
	c, err := e.b.AcceptSession(e.ctx, "s", "a", ConsumerOptions{Deliver: s.deliver, OnLost: func(err error) { lost <- err }})
	e.must(err)
	c.AddCredit(1)
	m1 := s.take()[0]
	e.clk.Advance(5 * time.Second)
	until, err := c.RenewSessionLock()
	e.must(err)
	if !until.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("renewed until %v", until)
	}
	e.clk.Advance(10 * time.Second)
	wantErr(t, <-lost, ErrSessionLockLost)
	wantErr(t, e.b.Complete(e.ctx, "s", m1.LockToken), ErrLockLost)
	c2, s2 := e.accept("s", "a")
	c2.AddCredit(1)
	r := s2.take()
	wantBodies(t, r, "1")
	if r[0].DeliveryCount != 1 {
		t.Fatalf("count after session lock expiry %d, want 1", r[0].DeliveryCount)
	}
	c2.Close()
	c3, s3 := e.accept("s", "a")
	c3.AddCredit(1)
	if r := s3.take(); r[0].DeliveryCount != 1 {
		t.Fatalf("count after close %d, want 1 (closing does not count)", r[0].DeliveryCount)
	}
	// Settling with a session lock held by someone else fails.
	c3.Close()
	wantErr(t, e.b.Complete(e.ctx, "s", r[0].LockToken), ErrLockLost)
}

// "Session state": durable, cleared by an empty value, limited in size,
// needs the session lock to set.
func TestSessionState(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true, MaxMessageSizeInKilobytes: 1})
	wantErr(t, e.b.SetSessionState(e.ctx, "s", "a", []byte("x")), ErrSessionLockLost)
	c, _ := e.accept("s", "a")
	st, err := e.b.GetSessionState(e.ctx, "s", "a")
	e.must(err)
	if st != nil {
		t.Fatalf("fresh state %q", st)
	}
	e.must(e.b.SetSessionState(e.ctx, "s", "a", []byte("step-2")))
	wantErr(t, e.b.SetSessionState(e.ctx, "s", "a", make([]byte, 1025)), ErrMessageSizeExceeded)
	c.Close()
	ids, _ := e.b.ListSessions(e.ctx, "s", time.Time{}, 0, 0)
	if fmt.Sprint(ids) != "[a]" {
		t.Fatalf("sessions with state %v", ids)
	}
	e.restart()
	st, err = e.b.GetSessionState(e.ctx, "s", "a")
	e.must(err)
	if string(st) != "step-2" {
		t.Fatalf("state after restart %q", st)
	}
	c, _ = e.accept("s", "a")
	e.must(e.b.SetSessionState(e.ctx, "s", "a", []byte{}))
	st, _ = e.b.GetSessionState(e.ctx, "s", "a")
	if st != nil {
		t.Fatalf("cleared state %q, want nil", st)
	}
	c.Close()
	ids, _ = e.b.ListSessions(e.ctx, "s", time.Time{}, 0, 0)
	if len(ids) != 0 {
		t.Fatalf("sessions %v after clearing", ids)
	}
}

// The bug this guards against: a session released (its consumer closed,
// no messages) while its state was being committed was forgotten first,
// and the commit's index update then found no session: the state was
// stored but ListSessions did not list the session until a restart.
func TestSessionStateSetWhileTheSessionIsReleasedIsListed(t *testing.T) {
	b, g := openGated(t, clock.NewFake(t0), 3, nil)
	ctx := context.Background()
	if err := b.CreateQueue(ctx, "q", QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	c, err := b.AcceptSession(ctx, "q", "s1", ConsumerOptions{Deliver: func(*Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	g.arm()
	done := make(chan error, 1)
	go func() { done <- b.SetSessionState(ctx, "q", "s1", []byte("st")) }()
	<-g.entered
	c.Close() // the session has no messages and no lock now
	close(g.release)
	if err := <-done; err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	if st, err := b.GetSessionState(ctx, "q", "s1"); err != nil || string(st) != "st" {
		t.Fatalf("GetSessionState = %q, %v; want \"st\"", st, err)
	}
	ids, err := b.ListSessions(ctx, "q", time.Time{}, 0, 0)
	if err != nil || fmt.Sprint(ids) != "[s1]" {
		t.Fatalf("ListSessions = %v, %v; want [s1], the session with state", ids, err)
	}
	mustHoldInvariants(t, b)
}

// SetSessionState calls of one session are stored in the order their lock
// checks passed: a state set under a lock that was then lost does not land
// after one set under the next lock, though its commit is the slower. A
// call that waits for an earlier one checks the lock again when its turn
// comes.
func TestSessionStatesAreStoredInTheOrderTheirLockChecksPassed(t *testing.T) {
	clk := clock.NewFake(t0)
	b, g := openGated(t, clk, 3, nil)
	ctx := context.Background()
	if err := b.CreateQueue(ctx, "q", QueueProperties{RequiresSession: true, LockDuration: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	q := b.byName["q"].q
	accept := func() {
		t.Helper()
		if _, err := b.AcceptSession(ctx, "q", "s1", ConsumerOptions{Deliver: func(*Message) {}}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(state string) chan error {
		ch := make(chan error, 1)
		go func() { ch <- b.SetSessionState(ctx, "q", "s1", []byte(state)) }()
		return ch
	}
	// waitChecked waits until the second call has passed its lock check:
	// it is then stored already, or waits for its turn.
	waitChecked := func(second chan error) {
		t.Helper()
		poll.Until(t, 10*time.Second, "the second SetSessionState past its lock check", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			s := q.sessions["s1"]
			return len(second) == 1 || (s != nil && s.stateWrites == 2)
		})
	}
	wantState := func(want string) {
		t.Helper()
		if st, err := b.GetSessionState(ctx, "q", "s1"); err != nil || string(st) != want {
			t.Fatalf("state %q, %v; want %q", st, err, want)
		}
	}

	accept()
	g.arm()
	older := set("older")
	<-g.entered // its commit is held
	clk.Advance(11 * time.Second)
	accept() // the first lock expired: a new receiver holds the session
	newer := set("newer")
	waitChecked(newer)
	close(g.release)
	if err := <-older; err != nil {
		t.Fatalf("SetSessionState under the first lock: %v", err)
	}
	if err := <-newer; err != nil {
		t.Fatalf("SetSessionState under the second lock: %v", err)
	}
	wantState("newer")

	// The second call's lock expires while it waits: it stores nothing.
	g.release = make(chan struct{})
	g.arm()
	first := set("first")
	<-g.entered
	second := set("second")
	waitChecked(second)
	clk.Advance(11 * time.Second)
	close(g.release)
	if err := <-first; err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	wantErr(t, <-second, ErrSessionLockLost)
	wantState("first")
	mustHoldInvariants(t, b)
}

func TestListSessions(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", sessMsg("c", "1"), sessMsg("a", "1"), sessMsg("b", "1"))
	ids, err := e.b.ListSessions(e.ctx, "s", time.Time{}, 1, 1)
	e.must(err)
	if fmt.Sprint(ids) != "[b]" {
		t.Fatalf("page %v", ids)
	}
	c, _ := e.accept("s", "a")
	e.clk.Advance(time.Second)
	e.must(e.b.SetSessionState(e.ctx, "s", "a", []byte("s")))
	ids, _ = e.b.ListSessions(e.ctx, "s", t0, 0, 0)
	if fmt.Sprint(ids) != "[a]" {
		t.Fatalf("updated since %v", ids)
	}
	_, err = e.b.RenewSessionLock(e.ctx, "s", "a")
	e.must(err)
	c.Close()
	_, err = e.b.RenewSessionLock(e.ctx, "s", "a")
	wantErr(t, err, ErrSessionLockLost)
}

func TestSessionsDoNotCostTimersOrGoroutines(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	var ms []*Message
	for i := range 5000 {
		ms = append(ms, sessMsg(fmt.Sprint("s", i), "x"))
	}
	e.send("s", ms...)
	seen := map[string]bool{}
	lost := 0
	for range 100 {
		c, err := e.b.AcceptNextSession(e.ctx, "s", 0, ConsumerOptions{Deliver: func(*Message) {}, OnLost: func(error) { lost++ }})
		e.must(err)
		seen[c.SessionID()] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d distinct sessions accepted, want 100", len(seen))
	}
	// One namespace timer; the locks share one deadline per queue.
	if n := e.clk.Pending(); n != 1 {
		t.Fatalf("%d clock timers armed, want 1", n)
	}
	if n := e.b.wheel.len(); n != 1 {
		t.Fatalf("%d deadlines armed, want 1 (the session-lock list head)", n)
	}
	e.clk.Advance(time.Minute)
	if lost != 100 {
		t.Fatalf("%d session locks expired, want 100", lost)
	}
	if n := e.b.wheel.len(); n != 0 {
		t.Fatalf("%d deadlines left armed", n)
	}
}

// waitFor polls cond with a deadline (for goroutines blocked on the broker).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, "the broker to reach the state", cond)
}

func (b *Broker) waitersOf(path string) int {
	e, _, err := b.resolve(path)
	if err != nil {
		return -1
	}
	e.q.mu.Lock()
	defer e.q.mu.Unlock()
	return len(e.q.waiters)
}

func TestSessionReceiveAndDeletePeekAndDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", sessMsg("a", "a1"), sessMsg("b", "b1"), sessMsg("a", "a2"))
	p, err := e.b.PeekSession(e.ctx, "s", "a", 0, 10)
	e.must(err)
	wantBodies(t, p, "a1", "a2")
	s := &sink{}
	c, err := e.b.AcceptSession(e.ctx, "s", "a", ConsumerOptions{Mode: ReceiveAndDelete, Deliver: s.deliver})
	e.must(err)
	c.AddCredit(1)
	wantBodies(t, s.take(), "a1")
	c.Close()
	c2, s2 := e.accept("s", "b")
	c2.AddCredit(1)
	m := s2.take()[0]
	until, err := e.b.RenewLock(e.ctx, "s", m.LockToken)
	e.must(err)
	if !until.Equal(c2.LockedUntil()) {
		t.Fatalf("message lock renewal returned %v, session lock is %v", until, c2.LockedUntil())
	}
	e.must(e.b.DeadLetter(e.ctx, "s", "bad", "", nil, m.LockToken))
	// The dead-letter subqueue of a session entity has no sessions.
	wantBodies(t, e.receive("s/$DeadLetterQueue", ReceiveAndDelete, 5), "b1")
	ids, _ := e.b.ListSessions(e.ctx, "s", time.Time{}, 0, 0)
	if fmt.Sprint(ids) != "[a]" {
		t.Fatalf("sessions %v", ids)
	}
}

func TestCloseFailsWaitingAcceptors(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	done := make(chan error, 1)
	go func() {
		_, err := e.b.AcceptNextSession(e.ctx, "s", time.Hour, ConsumerOptions{Deliver: func(*Message) {}})
		done <- err
	}()
	waitFor(t, func() bool { return e.b.waitersOf("s") == 1 })
	e.b.Close()
	wantErr(t, <-done, ErrClosed)
}
