// Package gopool runs short-lived tasks on goroutines kept from earlier
// tasks.
//
// A new goroutine starts with a small stack, and one that calls into the
// broker (a link's delivery pump, its settlement and send loops, a session
// attach) grows it, copying it each time, to tens of KiB before it does
// its work: on the session benchmark (W4) that copying was 4–5% of the
// broker's CPU, because every session's link starts such goroutines anew.
// A worker that finished a task keeps its grown stack and waits for the
// next one; at most MaxIdle wait, the others exit.
package gopool

import "sync/atomic"

// MaxIdle bounds the workers waiting for a task.
const MaxIdle = 256

var (
	work = make(chan func()) // unbuffered: a send succeeds only into a waiting worker
	idle atomic.Int32
)

// Go runs f on a waiting worker, or on a new goroutine when none waits.
func Go(f func()) {
	select {
	case work <- f:
	default:
		go run(f)
	}
}

func run(f func()) {
	for {
		f()
		if !becomeIdle() {
			return
		}
		f = <-work
		idle.Add(-1)
	}
}

// becomeIdle counts the caller among the waiting workers, unless MaxIdle
// already wait. (Adding first and taking back when over let Idle read
// MaxIdle+1 for a moment.)
func becomeIdle() bool {
	for {
		n := idle.Load()
		if n >= MaxIdle {
			return false
		}
		if idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Idle is the number of workers waiting for a task (tests).
func Idle() int { return int(idle.Load()) }
