package servicebus

import (
	"sync"

	"github.com/busbar-io/busbar/internal/gopool"
)

// serial runs the items pushed to it in order, a batch at a time, on one
// goroutine started on demand: work that waits for the store (an fsync)
// leaves the connection's reader goroutine free, while a link's items keep
// their order. The number of items is bounded by the caller (link credit).
type serial[T any] struct {
	run func([]T)

	mu      sync.Mutex
	items   []T
	spare   []T // the buffer the last run had, for the next pushes
	running bool
	idle    *sync.Cond // broadcast when the goroutine stops; on mu
}

// push queues an item and starts the goroutine if none is running.
func (s *serial[T]) push(it T) {
	s.mu.Lock()
	if s.items == nil {
		s.items = make([]T, 0, 16) // rather than growing by doubling from one
	}
	s.items = append(s.items, it)
	if s.running {
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	gopool.Go(s.loop)
}

// loop runs the queued items in batches. Two buffers take turns, and both
// outlive the goroutine (which stops whenever the queue is empty), so a
// busy link queues without allocating.
func (s *serial[T]) loop() {
	s.mu.Lock()
	for len(s.items) > 0 {
		batch := s.items
		s.items, s.spare = s.spare[:0], nil
		s.mu.Unlock()
		s.run(batch)
		clear(batch)
		s.mu.Lock()
		s.spare = batch[:0]
	}
	s.running = false
	if s.idle != nil {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// wait returns once every item pushed before the call has been run.
func (s *serial[T]) wait() {
	s.mu.Lock()
	if !s.running && len(s.items) == 0 {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = sync.NewCond(&s.mu)
	}
	for s.running || len(s.items) > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
}
