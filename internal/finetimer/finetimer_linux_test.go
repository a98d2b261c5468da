package finetimer

import (
	"errors"
	"testing"
	"time"
)

// Where the system refuses a timerfd the Timer still works, on a
// time.Timer.
func TestWithoutATimerfd(t *testing.T) {
	old := timerfdCreate
	timerfdCreate = func(int, int) (int, error) { return -1, errors.New("refused") }
	defer func() { timerfdCreate = old }()
	tm := newTimer(t)
	if tm.sys.fallback == nil {
		t.Fatal("no fallback timer")
	}
	start := time.Now()
	tm.Reset(2 * time.Millisecond)
	<-tm.C()
	if el := time.Since(start); el < 2*time.Millisecond {
		t.Fatalf("fired after %v", el)
	}
	tm.Reset(time.Millisecond)
	tm.Stop()
	sentinel := time.NewTimer(20 * time.Millisecond)
	defer sentinel.Stop()
	select {
	case <-tm.C():
		t.Fatal("a stopped timer delivered")
	case <-sentinel.C:
	}
}
