package servicebus_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
)

// Every settlement of a peek-lock delivery, over the receiving link.
func TestSettlementPaths(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{MaxDeliveryCount: 5})
	c := e.client()
	ctx := testCtx(t)
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("abandon merges properties and counts a delivery", func(t *testing.T) {
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte("a")})
		m := receiveN(t, r, 1)[0]
		if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"hello": "world"}}); err != nil {
			t.Fatal(err)
		}
		m2 := receiveN(t, r, 1)[0]
		if m2.DeliveryCount != 2 || m2.ApplicationProperties["hello"] != "world" || string(m2.Body) != "a" {
			t.Fatalf("redelivered: count %d props %v body %q", m2.DeliveryCount, m2.ApplicationProperties, m2.Body)
		}
		if err := r.CompleteMessage(ctx, m2, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("defer then receive deferred and complete", func(t *testing.T) {
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte("d")})
		m := receiveN(t, r, 1)[0]
		if err := r.DeferMessage(ctx, m, &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"why": "later"}}); err != nil {
			t.Fatal(err)
		}
		peeked, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: m.SequenceNumber})
		if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateDeferred {
			t.Fatalf("peek deferred: %v %+v", err, peeked)
		}
		got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("receive deferred: %v, %d messages", err, len(got))
		}
		d := got[0]
		if d.State != azservicebus.MessageStateDeferred || d.ApplicationProperties["why"] != "later" || d.LockToken == [16]byte{} {
			t.Fatalf("deferred message: state %v props %v lock %v", d.State, d.ApplicationProperties, d.LockToken)
		}
		// Deferred messages settle over $management.
		if err := r.CompleteMessage(ctx, d, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil); sbCode(err) != azservicebus.CodeNotFound {
			t.Fatalf("receive a completed deferred message: %v, want CodeNotFound", err)
		}
	})

	t.Run("dead-letter with reason, description and properties", func(t *testing.T) {
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte("x")})
		m := receiveN(t, r, 1)[0]
		if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
			Reason: ptr("bad"), ErrorDescription: ptr("very bad"), PropertiesToModify: map[string]any{"k": int64(3)},
		}); err != nil {
			t.Fatal(err)
		}
		dlq, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
		if err != nil {
			t.Fatal(err)
		}
		d := receiveN(t, dlq, 1)[0]
		if *d.DeadLetterReason != "bad" || *d.DeadLetterErrorDescription != "very bad" || d.ApplicationProperties["k"] != int64(3) || d.DeliveryCount != 1 {
			t.Fatalf("dead letter: reason %v desc %v props %v count %d", d.DeadLetterReason, d.DeadLetterErrorDescription, d.ApplicationProperties, d.DeliveryCount)
		}
		if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("renew lock", func(t *testing.T) {
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte("r")})
		m := receiveN(t, r, 1)[0]
		before := *m.LockedUntil
		if err := r.RenewMessageLock(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if m.LockedUntil.Before(before) {
			t.Fatalf("renewed lock %v is before %v", m.LockedUntil, before)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.RenewMessageLock(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
			t.Fatalf("renew after complete: %v, want CodeLockLost", err)
		}
	})

	t.Run("receive and delete", func(t *testing.T) {
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte("rd")})
		rd, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, rd, 1)[0]
		if string(m.Body) != "rd" {
			t.Fatalf("body %q", m.Body)
		}
		if ps, err := rd.PeekMessages(ctx, 10, nil); err != nil || len(ps) != 0 {
			t.Fatalf("peek after receive-and-delete: %v, %d messages", err, len(ps))
		}
	})
}

// A lock that expired (on the broker's clock) is lost: settling it fails
// with CodeLockLost, and the message is delivered again.
func TestLockExpiry(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := newEnv(t, envOptions{clock: clk})
	e.queue("q", broker.QueueProperties{LockDuration: 30 * time.Second})
	c := e.client()
	ctx := testCtx(t)
	mustSend(t, c, "q", &azservicebus.Message{Body: []byte("x")})
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if want := clk.Now().Add(30 * time.Second); !m.LockedUntil.Equal(want.Truncate(time.Millisecond)) {
		t.Fatalf("locked until %v, want %v", m.LockedUntil, want)
	}
	clk.Advance(31 * time.Second)
	if err := r.CompleteMessage(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("complete after lock expiry: %v, want CodeLockLost", err)
	}
	again := receiveN(t, r, 1)[0]
	if again.DeliveryCount != 2 || *again.SequenceNumber != *m.SequenceNumber {
		t.Fatalf("redelivery: count %d seq %d", again.DeliveryCount, *again.SequenceNumber)
	}
}

// Messages received by sequence number settle over $management: every
// disposition-status the SDK sends.
func TestSettleOverManagement(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	c := e.client()
	ctx := testCtx(t)
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	deferred := func(body string) *azservicebus.ReceivedMessage {
		t.Helper()
		mustSend(t, c, "q", &azservicebus.Message{Body: []byte(body)})
		m := receiveN(t, r, 1)[0]
		if err := r.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("receive deferred %s: %v", body, err)
		}
		return got[0]
	}

	// "defered" (sic) keeps it deferred, with the properties merged.
	m := deferred("again")
	if err := r.DeferMessage(ctx, m, &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"n": int64(2)}}); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 || got[0].ApplicationProperties["n"] != int64(2) {
		t.Fatalf("deferred twice: %v %+v", err, got)
	}
	// "abandoned" of a deferred message counts a delivery and keeps it deferred.
	if err := r.AbandonMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: m.SequenceNumber})
	if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateDeferred || peeked[0].DeliveryCount != got[0].DeliveryCount+1 {
		t.Fatalf("after abandon: %v %+v", err, peeked)
	}

	// "suspended" dead-letters with the reason and description.
	d := deferred("dead")
	if err := r.DeadLetterMessage(ctx, d, &azservicebus.DeadLetterOptions{Reason: ptr("why"), ErrorDescription: ptr("because")}); err != nil {
		t.Fatal(err)
	}
	dlq, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	dl := receiveN(t, dlq, 1)[0]
	if string(dl.Body) != "dead" || *dl.DeadLetterReason != "why" || *dl.DeadLetterErrorDescription != "because" {
		t.Fatalf("dead letter %q %v %v", dl.Body, dl.DeadLetterReason, dl.DeadLetterErrorDescription)
	}
	// A lock token that is no longer valid is lost (410).
	if err := r.CompleteMessage(ctx, d, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("complete of a dead-lettered message: %v, want CodeLockLost", err)
	}
}
