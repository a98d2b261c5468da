package broker

import (
	"testing"
	"time"
)

// Duplicate detection, after duplicate-detection.md.

func TestDuplicateWithinWindowIsAcceptedAndDropped(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute})
	e.send("q", &Message{MessageID: "m1", Body: []byte("first")})
	e.send("q", &Message{MessageID: "m1", Body: []byte("dup")}, &Message{MessageID: "m2", Body: []byte("other")})
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "first", "other")
	// Still a duplicate after the original was consumed, within the window.
	e.clk.Advance(59 * time.Second)
	e.send("q", &Message{MessageID: "m1", Body: []byte("dup2")})
	if got := e.receive("q", ReceiveAndDelete, 10); len(got) != 0 {
		t.Fatalf("duplicate delivered %q", bodies(got))
	}
	e.clk.Advance(time.Second)
	e.send("q", &Message{MessageID: "m1", Body: []byte("new")})
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "new")
}

func TestDuplicateWithinOneBatch(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{RequiresDuplicateDetection: true})
	e.send("q", &Message{MessageID: "x", Body: []byte("1")}, &Message{MessageID: "x", Body: []byte("2")})
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "1")
}

func TestDedupeHistorySurvivesRestart(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{RequiresDuplicateDetection: true})
	e.send("q", &Message{MessageID: "x", Body: []byte("1")})
	e.restart()
	e.send("q", &Message{MessageID: "x", Body: []byte("2")})
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "1")
	e.clk.Advance(10 * time.Minute)
	e.restart()
	e.send("q", &Message{MessageID: "x", Body: []byte("3")})
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "3")
}

func TestScheduledMessagesParticipateInDedupe(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{RequiresDuplicateDetection: true})
	_, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Second), []*Message{{MessageID: "s", Body: []byte("1")}})
	e.must(err)
	e.send("q", &Message{MessageID: "s", Body: []byte("2")})
	e.clk.Advance(time.Second)
	wantBodies(t, e.receive("q", ReceiveAndDelete, 10), "1")
}
