package gopool

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
)

func TestWorkersAreReusedAndBounded(t *testing.T) {
	// One task at a time: after the first, a waiting worker takes each
	// task, so the number of goroutines does not grow.
	done := make(chan struct{})
	Go(func() { done <- struct{}{} })
	<-done
	poll.Until(t, 10*time.Second, "the worker waiting", func() bool { return Idle() >= 1 })
	before := runtime.NumGoroutine()
	for range 100 {
		Go(func() { done <- struct{}{} })
		<-done
		poll.Until(t, 10*time.Second, "the worker back", func() bool { return Idle() >= 1 })
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after 100 sequential tasks, %d before", n, before)
	}

	// Many tasks at once: each runs, and at most MaxIdle workers wait
	// afterwards.
	const tasks = MaxIdle + 100
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(tasks)
	for range tasks {
		Go(func() {
			defer wg.Done()
			<-release
		})
	}
	close(release)
	wg.Wait()
	poll.Until(t, 10*time.Second, "workers beyond MaxIdle gone", func() bool { return Idle() == MaxIdle })
	for range 10 * MaxIdle {
		if Idle() > MaxIdle {
			t.Fatalf("%d idle workers, more than MaxIdle %d", Idle(), MaxIdle)
		}
		runtime.Gosched()
	}
}
