// Package gctune owns the broker process's garbage-collector setting: while
// the live heap is small it lets the heap grow by a fixed headroom before
// the next collection, instead of by the live heap's own size (GOGC=100).
//
// A broker's live heap is small (an index of the messages in memory,
// buffers of the connections) while it allocates fast (frames, records,
// batches). With GOGC=100 a 30 MiB live heap is collected every 30 MiB of
// allocation, several times a second under load, and the collector's
// marking and sweeping cost about a sixth of the CPU per message. With a
// headroom of H the heap target is live + max(live, H): the same as GOGC=100
// once the live heap is larger than H, so a large heap costs no more memory
// than it would anyway, and at most H more for a small one.
//
// The setting is re-computed after every collection (a cleanup attached to
// an object that each cycle frees). It is a process-wide concern: the
// command that runs the broker starts it, the server library does not.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultHeadroom is Options.Headroom's default: 128 MiB.
const DefaultHeadroom = 128 << 20

// maxPercent bounds the GC percentage for a tiny live heap (an idle broker
// of a few MiB would otherwise get GOGC of several thousand; its target
// is then below live + headroom, which is fine).
const maxPercent = 2000

// Options configure Start. The zero value is usable.
type Options struct {
	// Headroom is how much the heap may grow past the live heap before a
	// collection, while the live heap is smaller than it. Default
	// DefaultHeadroom; negative turns the tuning off.
	Headroom int64
	// Force tunes even when the GOGC or GOMEMLIMIT environment variable is
	// set (by default an operator's own setting wins and Start does
	// nothing).
	Force bool
}

// HeadroomMiB converts a headroom given in MiB (a command's flag) to
// Options.Headroom: a negative one, the tuning off, stays negative.
func HeadroomMiB(mb int64) int64 {
	if mb < 0 {
		return -1
	}
	return mb << 20
}

// Tuner adjusts the GC percentage after each collection until Stop.
type Tuner struct {
	headroom uint64
	stopped  atomic.Bool
	sample   []metrics.Sample
	percent  int // last percentage set
	updates  atomic.Int64
	prev     int // the percentage before Start, restored by Stop
	enabled  bool
}

// Start begins tuning. It returns a Tuner that does nothing when the tuning
// is off (Headroom < 0, or GOGC/GOMEMLIMIT set without Force).
func Start(o Options) *Tuner {
	t := &Tuner{}
	if o.Headroom < 0 {
		return t
	}
	if !o.Force && (os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "") {
		return t
	}
	if o.Headroom == 0 {
		o.Headroom = DefaultHeadroom
	}
	t.headroom = uint64(o.Headroom)
	t.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t.enabled = true
	t.prev = debug.SetGCPercent(100)
	t.percent = 100
	t.adjust()
	t.arm()
	return t
}

// arm attaches the next cycle's cleanup to a new, unreachable object.
func (t *Tuner) arm() {
	runtime.AddCleanup(new([16]byte), func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	}, t)
}

// adjust sets the percentage from the live heap of the last cycle. Only
// the cleanup goroutine (and Start, before it) calls it.
func (t *Tuner) adjust() {
	metrics.Read(t.sample)
	live := uint64(0)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := Percent(live, t.headroom)
	// Small changes are not worth the pacer's recomputation.
	if p == t.percent || (p > t.percent && p < t.percent+t.percent/8) || (p < t.percent && p > t.percent-t.percent/8) {
		return
	}
	t.percent = p
	debug.SetGCPercent(p)
	t.updates.Add(1)
}

// Percent is the GC percentage that puts the heap target at
// live + max(live, headroom): 100 for a live heap of at least headroom,
// more for a smaller one, at most 2000.
func Percent(live, headroom uint64) int {
	if live >= headroom {
		return 100
	}
	if live == 0 || headroom/live >= maxPercent/100 {
		return maxPercent
	}
	return int(headroom * 100 / live)
}

// Updates is how many times the tuner changed the setting (tests).
func (t *Tuner) Updates() int64 { return t.updates.Load() }

// Stop ends the tuning and restores the setting found at Start.
func (t *Tuner) Stop() {
	if !t.enabled || t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.prev)
}
