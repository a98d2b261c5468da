package clock

import (
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	var got []string
	var seen []time.Time
	add := func(name string, d time.Duration) {
		f.AfterFunc(d, func() { got = append(got, name); seen = append(seen, f.Now()) })
	}
	add("c", 3*time.Second)
	add("a", time.Second)
	add("b", 2*time.Second)
	add("b2", 2*time.Second) // same deadline: creation order
	f.Advance(1500 * time.Millisecond)
	if len(got) != 1 || got[0] != "a" || !seen[0].Equal(epoch.Add(time.Second)) {
		t.Fatalf("after 1.5s: got %v at %v", got, seen)
	}
	if f.Pending() != 3 {
		t.Fatalf("pending = %d, want 3", f.Pending())
	}
	f.Advance(10 * time.Second)
	want := []string{"a", "b", "b2", "c"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
	if !f.Now().Equal(epoch.Add(11500 * time.Millisecond)) {
		t.Fatalf("now = %v", f.Now())
	}
}

func TestFakeStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	fired := 0
	tm := f.AfterFunc(time.Second, func() { fired++ })
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	f.Advance(2 * time.Second)
	if fired != 0 {
		t.Fatal("stopped timer fired")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported active")
	}
	f.Advance(999 * time.Millisecond)
	if fired != 0 {
		t.Fatal("fired early")
	}
	if !tm.Reset(time.Second) {
		t.Fatal("Reset of an armed timer reported inactive")
	}
	f.Advance(999 * time.Millisecond)
	if fired != 0 {
		t.Fatal("reset did not push the deadline back")
	}
	f.Advance(time.Millisecond)
	if fired != 1 {
		t.Fatalf("fired = %d, want 1", fired)
	}
	if tm.Stop() {
		t.Fatal("Stop after firing returned true")
	}
}

func TestFakeTimerArmedFromCallbackFiresInSameAdvance(t *testing.T) {
	f := NewFake(epoch)
	var at []time.Time
	f.AfterFunc(time.Second, func() {
		at = append(at, f.Now())
		f.AfterFunc(time.Second, func() { at = append(at, f.Now()) })
	})
	f.Advance(5 * time.Second)
	if len(at) != 2 || !at[0].Equal(epoch.Add(time.Second)) || !at[1].Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("fired at %v", at)
	}
}

func TestFakeSetAndZeroDelay(t *testing.T) {
	f := NewFake(epoch)
	fired := false
	f.AfterFunc(0, func() { fired = true })
	if d, ok := f.NextDeadline(); !ok || !d.Equal(epoch) {
		t.Fatalf("next deadline = %v %v", d, ok)
	}
	f.Advance(0)
	if !fired {
		t.Fatal("zero-delay timer did not fire on Advance(0)")
	}
	f.Set(epoch.Add(time.Hour))
	if !f.Now().Equal(epoch.Add(time.Hour)) {
		t.Fatalf("now = %v", f.Now())
	}
	if _, ok := f.NextDeadline(); ok {
		t.Fatal("deadline reported with no timers")
	}
}

func TestFakeConcurrentUse(t *testing.T) {
	f := NewFake(epoch)
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				tm := f.AfterFunc(time.Duration(j)*time.Millisecond, func() { mu.Lock(); n++; mu.Unlock() })
				if j%2 == 0 {
					tm.Stop()
				}
				_ = f.Now()
			}
		}()
	}
	wg.Wait()
	f.Advance(time.Second)
	if n != 400 {
		t.Fatalf("fired %d, want 400", n)
	}
}

func TestRealClock(t *testing.T) {
	c := Real()
	before := time.Now()
	if c.Now().Before(before) {
		t.Fatal("Real().Now() went backwards")
	}
	done := make(chan struct{})
	tm := c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("real timer did not fire")
	}
	if tm.Stop() {
		t.Fatal("Stop after firing returned true")
	}
}
