package finetimer

import (
	"errors"
	"testing"
)

// Where the system refuses a timerfd the Timer falls back to a time.Timer
// and behaves the same.
func TestWithoutATimerfd(t *testing.T) {
	old := timerfdCreate
	timerfdCreate = func(int, int) (int, error) { return -1, errors.New("refused") }
	defer func() { timerfdCreate = old }()
	if newTimer(t).sys.fallback == nil {
		t.Fatal("no fallback timer")
	}
	runBehaviours(t)
}
