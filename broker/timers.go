package broker

import (
	"sync"
	"time"

	"github.com/busbar-io/busbar/clock"
)

// dlKind says what a deadline is for.
type dlKind uint8

const (
	dlMessage   dlKind = iota + 1 // scheduled activation or TTL expiry of msgIdx m
	dlLocks                       // earliest message-lock expiry of queue q
	dlSessLocks                   // earliest session-lock expiry of queue q
	dlWaiter                      // accept-next-session timeout of waiter w
	dlIdle                        // auto-delete-on-idle check of entity ent
)

// deadline is one entry of the namespace's deadline heap. Owners embed or
// point to it; index is its heap position (-1 when not armed).
type deadline struct {
	when  int64  // unix nanoseconds
	tie   uint64 // orders deadlines of one instant: a message's sequence number
	index int32
	kind  dlKind
	q     *qstate
	m     *msgIdx
	w     *acceptWaiter
	ent   *entity
}

// wheel is the namespace's one timer structure: a min-heap of deadlines
// with a single clock timer armed for the earliest. Lock order: callers may
// hold a qstate mutex when calling set/remove; fire runs deadlines without
// holding the wheel's mutex.
type wheel struct {
	mu      sync.Mutex
	clk     clock.Clock
	h       []*deadline
	timer   clock.Timer
	armedAt int64 // deadline the timer is armed for; 0 = not armed
	firing  bool  // a fire loop is running
	run     func(due []*deadline, now int64)
	closed  bool
}

func newWheel(clk clock.Clock, run func(due []*deadline, now int64)) *wheel {
	return &wheel{clk: clk, run: run}
}

// set arms (or moves) d to fire at when.
func (w *wheel) set(d *deadline, when int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLocked(d, when, d.tie)
}

// setOrdered arms (or moves) d to fire at when, after the deadlines of the
// same instant with a lower tie: scheduled messages due together activate
// (and take their new sequence numbers) in the order they were sent.
func (w *wheel) setOrdered(d *deadline, when int64, tie uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLocked(d, when, tie)
}

func (w *wheel) setLocked(d *deadline, when int64, tie uint64) {
	d.when, d.tie = when, tie
	if d.index >= 0 && int(d.index) < len(w.h) && w.h[d.index] == d {
		w.fix(int(d.index))
	} else {
		d.index = int32(len(w.h))
		w.h = append(w.h, d)
		w.up(int(d.index))
	}
	w.armLocked()
}

// remove disarms d if armed.
func (w *wheel) remove(d *deadline) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(d)
}

func (w *wheel) removeLocked(d *deadline) {
	i := int(d.index)
	if i < 0 || i >= len(w.h) || w.h[i] != d {
		return
	}
	last := len(w.h) - 1
	w.swap(i, last)
	w.h[last] = nil
	w.h = w.h[:last]
	d.index = -1
	if i < last {
		w.fix(i)
	}
	if cap(w.h) > 4096 && len(w.h) < cap(w.h)/8 {
		w.h = append(make([]*deadline, 0, 2*len(w.h)), w.h...)
	}
}

// len returns the number of armed deadlines.
func (w *wheel) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.h)
}

func (w *wheel) armLocked() {
	if w.closed || len(w.h) == 0 {
		return
	}
	next := w.h[0].when
	if w.armedAt != 0 && w.armedAt <= next {
		return
	}
	w.armedAt = next
	delay := time.Duration(next - w.clk.Now().UnixNano())
	if delay < 0 {
		delay = 0
	}
	if w.timer == nil {
		w.timer = w.clk.AfterFunc(delay, w.fire)
	} else {
		w.timer.Reset(delay)
	}
}

// fire runs every due deadline, in order, then re-arms for the next one.
// One fire loop runs at a time: a timer that fires while a loop runs (it
// was armed by a set meanwhile) leaves the due deadlines to that loop,
// which looks again before it stops, so that deadlines due later are never
// run beside, and perhaps before, earlier ones.
func (w *wheel) fire() {
	w.mu.Lock()
	w.armedAt = 0
	if w.firing {
		w.mu.Unlock()
		return
	}
	w.firing = true
	w.mu.Unlock()
	for {
		w.mu.Lock()
		w.armedAt = 0
		now := w.clk.Now().UnixNano()
		var due []*deadline
		for len(w.h) > 0 && w.h[0].when <= now && len(due) < 1024 {
			d := w.h[0]
			w.removeLocked(d)
			due = append(due, d)
		}
		if len(due) == 0 {
			w.firing = false
			w.armLocked()
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.run(due, now)
	}
}

func (w *wheel) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *wheel) less(i, j int) bool {
	a, b := w.h[i], w.h[j]
	return a.when < b.when || a.when == b.when && a.tie < b.tie
}
func (w *wheel) swap(i, j int) {
	w.h[i], w.h[j] = w.h[j], w.h[i]
	w.h[i].index = int32(i)
	w.h[j].index = int32(j)
}
func (w *wheel) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !w.less(j, i) {
			break
		}
		w.swap(i, j)
		j = i
	}
}
func (w *wheel) down(i int) bool {
	i0 := i
	n := len(w.h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && w.less(r, l) {
			j = r
		}
		if !w.less(j, i) {
			break
		}
		w.swap(i, j)
		i = j
	}
	return i > i0
}
func (w *wheel) fix(i int) {
	if !w.down(i) {
		w.up(i)
	}
}
