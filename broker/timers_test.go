package broker

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
)

// The wheel fires every deadline once, in time order, with one clock timer.
func TestWheelFiresInOrderWithOneTimer(t *testing.T) {
	clk := clock.NewFake(t0)
	var fired []int64
	w := newWheel(clk, func(due []*deadline, now int64) {
		for _, d := range due {
			if d.when > now {
				t.Errorf("deadline %d fired at %d", d.when, now)
			}
			fired = append(fired, d.when)
		}
	})
	r := rand.New(rand.NewPCG(1, 2))
	ds := make([]*deadline, 10000)
	var want []int64
	for i := range ds {
		ds[i] = &deadline{index: -1}
		when := t0.Add(time.Duration(r.IntN(1000)) * time.Millisecond).UnixNano()
		w.set(ds[i], when)
		if i%3 == 0 {
			w.remove(ds[i])
		} else {
			want = append(want, when)
		}
	}
	// Moving a deadline re-sorts it.
	w.set(ds[1], t0.Add(2*time.Second).UnixNano())
	want[0] = t0.Add(2 * time.Second).UnixNano()
	slices.Sort(want)
	if clk.Pending() != 1 {
		t.Fatalf("%d clock timers, want 1", clk.Pending())
	}
	clk.Advance(3 * time.Second)
	if !slices.Equal(fired, want) {
		t.Fatalf("fired %d deadlines (sorted: %v), want %d", len(fired), slices.IsSorted(fired), len(want))
	}
	if w.len() != 0 || clk.Pending() != 0 {
		t.Fatalf("left: %d deadlines, %d timers", w.len(), clk.Pending())
	}
	w.remove(ds[2]) // removing a fired deadline is a no-op
	w.close()
	w.set(&deadline{index: -1}, t0.UnixNano())
	if clk.Pending() != 0 {
		t.Fatal("a closed wheel armed a timer")
	}
}

// handClock is a Fake whose timers never fire by themselves: a test calls
// the wheel's fire as the timers' goroutines would.
type handClock struct{ *clock.Fake }

type nopTimer struct{}

func (nopTimer) Stop() bool               { return false }
func (nopTimer) Reset(time.Duration) bool { return false }

func (handClock) AfterFunc(time.Duration, func()) clock.Timer { return nopTimer{} }

// A timer that fires while a fire loop runs deadlines (a set armed it
// meanwhile) leaves what is due to that loop: deadlines due later never run
// beside, and perhaps before, earlier ones.
func TestWheelRunsOneFireLoopAtATime(t *testing.T) {
	clk := handClock{clock.NewFake(t0)}
	entered, release := make(chan struct{}), make(chan struct{})
	var running atomic.Int32
	var mu sync.Mutex
	var fired []int64
	w := newWheel(clk, func(due []*deadline, now int64) {
		if running.Add(1) != 1 {
			t.Error("two fire loops ran deadlines at once")
		}
		defer running.Add(-1)
		mu.Lock()
		for _, d := range due {
			fired = append(fired, d.when)
		}
		first := len(fired) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		}
	})
	d1, d2 := &deadline{index: -1}, &deadline{index: -1}
	w.set(d1, t0.Add(time.Millisecond).UnixNano())
	clk.Advance(time.Millisecond)
	done := make(chan struct{})
	go func() { w.fire(); close(done) }()
	<-entered
	w.set(d2, t0.Add(2*time.Millisecond).UnixNano())
	clk.Advance(time.Millisecond)
	w.fire() // the second timer's goroutine
	close(release)
	<-done
	if want := []int64{d1.when, d2.when}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if w.len() != 0 {
		t.Fatalf("%d deadlines left", w.len())
	}
}
