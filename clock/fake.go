package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Advance and Set fire the
// timers that fall due, one at a time in deadline order (ties in creation
// order), synchronously in the calling goroutine, with the clock showing each
// timer's deadline while its function runs. A timer function may create,
// stop or reset timers and read the clock; it must not call Advance or Set.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers fakeHeap
	nextID uint64
	// advancing serializes Advance/Set so that timers fire in order.
	advancing sync.Mutex
}

// NewFake returns a Fake showing start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc arms a timer that calls fn when the fake time reaches now+d.
// A d ≤ 0 fires at the next Advance or Set, even Advance(0).
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, fn: fn, index: -1}
	f.arm(t, d)
	return t
}

// arm schedules t at now+d; f.mu is held.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	f.nextID++
	t.id = f.nextID
	t.when = f.now.Add(d)
	heap.Push(&f.timers, t)
}

// Advance moves the clock forward by d, firing every timer due on the way.
func (f *Fake) Advance(d time.Duration) {
	f.advancing.Lock()
	defer f.advancing.Unlock()
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.runUntil(target)
}

// Set moves the clock to t (which must not be before Now), firing every timer
// due on the way. Setting an earlier time moves the clock back without firing.
func (f *Fake) Set(t time.Time) {
	f.advancing.Lock()
	defer f.advancing.Unlock()
	f.runUntil(t)
}

func (f *Fake) runUntil(target time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(target) {
			f.now = target
			f.mu.Unlock()
			return
		}
		t := heap.Pop(&f.timers).(*fakeTimer)
		if t.when.After(f.now) {
			f.now = t.when
		}
		fn := t.fn
		f.mu.Unlock()
		fn()
	}
}

// Pending returns the number of armed timers.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NextDeadline returns the deadline of the earliest armed timer, and false
// when no timer is armed.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}

type fakeTimer struct {
	clock *Fake
	fn    func()
	when  time.Time
	id    uint64
	index int // position in the heap, -1 when not armed
}

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&f.timers, t.index)
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	active := t.index >= 0
	if active {
		heap.Remove(&f.timers, t.index)
	}
	f.arm(t, d)
	return active
}

type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].id < h[j].id
	}
	return h[i].when.Before(h[j].when)
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
