package finetimer

import (
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
)

func newTimer(t *testing.T) *Timer {
	t.Helper()
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tm.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return tm
}

func TestFiresNoEarlierThanItsDeadline(t *testing.T) {
	tm := newTimer(t)
	for _, d := range []time.Duration{0, time.Microsecond, 200 * time.Microsecond, 2 * time.Millisecond} {
		start := time.Now()
		tm.Reset(d)
		select {
		case <-tm.C():
			if el := time.Since(start); el < d {
				t.Errorf("Reset(%v) fired after %v", d, el)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Reset(%v) never fired", d)
		}
	}
}

func TestStopDeliversNothing(t *testing.T) {
	tm := newTimer(t)
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

func TestResetReplacesTheDeadlineAndDropsAnUnreadDelivery(t *testing.T) {
	tm := newTimer(t)
	tm.Reset(time.Microsecond)
	// Wait until the first deadline has been delivered, unread.
	if !poll.Wait(10*time.Second, func() bool { return len(tm.c) > 0 }) {
		t.Fatal("the first deadline was never delivered")
	}
	start := time.Now()
	const d = 5 * time.Millisecond
	tm.Reset(d)
	<-tm.C()
	if el := time.Since(start); el < d {
		t.Fatalf("after Reset(%v) the timer delivered after %v: the stale delivery survived", d, el)
	}
}

func TestManyCycles(t *testing.T) {
	tm := newTimer(t)
	for i := 0; i < 200; i++ {
		tm.Reset(50 * time.Microsecond)
		if i%2 == 0 {
			tm.Stop()
			continue
		}
		<-tm.C()
	}
}
