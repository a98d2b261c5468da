package broker

import (
	"fmt"
	"testing"
	"time"
)

// Scheduled messages and deferral, after message-sequencing.md and
// message-deferral.md.

func TestScheduledMessageAppearsAtItsTimeWithANewSequenceNumber(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	seqs, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Hour), []*Message{msg("later")})
	e.must(err)
	e.send("q", &Message{Body: []byte("also later"), ScheduledEnqueueTime: t0.Add(2 * time.Hour)})
	e.send("q", msg("now"))
	if ri := e.info("q"); ri.ScheduledMessageCount != 2 || ri.ActiveMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
	c, s := e.consumer("q", ReceiveAndDelete)
	c.AddCredit(10)
	wantBodies(t, s.take(), "now")
	peek, err := e.b.Peek(e.ctx, "q", 0, 10)
	e.must(err)
	wantBodies(t, peek, "later", "also later")
	if peek[0].State != StateScheduled || peek[0].SequenceNumber != seqs[0] || !peek[0].ScheduledEnqueueTime.Equal(t0.Add(time.Hour)) {
		t.Fatalf("peeked scheduled %+v", peek[0])
	}
	e.clk.Advance(time.Hour - time.Millisecond)
	if got := s.take(); len(got) != 0 {
		t.Fatal("delivered before its time")
	}
	e.clk.Advance(time.Millisecond)
	got := s.take()
	wantBodies(t, got, "later")
	if got[0].SequenceNumber <= 3 || !got[0].EnqueuedTime.Equal(t0.Add(time.Hour)) || got[0].State != StateActive {
		t.Fatalf("activated: seq %d enqueued %v state %v", got[0].SequenceNumber, got[0].EnqueuedTime, got[0].State)
	}
}

func TestCancelScheduled(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	seqs, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Minute), []*Message{msg("a"), msg("b")})
	e.must(err)
	e.must(e.b.CancelScheduled(e.ctx, "q", seqs[:1]))
	wantErr(t, e.b.CancelScheduled(e.ctx, "q", seqs[:1]), ErrMessageNotFound)
	e.clk.Advance(time.Minute)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "b")
	wantErr(t, e.b.CancelScheduled(e.ctx, "q", seqs[1:]), ErrMessageNotFound)
}

// A CancelScheduled whose commit fails leaves its messages scheduled, and
// they activate though their time came while the cancel was committing
// (the activation found them pending and was dropped).
func TestFailedCancelScheduledStillActivates(t *testing.T) {
	e, g := newGatedEnv(t, failWith(true))
	e.queue("q", QueueProperties{})
	seqs, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Minute), []*Message{msg("a"), msg("b")})
	e.must(err)
	before := e.state("q")
	g.arm()
	done := make(chan error, 1)
	go func() { done <- e.b.CancelScheduled(e.ctx, "q", seqs) }()
	<-g.entered
	e.clk.Advance(2 * time.Minute) // their time comes while the cancel commits
	g.release <- struct{}{}
	if err := <-done; err == nil {
		t.Fatal("CancelScheduled succeeded though its commit failed")
	}
	e.wantUnchanged(before, "q")
	mustHoldInvariants(t, e.b)
	e.clk.Advance(0)
	if ri := e.info("q"); ri.ScheduledMessageCount != 0 || ri.ActiveMessageCount != 2 {
		t.Fatalf("runtime %+v after the failed cancel, want both activated", ri)
	}
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "a", "b")
}

func TestScheduledSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	_, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Minute), []*Message{msg("a")})
	e.must(err)
	e.restart()
	if got := e.receive("q", ReceiveAndDelete, 10); len(got) != 0 {
		t.Fatal("scheduled message active after restart")
	}
	e.clk.Advance(time.Minute)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "a")
}

func TestDeferAndReceiveDeferred(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	got := e.receive("q", PeekLock, 1)
	e.must(e.b.Defer(e.ctx, "q", map[string]any{"why": "later"}, got[0].LockToken))
	wantBodies(t, e.receive("q", PeekLock, 5), "b")
	if ri := e.info("q"); ri.DeferredMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
	peek, _ := e.b.Peek(e.ctx, "q", 0, 5)
	if len(peek) != 2 || peek[0].State != StateDeferred {
		t.Fatalf("peek %v", peek)
	}
	seq := got[0].SequenceNumber
	_, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{seq, 999}, PeekLock)
	wantErr(t, err, ErrMessageNotFound)
	d, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{seq}, PeekLock)
	e.must(err)
	// Receiving it is a delivery (the SDKs show it).
	if d[0].State != StateDeferred || d[0].Properties["why"] != "later" || d[0].LockToken == (LockToken{}) || d[0].DeliveryCount != 1 {
		t.Fatalf("deferred %+v", d[0])
	}
	// Abandon keeps it deferred, counting a delivery.
	e.must(e.b.Abandon(e.ctx, "q", nil, d[0].LockToken))
	peek, _ = e.b.Peek(e.ctx, "q", seq, 1)
	if peek[0].State != StateDeferred || peek[0].DeliveryCount != 2 {
		t.Fatalf("after abandon %+v", peek[0])
	}
	d, err = e.b.ReceiveDeferred(e.ctx, "q", []int64{seq}, ReceiveAndDelete)
	e.must(err)
	wantBodies(t, d, "a")
	_, err = e.b.ReceiveDeferred(e.ctx, "q", []int64{seq}, PeekLock)
	wantErr(t, err, ErrMessageNotFound)
}

func TestPeekPagesFromASequenceNumber(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	for _, b := range []string{"1", "2", "3", "4", "5"} {
		e.send("q", msg(b))
	}
	p1, _ := e.b.Peek(e.ctx, "q", 0, 2)
	wantBodies(t, p1, "1", "2")
	p2, _ := e.b.Peek(e.ctx, "q", p1[1].SequenceNumber+1, 2)
	wantBodies(t, p2, "3", "4")
	e.receive("q", ReceiveAndDelete, 3)
	p3, _ := e.b.Peek(e.ctx, "q", 2, 10)
	wantBodies(t, p3, "4", "5")
	if p3[0].LockToken != (LockToken{}) {
		t.Fatal("peeked message has a lock token")
	}
	_, err := e.b.Peek(e.ctx, "q", 0, 0)
	wantErr(t, err, ErrInvalidArgument)
}

func TestDeleteMessagesAndPurge(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("1"), msg("2"))
	e.clk.Advance(time.Minute)
	e.send("q", msg("3"), msg("4"))
	n, err := e.b.DeleteMessages(e.ctx, "q", 10, t0.Add(time.Second))
	e.must(err)
	if n != 2 {
		t.Fatalf("deleted %d, want 2", n)
	}
	n, _ = e.b.DeleteMessages(e.ctx, "q", 1, time.Time{})
	if n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	wantBodies(t, mustPeek(e, "q"), "4")
	n, _ = e.b.Purge(e.ctx, "q", time.Time{})
	if n != 1 || e.info("q").TotalMessageCount != 0 {
		t.Fatalf("purged %d", n)
	}
}

func mustPeek(e *env, path string) []*Message {
	e.t.Helper()
	ms, err := e.b.Peek(e.ctx, path, 0, 100)
	e.must(err)
	return ms
}

// Far-off times from clients (.NET DateTime.MaxValue) keep their value and
// order instead of overflowing.
func TestFarFutureTimes(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	forever := time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)
	_, err := e.b.Schedule(e.ctx, "q", forever, []*Message{{Body: []byte("never"), Properties: map[string]any{"max": forever}}})
	e.must(err)
	e.clk.Advance(100 * 365 * 24 * time.Hour)
	p := mustPeek(e, "q")
	if len(p) != 1 || p[0].State != StateScheduled || !p[0].ScheduledEnqueueTime.Equal(forever) {
		t.Fatalf("peek %+v", p)
	}
	if got := p[0].Properties["max"]; got != forever {
		t.Fatalf("time property %v, want %v", got, forever)
	}
	e.restart()
	if p := mustPeek(e, "q"); len(p) != 1 || p[0].Properties["max"] != forever {
		t.Fatalf("after restart %+v", p)
	}
}

// TestScheduleEachIsAtomic: messages scheduled together, each at its own
// time, are all scheduled or none is.
func TestScheduleEachIsAtomic(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxMessageSizeInKilobytes: 1})
	a := &Message{Body: []byte("a"), ScheduledEnqueueTime: t0.Add(time.Minute)}
	b := &Message{Body: []byte("b"), ScheduledEnqueueTime: t0.Add(2 * time.Minute)}
	tooBig := &Message{Body: make([]byte, 2048), ScheduledEnqueueTime: t0.Add(time.Minute)}
	_, err := e.b.ScheduleEach(e.ctx, "q", []*Message{a, tooBig})
	wantErr(t, err, ErrMessageSizeExceeded)
	_, err = e.b.ScheduleEach(e.ctx, "q", []*Message{a, {Body: []byte("no time")}})
	wantErr(t, err, ErrInvalidArgument)
	if n := e.info("q").ScheduledMessageCount; n != 0 {
		t.Fatalf("a refused schedule left %d scheduled messages", n)
	}
	seqs, err := e.b.ScheduleEach(e.ctx, "q", []*Message{a, b})
	if err != nil || len(seqs) != 2 || seqs[0] >= seqs[1] {
		t.Fatalf("ScheduleEach = %v, %v", seqs, err)
	}
	e.clk.Advance(time.Minute)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "a")
	e.clk.Advance(time.Minute)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "b")
}

// Messages scheduled for the same instant become active in the order they
// were sent, and so take ascending sequence numbers in that order: a
// session's FIFO holds for copies sent with one ScheduledEnqueueTime (the
// geo package's secondary copies, sent a millisecond or less apart).
func TestScheduledForOneInstantActivateInSendOrder(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	at := t0.Add(time.Minute)
	var want []string
	for i := range 40 {
		body := fmt.Sprintf("m%02d", i)
		want = append(want, body)
		if i%2 == 0 {
			e.send("q", &Message{Body: []byte(body), ScheduledEnqueueTime: at})
		} else {
			_, err := e.b.Schedule(e.ctx, "q", at, []*Message{msg(body)})
			e.must(err)
		}
	}
	e.clk.Advance(time.Minute)
	got := e.receive("q", ReceiveAndDelete, 100)
	wantBodies(t, got, want...)
	for i := 1; i < len(got); i++ {
		if got[i].SequenceNumber <= got[i-1].SequenceNumber {
			t.Fatalf("%s has sequence number %d after %s's %d", got[i].Body, got[i].SequenceNumber, got[i-1].Body, got[i-1].SequenceNumber)
		}
	}
}
