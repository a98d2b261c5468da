package broker

import (
	"slices"
	"sync/atomic"
)

// Publication in sequence order.
//
// Sends are decided under a queue's lock, where each message of the main
// subqueue takes its sequence number, and committed outside it, so two
// producers' commits may finish in either order: producer A decides 5,
// producer B decides 6, B's fsync returns first. Were B's message made
// available at once, a receiver could get 6 before 5 — within a session,
// a break of the session's FIFO promise. So a queue (or subscription) keeps
// the sequence numbers decided and not yet published or aborted (pend), and
// a committed message with a lower pending number ahead of it is held until
// that number is published or aborted. Both lists are short: they hold the
// sends between decision and publication, about one group commit's worth.
//
// Numbers enter pend in ascending order because they are taken and entered
// under one lock: a queue's own lock for its sends (place), the topic's
// queue lock for the numbers a topic gives its subscriptions' copies
// (fanout). A scheduled message that becomes active takes a new number,
// under the queue's lock, and enters it too (activate); committed, it is
// held behind a lower number still pending like a send (runMoves), so a
// send decided just before an activation is not overtaken by it. (The
// activation of a topic's or a forwarding queue's message becomes a send
// to its destination, and takes its numbers there.)
type pubOrder struct {
	pend []uint64     // decided, not yet published or aborted; ascending
	held []*placement // committed, waiting for a lower pending number; ascending by seq
}

// enter records a decided sequence number; q.mu is held.
func (o *pubOrder) enter(seq uint64) {
	if n := len(o.pend); n == 0 || o.pend[n-1] < seq {
		o.pend = append(o.pend, seq)
		return
	}
	i, _ := slices.BinarySearch(o.pend, seq)
	o.pend = slices.Insert(o.pend, i, seq)
}

// leave forgets a sequence number published or aborted; q.mu is held.
func (o *pubOrder) leave(seq uint64) {
	if i, ok := slices.BinarySearch(o.pend, seq); ok {
		o.pend = slices.Delete(o.pend, i, i+1)
	}
}

// waits reports whether a committed message seq must wait for a lower
// number still pending; q.mu is held.
func (o *pubOrder) waits(seq uint64) bool { return len(o.pend) > 0 && o.pend[0] < seq }

// hold keeps a committed placement until waits is false for it; q.mu is held.
func (o *pubOrder) hold(p *placement) {
	i, _ := slices.BinarySearchFunc(o.held, p.m.seq, func(h *placement, seq uint64) int {
		switch {
		case h.m.seq < seq:
			return -1
		case h.m.seq > seq:
			return 1
		}
		return 0
	})
	o.held = slices.Insert(o.held, i, p)
	p.vis.held()
}

// due removes and returns the held placements nothing pending precedes any
// more, in sequence order; q.mu is held.
func (o *pubOrder) due() []*placement {
	n := 0
	for n < len(o.held) && !o.waits(o.held[n].m.seq) {
		n++
	}
	if n == 0 {
		return nil
	}
	out := slices.Clone(o.held[:n])
	o.held = slices.Delete(o.held, 0, n)
	return out
}

// visibility counts a txn's placements not yet available, so that its
// caller learns of its success only once every message can be received:
// n is 1 while the txn's own publication runs, plus one per held placement.
type visibility struct {
	n  atomic.Int32
	ch chan struct{} // made at the first hold, by the txn's own publication; closed when n reaches 0
}

// held counts a placement held back; q.mu is held, on the txn's own
// publication.
func (v *visibility) held() {
	if v.ch == nil {
		v.ch = make(chan struct{})
	}
	v.n.Add(1)
}

// done counts one reason less to wait, and wakes the waiter at the last.
func (v *visibility) done() {
	if v.n.Add(-1) == 0 && v.ch != nil {
		close(v.ch)
	}
}

// gate is a sequence number a txn entered in a queue's pubOrder.
type gate struct {
	q   *qstate
	seq uint64
}

// enterOrder enters seq in q's publication order on behalf of tx; q.mu is
// held.
func (tx *txn) enterOrder(q *qstate, seq uint64) {
	q.order.enter(seq)
	tx.gates = append(tx.gates, gate{q, seq})
}
