package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/busbar-io/busbar/internal/finetimer"
	"github.com/busbar-io/busbar/store"
)

// The group commit.
//
// Commit puts a request on the pending queue and waits. One committer
// goroutine takes every pending request (up to MaxGroupBytes), encodes them
// in order into one Pebble batch, applies it with one WAL fsync, and
// releases the callers. Batches that arrive during the fsync wait for the
// next group.
//
// Gathering. Right after a group is released its callers typically come
// straight back with their next batch (a link sends its next message once
// the previous one is acknowledged). If the committer started the next fsync
// with only the first of them, the rest would wait a whole fsync for the one
// after, and groups would settle at about half the number of committers.
// So, when Linger > 0, the committer expects the k batches of the last group
// back, plus the p that queued during its fsync when p <= k (when p > k it
// expects p: the group is growing anyway, and the released callers may be
// done), and when it expects more than one it waits until that many are
// pending or Linger has passed, whichever is first. A lone producer (k = 1,
// p = 0) never waits, and after a drop in load only one group pays the
// Linger. Counting p matters for two closed-loop callers (a link's sends
// and its peer link's settlements): without it they would alternate, one
// batch per fsync, each waiting for the other's fsync. Pebble's own commit
// pipeline (db.Set with pebble.Sync) starts the next fsync at once; waiting
// for the returning callers is what makes our groups close to the number of
// committers.
//
// The linger's timer is a finetimer (a timerfd on Linux), not a
// time.Timer: when the process is otherwise idle the Go runtime sleeps in
// epoll_wait with a timeout in whole milliseconds, so a 250µs time.Timer
// fired after about 1ms, and at 5,000 msg/s nearly every send and
// completion paid that millisecond (measured 2026-11-27: lingers averaged
// 730–790µs instead of at most 250µs).
//
// Not backing off. A linger that runs to its end is paid in latency by
// callers that are not closed loops (a producer at a fixed rate). Turning
// lingering off for the next 8 groups after such a linger was built and
// measured (2026-11-27, W4 and 5,000 msg/s, official Go SDK and raw
// client): the median latency at 5,000 msg/s fell (raw 1.5 → 0.7 ms, SDK
// 2.8 → 1.9 ms), but the p99 did not move, and the groups got smaller:
// 2.4× the fsyncs and twice the socket writes per message at 5,000
// msg/s (broker CPU 71 → 108 µs per message), and on the SDK's session
// workload 1.6× the fsyncs, 20% less throughput. Lingering stays on.
//
// Why one group at a time. Applying the next group while the current one's
// fsync runs (Pebble's ApplyNoSyncWait, two groups in flight) was built and
// measured (2026-11-25, quiet machine, BenchmarkCommit, 1 KiB): it lost
// 17–30% of commits/s at 16 and 64 committers and gained nothing at 1 or
// 128. With closed-loop callers and one fsync at a time on the device, two
// groups in flight split the callers into two cohorts that alternate, so
// each fsync carries about half as many batches (61 → 36 per fsync at 64
// committers); the apply it hides is small beside the fsync. Waiting during
// the fsync for the returning callers before applying early did not help
// either. (A first attempt had also seemed to hang the held-fsync tests
// below: they wait for batches to pile up in the pending queue, which an
// overlapping committer drains into Pebble's WAL queue instead.)
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
	lingered  atomic.Int64  // lingers that ran to their end (tests)
	linger    *finetimer.Timer

	sorted  []*store.Op // the group's operations, reused by commitGroup
	sortTmp []groupOp   // sortOps' scratch
}

func (c *committer) start(s *Store) {
	c.s, c.linger = s, finetimer.New()
	c.wake = make(chan struct{}, 1)
	c.hurry = make(chan struct{})
	c.quit = make(chan struct{})
	c.stopped = make(chan struct{})
	go c.commitLoop()
}

// hurryUp ends lingering for good: Close calls it before waiting for the
// Commits in flight, which must not wait for callers that will not come.
func (c *committer) hurryUp() { close(c.hurry) }

// stop ends the committer. The Store calls it only when no Commit is in
// flight, so nothing is pending.
func (c *committer) stop() {
	close(c.quit)
	<-c.stopped
	_ = c.linger.Close()
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
func (c *committer) await(n int, timeout <-chan struct{}) bool {
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
			c.lingered.Add(1)
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
	expect := 0 // batches expected for the next group
	for {
		if !c.await(1, nil) {
			return
		}
		if d := c.s.opts.Linger; d > 0 && expect > 1 {
			c.linger.Reset(d)
			ok := c.await(expect, c.linger.C())
			c.linger.Stop()
			if !ok {
				return
			}
		}
		reqs, since := c.take()
		p := c.commitGroup(reqs, since)
		// The callers just released come back, and join the p that
		// queued during the fsync; unless the latter outnumber them:
		// then the next group is already larger than this one, and the
		// released callers may well be done. p is counted before the
		// release: counted after, it would include released callers
		// already back, each expected twice — a wait for callers that
		// do not exist, up to the Linger every group (and, with the
		// tests' hour-long Linger, a hang on a busy machine).
		expect = len(reqs)
		if p <= expect {
			expect += p
		} else {
			expect = p
		}
	}
}

// commitGroup applies reqs as one Pebble batch with one fsync and releases
// the callers with the outcome. A request whose conditions fail is left out
// of the group and answered with the condition's error. It returns how many
// requests were pending when the group was durable, before its callers were
// released.
func (c *committer) commitGroup(reqs []*request, since time.Time) (pending int) {
	ops, bytes := 0, 0
	for _, r := range reqs {
		ops += len(r.b.Ops)
		bytes += r.bytes
	}
	// Each operation costs a few bytes of header besides its key and value.
	pb := c.s.db.NewBatchWithSize(bytes + 16*ops)
	sorted, keepOrder := c.sorted[:0], false
	for i, r := range reqs {
		if len(r.b.Conds) > 0 {
			if r.err = c.checkConds(r.b.Conds, reqs[:i]); r.err != nil {
				continue
			}
		}
		for j := range r.b.Ops {
			op := &r.b.Ops[j]
			keepOrder = keepOrder || op.Kind == store.OpDeleteRange
			sorted = append(sorted, op)
		}
	}
	if !keepOrder {
		c.sortTmp = sortOps(sorted, c.sortTmp)
	}
	err := encode(pb, sorted)
	clear(sorted) // keep no caller's keys and values alive
	c.sorted = sorted[:0]
	if err == nil {
		c.s.fs.busy.Store(ops >= ringMinOps)
		if err = c.s.db.Apply(pb, pebble.Sync); err != nil {
			err = fmt.Errorf("store/pebble: commit of %d batches: %w", len(reqs), err)
		}
	}
	_ = pb.Close() // Pebble's buffer; keys and values are in the memtable now
	if err == nil {
		c.s.commits.Add(uint64(len(reqs)))
		c.s.ops.Add(uint64(ops))
		c.s.bytes.Add(uint64(bytes))
		if f := c.s.opts.OnCommit; f != nil {
			f(ops, time.Since(since))
		}
		if c.s.watches.Active() {
			for _, r := range reqs {
				if r.err == nil {
					c.s.watches.Notify(r.b.Ops)
				}
			}
		}
	}
	c.mu.Lock()
	pending = len(c.pending)
	c.mu.Unlock()
	for _, r := range reqs {
		if r.err == nil {
			r.err = err
		}
		r.done <- struct{}{}
	}
	if f := c.s.opts.afterRelease; f != nil {
		f()
	}
	return pending
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

// sortOps orders a group's operations by key, keeping the order of those on
// one key (a stable sort), which is all their outcome depends on when the
// group has no range deletion (a range deletion and the point operations it
// covers keep the callers' order: commitGroup does not sort those groups).
//
// Why: Pebble inserts a batch into its memtable (a skiplist) in the batch's
// order, and each insertion starts its search from where the previous one
// ended when the new key is near it. A group interleaves the callers' keys
// (a message's index and body records, other queues' records), so in the
// callers' order nearly every insertion searched the whole skiplist from
// the top: about 6% of the broker's CPU on the session benchmark (W4).
//
// A stable sort (slices.SortStableFunc) took 2% of the broker's CPU on W4;
// pattern-defeating quicksort over (key, position) pairs gives the same
// order for less. tmp is scratch, returned for reuse.
func sortOps(ops []*store.Op, tmp []groupOp) []groupOp {
	tmp = tmp[:0]
	for i, op := range ops {
		tmp = append(tmp, groupOp{op, i})
	}
	slices.SortFunc(tmp, func(a, b groupOp) int {
		if c := bytes.Compare(a.op.Key, b.op.Key); c != 0 {
			return c
		}
		return a.i - b.i
	})
	for i := range tmp {
		ops[i] = tmp[i].op
	}
	clear(tmp)
	return tmp[:0]
}

// groupOp is an operation and its position in the group.
type groupOp struct {
	op *store.Op
	i  int
}

// encode appends ops to pb in order. Pebble copies keys and values into the
// batch, so the callers may reuse their slices once Commit returns.
func encode(pb *pebble.Batch, ops []*store.Op) error {
	for _, op := range ops {
		var err error
		switch op.Kind {
		case store.OpSet:
			if len(op.Head) == 0 {
				err = pb.Set(op.Key, op.Value, nil)
				break
			}
			d := pb.SetDeferred(len(op.Key), len(op.Head)+len(op.Value))
			copy(d.Key, op.Key)
			copy(d.Value[copy(d.Value, op.Head):], op.Value)
			err = d.Finish()
		case store.OpDelete:
			if op.Once {
				// Pebble drops a SET and a SINGLEDEL when they meet in a
				// flush or compaction: a message written and completed
				// within one memtable never reaches a table file, not
				// even as a tombstone.
				err = pb.SingleDelete(op.Key, nil)
			} else {
				err = pb.Delete(op.Key, nil)
			}
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
