// Package finetimer owns a one-shot timer that fires within tens of
// microseconds of its deadline, also while the process is otherwise idle.
//
// Go's runtime timers are precise while the scheduler has work, but when
// every P is idle the runtime waits in epoll_wait, whose timeout is in whole
// milliseconds: a 250 µs time.Timer then fires after about a millisecond.
// The store's group commit waits that long for returning callers, so at a
// moderate rate every message paid a millisecond instead of a quarter.
//
// On Linux a Timer is a timerfd read through the runtime's network poller:
// the kernel's high-resolution timer makes the descriptor readable, which
// wakes the poller at once. Elsewhere, and where the system refuses a
// timerfd, it is a time.Timer.
package finetimer

import (
	"sync"
	"time"
)

// Timer is a reusable one-shot timer. Reset arms it, Stop disarms it, and C
// delivers one value per deadline reached while armed. A Timer is safe for
// use by one goroutine at a time (plus its own reader).
type Timer struct {
	c chan struct{}

	mu       sync.Mutex
	armed    bool
	deadline time.Time

	sys sysTimer
}

// New returns a disarmed Timer. Close releases it.
func New() *Timer {
	t := &Timer{c: make(chan struct{}, 1)}
	t.sys.open(t.expired)
	return t
}

// stoppedTimer is a time.Timer that calls f once Reset: the system timer
// where there is no timerfd.
func stoppedTimer(f func()) *time.Timer {
	t := time.AfterFunc(time.Hour, f)
	t.Stop()
	return t
}

// C is where the timer delivers when its deadline passes.
func (t *Timer) C() <-chan struct{} { return t.c }

// Reset arms the timer to fire after d, dropping a delivery not yet
// received from an earlier deadline.
func (t *Timer) Reset(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.c:
	default:
	}
	t.armed, t.deadline = true, time.Now().Add(d)
	t.sys.arm(d)
}

// Stop disarms the timer: a deadline reached later delivers nothing. It
// makes no system call; the descriptor may still fire and is ignored.
func (t *Timer) Stop() {
	t.mu.Lock()
	t.armed = false
	t.mu.Unlock()
}

// Close releases the timer; it must not be used afterwards.
func (t *Timer) Close() error { return t.sys.close() }

// expired is called by the system timer when some deadline passed. An
// expiry of a deadline since replaced or stopped delivers nothing.
func (t *Timer) expired() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.armed || time.Now().Before(t.deadline) {
		return
	}
	t.armed = false
	select {
	case t.c <- struct{}{}:
	default:
	}
}
