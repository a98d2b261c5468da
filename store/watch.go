package store

import (
	"bytes"
	"sync"
)

// Watchers is the change notification every backend shares: backends embed
// it, call Notify with each committed batch once it is durable (in commit
// order), and expose Watch. Each watch has its own goroutine and queue, so
// a slow watcher delays only itself and never the committer.
type Watchers struct {
	mu   sync.Mutex
	list []*watch
}

type watch struct {
	prefix []byte
	fn     func([]byte)

	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]byte
	stopped bool
	done    chan struct{}
}

// Watch registers fn for keys under prefix; see Store.Watch.
func (ws *Watchers) Watch(prefix []byte, fn func(key []byte)) (stop func()) {
	w := &watch{prefix: bytes.Clone(prefix), fn: fn, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	ws.mu.Lock()
	ws.list = append(ws.list, w)
	ws.mu.Unlock()
	go w.run()
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			for i, x := range ws.list {
				if x == w {
					ws.list = append(ws.list[:i:i], ws.list[i+1:]...)
					break
				}
			}
			ws.mu.Unlock()
			w.mu.Lock()
			w.stopped = true
			w.cond.Signal()
			w.mu.Unlock()
			<-w.done
		})
	}
}

// Active reports whether anyone watches, so a backend can skip Notify's
// work when no one does.
func (ws *Watchers) Active() bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.list) > 0
}

// Notify queues, for every watch, the keys of ops under its prefix.
func (ws *Watchers) Notify(ops []Op) {
	ws.mu.Lock()
	list := ws.list
	ws.mu.Unlock()
	for _, w := range list {
		var keys [][]byte
		for _, op := range ops {
			if k, ok := w.match(op); ok {
				keys = append(keys, bytes.Clone(k))
			}
		}
		if len(keys) == 0 {
			continue
		}
		w.mu.Lock()
		if !w.stopped {
			w.queue = append(w.queue, keys...)
			w.cond.Signal()
		}
		w.mu.Unlock()
	}
}

// Gap tells every watch that it may have missed changes: each one's fn is
// called with a nil key after the keys queued before (see Store.Watch). A
// shared backend calls it when its stream of other writers' changes is
// back after a loss.
func (ws *Watchers) Gap() {
	ws.mu.Lock()
	list := ws.list
	ws.mu.Unlock()
	for _, w := range list {
		w.mu.Lock()
		if !w.stopped {
			w.queue = append(w.queue, nil)
			w.cond.Signal()
		}
		w.mu.Unlock()
	}
}

// match returns the key under w's prefix that op changes, if any.
func (w *watch) match(op Op) ([]byte, bool) {
	if op.Kind != OpDeleteRange {
		return op.Key, bytes.HasPrefix(op.Key, w.prefix)
	}
	// The overlap of [Key, End) with the prefix's range [prefix, next).
	start := op.Key
	if bytes.Compare(start, w.prefix) < 0 {
		start = w.prefix
	}
	if EmptyRange(start, op.End) || !bytes.HasPrefix(start, w.prefix) {
		return nil, false
	}
	return start, true
}

func (w *watch) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.stopped {
			w.cond.Wait()
		}
		if w.stopped {
			w.mu.Unlock()
			return
		}
		keys := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, k := range keys {
			w.fn(k)
		}
	}
}
