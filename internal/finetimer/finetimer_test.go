package finetimer

import (
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
)

func newTimer(t *testing.T) *Timer {
	t.Helper()
	tm := New()
	t.Cleanup(func() {
		if err := tm.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tm
}

// behaviours is what a Timer does whatever it runs on: a timerfd, or the
// time.Timer it falls back to (finetimer_linux_test.go).
var behaviours = []struct {
	name string
	fn   func(t *testing.T, tm *Timer)
}{
	{"FiresNoEarlierThanItsDeadline", firesNoEarlierThanItsDeadline},
	{"StopDeliversNothing", stopDeliversNothing},
	{"ResetDropsAnUnreadDelivery", resetDropsAnUnreadDelivery},
	{"ManyCycles", manyCycles},
}

func runBehaviours(t *testing.T) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) { b.fn(t, newTimer(t)) })
	}
}

func TestTimer(t *testing.T) { runBehaviours(t) }

// receive waits for tm's delivery, failing the test after 10 s.
func receive(t *testing.T, tm *Timer, what string) {
	t.Helper()
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: never fired", what)
	}
}

func firesNoEarlierThanItsDeadline(t *testing.T, tm *Timer) {
	for _, d := range []time.Duration{0, time.Microsecond, 200 * time.Microsecond, 2 * time.Millisecond} {
		start := time.Now()
		tm.Reset(d)
		receive(t, tm, "Reset("+d.String()+")")
		if el := time.Since(start); el < d {
			t.Errorf("Reset(%v) fired after %v", d, el)
		}
	}
}

func stopDeliversNothing(t *testing.T, tm *Timer) {
	tm.Reset(time.Millisecond)
	tm.Stop()
	// A sentinel timer armed later for longer: were the stopped deadline
	// delivered, it would arrive first.
	sentinel := time.NewTimer(20 * time.Millisecond)
	defer sentinel.Stop()
	select {
	case <-tm.C():
		t.Fatal("a stopped timer delivered")
	case <-sentinel.C:
	}
}

func resetDropsAnUnreadDelivery(t *testing.T, tm *Timer) {
	tm.Reset(time.Microsecond)
	// Wait until the first deadline has been delivered, unread.
	if !poll.Wait(10*time.Second, func() bool { return len(tm.c) > 0 }) {
		t.Fatal("the first deadline was never delivered")
	}
	start := time.Now()
	const d = 5 * time.Millisecond
	tm.Reset(d)
	receive(t, tm, "the second deadline")
	if el := time.Since(start); el < d {
		t.Fatalf("after Reset(%v) the timer delivered after %v: the stale delivery survived", d, el)
	}
}

func manyCycles(t *testing.T, tm *Timer) {
	for i := 0; i < 200; i++ {
		tm.Reset(50 * time.Microsecond)
		if i%2 == 0 {
			tm.Stop()
			continue
		}
		receive(t, tm, "a cycle's deadline")
	}
}
