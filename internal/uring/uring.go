// Package uring owns an io_uring that flushes files to disk (fdatasync)
// without blocking a thread of the Go runtime.
//
// Why: a goroutine in a blocking system call keeps its thread, and once the
// call has lasted past a tick of the runtime's monitor thread (sysmon, 20 µs
// while it is busy) the monitor takes the goroutine's P away and wakes
// another thread to run it, and the monitor keeps ticking every 20 µs while
// it finds such calls. The store's write-ahead log is flushed thousands of
// times a second under load, each flush taking 0.1–0.3 ms, so nearly every
// flush paid for a hand-off of its P and the thread switches that go with
// it. Submitted to an io_uring, the flush runs on a kernel worker, and the
// goroutine waits in the runtime's network poller (on an eventfd the ring
// signals), as one waiting for a socket does; its P goes on running other
// goroutines. Measured on the broker's W4 workload, alternating builds: 7%
// less CPU per message (docs/benchmarks.md, seventh round).
//
// On systems without io_uring (not Linux, kernels before 5.6, or a sandbox
// that refuses it) New returns an error and callers flush the usual way.
package uring

import "errors"

// ErrUnavailable is returned by New where io_uring cannot be used.
var ErrUnavailable = errors.New("uring: io_uring is not available here")
