// Package poll is the one way Busbar's tests wait for something to become
// true: poll a condition until it holds or a deadline passes. It exists so
// that no test sleeps for a fixed time and no package grows its own copy of
// this loop. It owns nothing else.
package poll

import (
	"time"
)

// DefaultTimeout is how long Until waits when given a zero timeout.
const DefaultTimeout = 30 * time.Second

// interval is how often a condition is re-evaluated: short enough that a
// test does not wait noticeably after the condition holds, long enough not
// to spin a core that the system under test needs.
const interval = 2 * time.Millisecond

// TB is the part of testing.TB that Until needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Wait evaluates cond until it returns true or timeout passes (zero:
// DefaultTimeout) and reports whether it became true. cond is always
// evaluated at least once, and once more at the deadline.
func Wait(timeout time.Duration, cond func() bool) bool {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return cond()
		}
		time.Sleep(interval)
	}
}

// Until fails the test with "timed out after <timeout> waiting for <what>"
// unless cond becomes true within timeout (zero: DefaultTimeout).
func Until(t TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if !Wait(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// UntilNil is Until for a condition that explains itself: it waits for fn to
// return nil and, on timeout, fails with the last error fn returned.
func UntilNil(t TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	var last error
	if !Wait(timeout, func() bool { last = fn(); return last == nil }) {
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, last)
	}
}
