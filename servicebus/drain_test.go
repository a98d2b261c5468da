package servicebus_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
)

// A drain delivers what the queue has, up to the credit, and then gives
// up the rest of the credit (as JS's batching receiver uses it).
func TestDrain(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("1")}, &azservicebus.Message{Body: []byte("2")})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: -1, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	first, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{string(first.GetData())}
	if err := r.AcceptMessage(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The link holds unused credit, which the drain gives up after
	// delivering what is there.
	drainCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.DrainCredit(drainCtx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	for {
		m := r.Prefetched()
		if m == nil {
			break
		}
		got = append(got, string(m.GetData()))
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// go-amqp drains with link-credit 0, revoking its credit at once, so
	// the second message may still be on its way: more credit brings the
	// rest, in order and without loss.
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("3")})
	if err := r.IssueCredit(uint32(3 - len(got))); err != nil {
		t.Fatal(err)
	}
	for len(got) < 3 {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(m.GetData()))
		if err := r.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if got[0] != "1" || got[1] != "2" || got[2] != "3" {
		t.Fatalf("received %v, want [1 2 3]", got)
	}
}

// The released outcome (the Go SDK's releaser) makes the message available
// again at once.
func TestReleased(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("1")})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq := m.Annotations["x-opt-sequence-number"]
	if err := r.ReleaseMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	again, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Annotations["x-opt-sequence-number"] != seq || string(again.GetData()) != "1" {
		t.Fatalf("after release got %v %q, want sequence %v", again.Annotations["x-opt-sequence-number"], again.GetData(), seq)
	}
	if err := r.AcceptMessage(ctx, again); err != nil {
		t.Fatal(err)
	}
}
