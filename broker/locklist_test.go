package broker

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLockListAgainstModel inserts and removes nodes at random and checks,
// after every step, that the list runs head to tail in expiry order (ties
// in insertion order), back links mirror forward links, and it holds
// exactly the nodes a plain slice model holds.
func TestLockListAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var head, tail *msgIdx
	var model []*msgIdx // in list order
	nodes := make([]*msgIdx, 200)
	for i := range nodes {
		nodes[i] = &msgIdx{seq: uint64(i), lk: &msgLock{}}
	}
	in := map[*msgIdx]bool{}
	for step := 0; step < 20000; step++ {
		n := nodes[r.IntN(len(nodes))]
		if in[n] {
			unlinkSorted(&head, &tail, n)
			model = slices.DeleteFunc(model, func(x *msgIdx) bool { return x == n })
			delete(in, n)
		} else {
			n.lk.until = int64(step/4 + r.IntN(8)) // mostly growing, with ties and reorders
			wasHead := linkSorted(&head, &tail, n)
			at := len(model)
			for at > 0 && model[at-1].lk.until > n.lk.until {
				at--
			}
			model = slices.Insert(model, at, n)
			in[n] = true
			if wasHead != (model[0] == n) {
				t.Fatalf("step %d: linkSorted reported head=%v, model head is %v", step, wasHead, model[0] == n)
			}
		}
		var got []*msgIdx
		var prev *msgIdx
		for x := head; x != nil; x = x.lk.next {
			if x.lk.prev != prev {
				t.Fatalf("step %d: broken back link at seq %d", step, x.seq)
			}
			got, prev = append(got, x), x
		}
		if tail != prev || !slices.Equal(got, model) {
			t.Fatalf("step %d: list %v (tail ok %v), model %v", step, seqsOf(got), tail == prev, seqsOf(model))
		}
	}
	// Removing a node that is not in the list changes nothing.
	outside := msgIdx{lk: &msgLock{}}
	unlinkSorted(&head, &tail, &outside)
	n := 0
	for x := head; x != nil; x = x.lk.next {
		n++
	}
	if n != len(model) {
		t.Fatalf("unlinking a stranger changed the list: %d nodes, want %d", n, len(model))
	}
}

func seqsOf(ms []*msgIdx) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.seq
	}
	return out
}
