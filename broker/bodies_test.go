package broker

import (
	"fmt"
	"testing"
	"time"
)

// A consumer catching up on a backlog the cache does not hold reads its
// deliveries' bodies together: one store call per run of deliveries that
// flush hands out at once (flushRun), none per message; a message whose
// records a rewrite split is read from its body key at once, and with a
// second read when the split was not yet known. A receive-and-delete
// and a receive of deferred messages read theirs with one call each. Every
// body and property arrives, in order.
func TestBacklogBodiesAreReadTogether(t *testing.T) {
	e, fs := newFlakyEnv(t) // caches nothing
	e.queue("q", QueueProperties{LockDuration: time.Minute, MaxDeliveryCount: 10})
	const n = 3*flushRun + 4
	ms := make([]*Message, n)
	want := make([]string, n)
	for i := range ms {
		want[i] = fmt.Sprintf("m%03d", i)
		ms[i] = msg(want[i])
	}
	e.send("q", ms...)
	// Abandoned with a property, the first three are rewritten: their
	// records split into an index record and a body record.
	first := e.locked("q", 3)
	e.must(e.b.Abandon(e.ctx, "q", map[string]any{"k": "v"}, first[0].LockToken, first[1].LockToken, first[2].LockToken))

	reset := func() {
		fs.gets.Store(0)
		fs.getManys.Store(0)
		fs.manyKeys.Store(0)
	}
	wantReads := func(what string, calls, keys int64) {
		t.Helper()
		if g, c, k := fs.gets.Load(), fs.getManys.Load(), fs.manyKeys.Load(); g != 0 || c != calls || k != keys {
			t.Fatalf("%s: %d single reads, %d batched reads of %d keys; want 0, %d, %d", what, g, c, k, calls, keys)
		}
	}
	reset()
	got := e.receive("q", PeekLock, n)
	wantBodies(t, got, want...)
	fresh := got[n-1].DeliveryCount
	for i, m := range got {
		abandoned := i < 3
		if (m.Properties["k"] == "v") != abandoned || (m.DeliveryCount == fresh+1) != abandoned {
			t.Fatalf("message %d: properties %v, delivery count %d (a fresh message's: %d)", i, m.Properties, m.DeliveryCount, fresh)
		}
	}
	wantReads("a peek-lock backlog", 4, n)

	// Stamped before its rewrite committed, a delivery of a split message
	// looks for its record in its index record first, then at its body key.
	ent, _, err := e.b.resolve("q")
	e.must(err)
	ent.q.mu.Lock()
	m := ent.q.msgs[uint64(got[0].SequenceNumber)]
	split := m.split
	ent.q.mu.Unlock()
	if !split {
		t.Fatal("an abandoned message with a new property is not split")
	}
	reset()
	bases, errs := e.b.loadBodies(e.ctx, []*lazyBody{{eid: ent.id, m: m}})
	if errs[0] != nil || string(bases[0].Body) != want[0] || bases[0].Properties["k"] != "v" {
		t.Fatalf("a split message read as unsplit: %v, %v", bases[0], errs[0])
	}
	wantReads("a split message read as unsplit", 2, 2)

	e.queue("rd", QueueProperties{})
	e.send("rd", ms[:40]...)
	reset()
	wantBodies(t, e.receive("rd", ReceiveAndDelete, 40), want[:40]...)
	wantReads("a receive-and-delete backlog", 1, 40)

	e.queue("d", QueueProperties{LockDuration: time.Minute})
	e.send("d", ms[:5]...)
	locked := e.locked("d", 5)
	seqs := make([]int64, len(locked))
	for i, m := range locked {
		e.must(e.b.Defer(e.ctx, "d", nil, m.LockToken))
		seqs[i] = m.SequenceNumber
	}
	reset()
	deferred, err := e.b.ReceiveDeferred(e.ctx, "d", seqs, ReceiveAndDelete)
	e.must(err)
	wantBodies(t, deferred, want[:5]...)
	wantReads("deferred messages", 1, 5)
}

// A session receiver that asks for one message at a time, on a session
// whose bodies are not cached, reads the session's next messages with its
// first: one store call for the ten, not ten. What was read ahead goes
// with the session's lock: the next holder reads again.
func TestSessionDeliveriesReadTheirSessionAhead(t *testing.T) {
	e, fs := newFlakyEnv(t) // caches nothing
	e.queue("q", QueueProperties{RequiresSession: true, LockDuration: time.Minute})
	want := make([]string, 10)
	for i := range want {
		want[i] = fmt.Sprintf("s%d", i)
		e.send("q", &Message{SessionID: "s", Body: []byte(want[i]), Properties: map[string]any{"i": int64(i)}})
	}
	var got []*Message
	// receive takes n messages one at a time on c, completing each.
	receive := func(c *Consumer, sk *sink, n int) {
		t.Helper()
		for range n {
			c.AddCredit(1)
			m := sk.takeN(t, 1)[0]
			e.must(e.b.Complete(e.ctx, "q", m.LockToken))
			got = append(got, m)
		}
	}
	c, sk := e.accept("q", "s")
	receive(c, sk, 3)
	if n, k := fs.getManys.Load(), fs.manyKeys.Load(); n != 1 || k != 10 {
		t.Fatalf("three deliveries read %d times, %d keys; want once, the session's ten", n, k)
	}
	// A new holder of the session reads again.
	e.must(c.Close())
	c, sk = e.accept("q", "s")
	receive(c, sk, 7)
	if n, k := fs.getManys.Load(), fs.manyKeys.Load(); n != 2 || k != 17 {
		t.Fatalf("after the session changed hands: %d reads of %d keys; want 2 and 17", n, k)
	}
	wantBodies(t, got, want...)
	for i, m := range got {
		if m.Properties["i"] != int64(i) || m.SessionID != "s" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
}
