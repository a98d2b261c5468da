package broker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store/pebble"
)

// TestDeleteOnceLeavesNothingBehindOnPebble drives every way a message's
// records are written again — abandon with properties, deferral and its
// receive, dead-lettering, scheduling and activation — and every way they
// are deleted, on the embedded store with a memtable small enough to flush
// and compact many times, restarting now and then. A message deleted with
// the store's delete-once after a second write could come back: nothing may
// remain, and Pebble must report no single delete that met a key written
// twice.
func TestDeleteOnceLeavesNothingBehindOnPebble(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	var st *pebble.Store
	var b *Broker
	misuses := uint64(0)
	open := func() {
		var err error
		if st, err = pebble.Open(dir, pebble.Options{MemTableSize: 256 << 10, Linger: -1}); err != nil {
			t.Fatal(err)
		}
		if b, err = Open(ctx, st, Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
	}
	closeAll := func() {
		b.Close()
		misuses += st.SingleDeleteMisuses()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	receive := func(path string, n int) []*Message {
		t.Helper()
		s := &sink{}
		c, err := b.NewConsumer(ctx, path, ConsumerOptions{Mode: PeekLock, Deliver: s.deliver})
		must(err)
		c.AddCredit(n)
		c.Drain()
		c.Close()
		return s.take()
	}
	complete := func(path string, ms []*Message) {
		t.Helper()
		for _, m := range ms {
			must(b.Complete(ctx, path, m.LockToken))
		}
	}
	open()
	must(b.CreateQueue(ctx, "q", QueueProperties{MaxDeliveryCount: 100}))
	body := make([]byte, 4<<10)
	const rounds, perRound = 30, 40
	for r := range rounds {
		var ms []*Message
		for i := range perRound {
			ms = append(ms, &Message{Body: body, MessageID: fmt.Sprintf("%d-%d", r, i)})
		}
		must(b.Send(ctx, "q", ms))
		_, err := b.Schedule(ctx, "q", clk.Now().Add(time.Second), []*Message{{Body: body}, {Body: body}})
		must(err)
		got := receive("q", perRound)
		if len(got) != perRound {
			t.Fatalf("round %d: received %d of %d", r, len(got), perRound)
		}
		var deferred []int64
		for i, m := range got {
			switch i % 4 {
			case 0:
				must(b.Complete(ctx, "q", m.LockToken))
			case 1:
				must(b.Abandon(ctx, "q", map[string]any{"round": int64(r)}, m.LockToken))
			case 2:
				must(b.Defer(ctx, "q", nil, m.LockToken))
				deferred = append(deferred, m.SequenceNumber)
			case 3:
				must(b.DeadLetter(ctx, "q", "test", "dead-lettered by the test", nil, m.LockToken))
			}
		}
		complete("q", receive("q", perRound)) // the abandoned ones, rewritten with a property
		d, err := b.ReceiveDeferred(ctx, "q", deferred, PeekLock)
		must(err)
		complete("q", d)
		complete("q/$DeadLetterQueue", receive("q/$DeadLetterQueue", perRound))
		clk.Advance(2 * time.Second) // the scheduled ones activate
		complete("q", receive("q", perRound))
		if r%10 == 9 {
			closeAll()
			open()
		}
	}
	qi, err := b.GetQueue(ctx, "q")
	must(err)
	if rt := qi.Runtime; rt.TotalMessageCount != 0 || rt.SizeInBytes != 0 {
		t.Fatalf("after the rounds the queue holds %+v", rt)
	}
	mustHoldInvariants(t, b)
	closeAll()
	// Reopened from disk, after all those flushes and compactions,
	// nothing may have come back.
	open()
	defer closeAll()
	qi, err = b.GetQueue(ctx, "q")
	must(err)
	if rt := qi.Runtime; rt.TotalMessageCount != 0 || rt.SizeInBytes != 0 {
		t.Fatalf("after a restart the queue holds %+v", rt)
	}
	mustHoldInvariants(t, b)
	if misuses != 0 {
		t.Fatalf("Pebble reported %d single deletes that met a key written more than once", misuses)
	}
}
