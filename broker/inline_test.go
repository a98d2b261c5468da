package broker

import (
	"testing"
)

// keys counts the message and body keys of entity id in the store.
func (e *env) keys(id uint64) (msgs, bodies int) {
	e.t.Helper()
	for kind, n := range map[byte]*int{kMessage: &msgs, kBody: &bodies} {
		start, end := prefixRange(kind, id)
		e.must(e.st.Scan(e.ctx, start, end, func(_, _ []byte) error { *n++; return nil }))
	}
	return msgs, bodies
}

// A message placed active is one store entry (its record inline); the
// first rewrite splits it into its index record and its body record, in
// one commit, and every reader finds the message either way: a delivery
// from the store (after a restart, nothing cached), a peek, a receive of a
// deferred message, a dead-lettering.
func TestInlineRecordSplitsOnItsFirstRewrite(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxDeliveryCount: 10})
	id, _ := e.b.Dormant("q")
	e.send("q", msg("kept"), msg("abandoned"), msg("deferred"), msg("dead"))
	if m, b := e.keys(id); m != 4 || b != 0 {
		t.Fatalf("after the sends: %d message keys, %d body keys; want 4 and 0", m, b)
	}

	e.restart() // nothing cached: what follows reads the store
	got := e.locked("q", 4)
	wantBodies(t, got, "kept", "abandoned", "deferred", "dead")
	e.must(e.b.Abandon(e.ctx, "q", nil, got[1].LockToken))
	e.must(e.b.Defer(e.ctx, "q", nil, got[2].LockToken))
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "d", nil, got[3].LockToken))
	e.must(e.b.Abandon(e.ctx, "q", nil, got[0].LockToken))
	if m, b := e.keys(id); m != 4 || b != 4 {
		t.Fatalf("after a rewrite of each: %d message keys, %d body keys; want 4 and 4", m, b)
	}
	mustHoldInvariants(t, e.b)

	e.restart()
	peeked, err := e.b.Peek(e.ctx, "q", 0, 10)
	e.must(err)
	wantBodies(t, peeked, "kept", "abandoned", "deferred")
	deferred, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{peeked[2].SequenceNumber}, PeekLock)
	e.must(err)
	wantBodies(t, deferred, "deferred")
	again := e.locked("q", 2)
	wantBodies(t, again, "kept", "abandoned")
	if again[1].DeliveryCount != 1 {
		t.Errorf("the abandoned message's delivery count is %d, want 1 (its abandoned delivery)", again[1].DeliveryCount)
	}
	e.must(e.b.Complete(e.ctx, "q", again[0].LockToken, again[1].LockToken, deferred[0].LockToken))
	wantBodies(t, e.receive("q/$DeadLetterQueue", ReceiveAndDelete, 10), "dead")
	if m, b := e.keys(id); m != 0 || b != 0 {
		t.Fatalf("after completing everything: %d message keys, %d body keys left", m, b)
	}
}

// An inline message read back whole: its record after the index record
// round-trips, and a truncated or empty one is refused.
func TestInlineMetaRecord(t *testing.T) {
	mm := msgMeta{sub: SubqueueMain, enqueued: 7, bodyRef: 3, size: 2, sessionID: "s", inline: true}
	rec := []byte("message record")
	v := append(appendMeta(nil, &mm), rec...)
	got, gotRec, err := decodeMetaRecord(v)
	if err != nil || got != mm || string(gotRec) != string(rec) {
		t.Fatalf("decodeMetaRecord = %+v, %q, %v; want %+v, %q", got, gotRec, err, mm, rec)
	}
	if _, _, err := decodeMetaRecord(appendMeta(nil, &mm)); err == nil {
		t.Error("an inline index record without its message was accepted")
	}
	mm.inline = false
	if _, _, err := decodeMetaRecord(append(appendMeta(nil, &mm), 'x')); err == nil {
		t.Error("a plain index record with trailing bytes was accepted")
	}
}
