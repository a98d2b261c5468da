package pebble

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/busbar-io/busbar/store"
)

// The group commit.
//
// Commit puts a request on the pending queue and waits. One committer
// goroutine takes every pending request (up to MaxGroupBytes), encodes them
// in order into one Pebble batch and applies it (WAL write and memtable)
// without waiting for its fsync; a syncer goroutine waits for that fsync and
// releases the callers. The two overlap: while group N's fsync runs, the
// committer gathers and applies group N+1, whose WAL record Pebble then
// syncs right after N's. At most two groups are in flight — one syncing,
// one applied behind it: the committer waits for the syncer before it
// applies a third, so batches that arrive meanwhile gather into one group.
//
// Why the overlap is safe: Pebble makes a batch visible to reads when it is
// applied, before its fsync, with or without the overlap; groups are applied
// and synced in order, so a caller is still released only after the fsync
// covering its batch, and a group's conditions are checked against every
// group applied before it. If an fsync fails, its group and every group
// applied after it fail (Pebble's WAL errors are sticky).
//
// The held-fsync tests (store_test.go) hold a WAL fsync and count what
// queues behind it. Without the overlap every later batch waits in our
// pending queue; with it the first group to arrive is applied and waits in
// Pebble's WAL instead, so those tests count requests pending or applied
// behind the held sync (queuedLen), not pending alone. (An earlier attempt
// at this overlap kept the old count and so waited forever for a pending
// queue that the committer was draining.)
//
// Gathering. While an fsync is in flight, the committer applies the next
// group at once and then waits for that fsync at the hand-off to the
// syncer; the batches arriving meanwhile form the group after. When no
// fsync is in flight (the store went idle), right after a group is released
// its callers typically come straight back with their next batch (a link
// sends its next message once the previous one is acknowledged); if the
// committer started an fsync with only the first of them, the rest would
// wait a whole fsync. So, when Linger > 0 and nothing is in flight, the
// committer expects the k batches of the last group back (or the p already
// pending, when more), and when it expects more than one it waits until
// that many are pending or Linger has passed, whichever is first. A lone
// producer (k = 1) never waits, and after a drop in load only one group
// pays the Linger.
//
// Invariants:
//   - a caller's batch is encoded contiguously in one Pebble batch, which
//     Pebble applies atomically (one WAL record, then the memtable), so each
//     caller's batch is all-or-nothing, also across a crash;
//   - groups are applied in the order their requests were queued;
//   - a caller is released only after the WAL fsync covering its group, so an
//     acknowledged batch is durable.

// request is one Commit waiting for its group.
type request struct {
	b     *store.Batch
	bytes int
	err   error
	done  chan struct{}
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

type committer struct {
	s *Store

	mu      sync.Mutex
	pending []*request
	// headSince is when pending[0] arrived, kept only for OnCommit: one
	// clock read per group rather than per Commit, which shows in
	// profiles on virtual machines with a slow clock.
	headSince time.Time
	want      int           // signal wake once len(pending) >= want; 0: do not
	wake      chan struct{} // capacity 1
	hurry     chan struct{} // closed when the store starts closing: stop lingering
	quit      chan struct{} // closed by stop
	stopped   chan struct{} // closed when commitLoop returns
	// syncq hands an applied group to the syncer. Unbuffered: the committer
	// applies group N+1 during N's fsync and then waits here, so at most
	// two groups are in flight.
	syncq     chan *group
	synced    chan struct{} // closed when syncLoop returns
	applied   int           // requests applied, not yet released (under mu)
	lastGroup int           // requests of the group released last (under mu): the callers expected back
}

// group is one Pebble batch of requests.
type group struct {
	pb         *pebble.Batch
	reqs       []*request
	since      time.Time
	ops, bytes int
}

func (c *committer) start(s *Store) {
	c.s = s
	c.wake = make(chan struct{}, 1)
	c.hurry = make(chan struct{})
	c.quit = make(chan struct{})
	c.stopped = make(chan struct{})
	c.syncq = make(chan *group)
	c.synced = make(chan struct{})
	go c.commitLoop()
	go c.syncLoop()
}

// hurryUp ends lingering for good: Close calls it before waiting for the
// Commits in flight, which must not wait for callers that will not come.
func (c *committer) hurryUp() { close(c.hurry) }

// stop ends the committer. The Store calls it only when no Commit is in
// flight, so nothing is pending.
func (c *committer) stop() {
	close(c.quit)
	<-c.stopped
	close(c.syncq)
	<-c.synced
}

// commit queues b and waits until its group is durable.
func (c *committer) commit(b *store.Batch) error {
	r := requestPool.Get().(*request)
	r.b, r.bytes = b, b.Bytes()
	c.mu.Lock()
	if len(c.pending) == 0 && c.s.opts.OnCommit != nil {
		c.headSince = time.Now()
	}
	c.pending = append(c.pending, r)
	signal := c.want > 0 && len(c.pending) >= c.want
	if signal {
		c.want = 0
	}
	c.mu.Unlock()
	if signal {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already due
		}
	}
	<-r.done
	err := r.err
	*r = request{done: r.done}
	requestPool.Put(r)
	return err
}

// await blocks until at least n requests are pending (true), or the
// committer is stopped (false). With a timeout, a linger, it also returns
// true when the timeout fires or the store starts closing.
func (c *committer) await(n int, timeout <-chan time.Time) bool {
	var hurry <-chan struct{} // nil, which never fires, unless lingering
	if timeout != nil {
		hurry = c.hurry
	}
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.want = 0
			c.mu.Unlock()
			return true
		}
		c.want = n
		c.mu.Unlock()
		select {
		case <-c.wake:
			continue // maybe stale: check again
		case <-c.quit:
			return false
		case <-timeout:
		case <-hurry:
		}
		c.mu.Lock()
		c.want = 0
		c.mu.Unlock()
		return true
	}
}

// take moves the oldest pending requests, up to MaxGroupBytes (at least one),
// into a new slice, and returns when the oldest of them arrived.
func (c *committer) take() (reqs []*request, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, size := 0, 0
	for n < len(c.pending) {
		size += c.pending[n].bytes
		if n > 0 && size > c.s.opts.MaxGroupBytes {
			break
		}
		n++
	}
	reqs = append([]*request(nil), c.pending[:n]...)
	rest := copy(c.pending, c.pending[n:])
	clear(c.pending[rest:])
	c.pending = c.pending[:rest]
	since = c.headSince
	if rest > 0 && c.s.opts.OnCommit != nil {
		// The new head arrived between since and now; now errs on the
		// side of a shorter latency for a group cut by MaxGroupBytes.
		c.headSince = time.Now()
	}
	return reqs, since
}

func (c *committer) commitLoop() {
	defer close(c.stopped)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		if !c.await(1, nil) {
			return
		}
		// Linger only when no fsync is in flight (see Gathering above).
		c.mu.Lock()
		idle := c.applied == 0
		expect := max(c.lastGroup, len(c.pending))
		c.mu.Unlock()
		if d := c.s.opts.Linger; d > 0 && idle && expect > 1 {
			linger.Reset(d)
			ok := c.await(expect, linger.C)
			linger.Stop() // Go 1.23+ timers: no stale value survives Stop
			if !ok {
				return
			}
		}
		reqs, since := c.take()
		c.applyGroup(reqs, since)
	}
}

// applyGroup applies reqs as one Pebble batch without waiting for its
// fsync and hands it to the syncer. A request whose conditions fail is
// left out of the group and answered with the condition's error; if the
// group cannot be applied, its callers are released with the error at
// once.
func (c *committer) applyGroup(reqs []*request, since time.Time) {
	g := &group{reqs: reqs, since: since}
	for _, r := range reqs {
		g.ops += len(r.b.Ops)
		g.bytes += r.bytes
	}
	// Each operation costs a few bytes of header besides its key and value.
	g.pb = c.s.db.NewBatchWithSize(g.bytes + 16*g.ops)
	var err error
	for i, r := range reqs {
		if len(r.b.Conds) > 0 {
			if r.err = c.checkConds(r.b.Conds, reqs[:i]); r.err != nil {
				continue
			}
		}
		if err = encode(g.pb, r.b); err != nil {
			break
		}
	}
	c.mu.Lock()
	c.applied += len(reqs)
	c.mu.Unlock()
	if err == nil {
		if err = c.s.db.ApplyNoSyncWait(g.pb, pebble.Sync); err != nil {
			err = fmt.Errorf("store/pebble: commit of %d batches: %w", len(reqs), err)
		}
	}
	if err != nil {
		_ = g.pb.Close()
		c.release(g, err)
		return
	}
	c.syncq <- g
}

// syncLoop waits for each applied group's fsync, in order, and releases
// its callers.
func (c *committer) syncLoop() {
	defer close(c.synced)
	for g := range c.syncq {
		err := g.pb.SyncWait()
		if err != nil {
			err = fmt.Errorf("store/pebble: commit of %d batches: %w", len(g.reqs), err)
		}
		_ = g.pb.Close() // Pebble's buffer; keys and values are in the memtable now
		c.release(g, err)
	}
}

// release answers a group's callers with its outcome (err nil: durable).
func (c *committer) release(g *group, err error) {
	if err == nil {
		n := 0
		for _, r := range g.reqs {
			if r.err == nil {
				n++
			}
		}
		c.s.commits.Add(uint64(n))
		c.s.ops.Add(uint64(g.ops))
		c.s.bytes.Add(uint64(g.bytes))
		if f := c.s.opts.OnCommit; f != nil {
			f(g.ops, time.Since(g.since))
		}
		if c.s.watches.Active() {
			for _, r := range g.reqs {
				if r.err == nil {
					c.s.watches.Notify(r.b.Ops)
				}
			}
		}
	}
	c.mu.Lock()
	c.applied -= len(g.reqs)
	c.lastGroup = len(g.reqs)
	c.mu.Unlock()
	for _, r := range g.reqs {
		if r.err == nil {
			r.err = err
		}
		r.done <- struct{}{}
	}
}

// checkConds checks conditions against the database as the earlier
// requests of the group (those not failed) will leave it.
func (c *committer) checkConds(conds []store.Cond, earlier []*request) error {
	return store.CheckConds(conds, func(k []byte) ([]byte, bool, error) {
		v, closer, err := c.s.db.Get(k)
		found := err == nil
		if err != nil && !errors.Is(err, pebble.ErrNotFound) {
			return nil, false, fmt.Errorf("store/pebble: read condition key: %w", err)
		}
		var base []byte
		if found {
			base = append([]byte(nil), v...)
			_ = closer.Close()
		}
		for _, r := range earlier {
			if r.err == nil {
				base, found = store.ValueAfter(r.b.Ops, k, base, found)
			}
		}
		return base, found, nil
	})
}

// encode appends b's operations to pb in order. Pebble copies keys and values
// into the batch, so the caller may reuse its slices once Commit returns.
func encode(pb *pebble.Batch, b *store.Batch) error {
	for _, op := range b.Ops {
		var err error
		switch op.Kind {
		case store.OpSet:
			err = pb.Set(op.Key, op.Value, nil)
		case store.OpDelete:
			err = pb.Delete(op.Key, nil)
		case store.OpDeleteRange:
			if !store.EmptyRange(op.Key, op.End) {
				err = pb.DeleteRange(op.Key, op.End, nil)
			}
		}
		if err != nil {
			return fmt.Errorf("store/pebble: encode op: %w", err)
		}
	}
	return nil
}
