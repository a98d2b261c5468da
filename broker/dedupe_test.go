package broker

import (
	"context"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
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

// A send whose MessageID matches a send still committing is answered only
// once that send's outcome is known: a duplicate of a durable original is
// dropped; when the original fails, the duplicate's message is stored in
// its place, never acknowledged and lost.
func TestDuplicateOfASendInFlightWaitsForItsOriginal(t *testing.T) {
	for _, fails := range []bool{false, true} {
		t.Run(map[bool]string{false: "original durable", true: "original failed"}[fails], func(t *testing.T) {
			b, g := openGated(t, clock.NewFake(t0), 3, failWith(fails))
			ctx := context.Background()
			must(t, b.CreateQueue(ctx, "q", QueueProperties{RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute}))
			g.arm()
			first := b.SendAsync(ctx, "q", []*Message{{MessageID: "X", Body: []byte("original")}}, nil, nil)
			<-g.entered // the original's commit is held
			second := make(chan error, 1)
			go func() { second <- b.Send(ctx, "q", []*Message{{MessageID: "X", Body: []byte("duplicate")}}) }()
			poll.Until(t, 10*time.Second, "the duplicate decided", func() bool {
				return len(second) > 0 || blockedIn("broker.(*Broker).prepareSend")
			})
			select {
			case err := <-second:
				t.Fatalf("the duplicate was answered (%v) before its original was durable", err)
			default:
			}
			close(g.release)
			_, errFirst := first.Wait()
			if errSecond := <-second; errSecond != nil {
				t.Fatalf("duplicate: %v", errSecond)
			}
			want := "original"
			if fails {
				if errFirst == nil {
					t.Fatal("the original's commit did not fail")
				}
				want = "duplicate"
			} else if errFirst != nil {
				t.Fatalf("original: %v", errFirst)
			}
			// The message id is recorded by whichever message was stored.
			must(t, b.Send(ctx, "q", []*Message{{MessageID: "X", Body: []byte("again")}}))
			if qi, err := b.GetQueue(ctx, "q"); err != nil || qi.Runtime.TotalMessageCount != 1 {
				t.Fatalf("queue holds %+v (%v), want one message", qi.Runtime, err)
			}
			wantBodies(t, consumeInto(t, b, "q", "", ReceiveAndDelete, 10).takeN(t, 1), want)
			mustHoldInvariants(t, b)
		})
	}
}
