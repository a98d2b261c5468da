// Package clock is Busbar's source of time. The broker never calls time.Now,
// sleeps or starts timers of its own: it is handed a Clock, the real one in
// production (Real) and a Fake in tests, which moves only when the test says
// so and fires due timers synchronously, in deadline order.
//
// The package owns time reading and one-shot timers and nothing else; it must
// not know about the broker or any protocol.
package clock

import "time"

// Clock reads the time and runs functions after a delay.
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or in the goroutine
	// that advances the clock (Fake) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer made by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
	// Reset re-arms the timer to fire d from now. It reports whether the
	// timer was active before the call.
	Reset(d time.Duration) bool
}

// Real returns the Clock of the operating system.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
