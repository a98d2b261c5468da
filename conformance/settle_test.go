package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Peek-lock settlement, peek, locks and the dead-letter queue.

var abandonQueue = declareQueue("abandon", admin.QueueProperties{})

// TestAbandonWithProperties: an abandoned message is redelivered with the
// properties the abandon modified and DeliveryCount 2.
func TestAbandonWithProperties(t *testing.T) {
	t.Parallel()
	q := abandonQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), &azservicebus.Message{Body: []byte("retry me"), ApplicationProperties: map[string]any{"kept": "yes"}})
	r := newQueueReceiver(t, c, q, nil)
	first := receiveOne(t, r)
	err := r.AbandonMessage(ctxFor(t, opTimeout), first, &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"abandonReason": "transient", "attempt": int64(1)},
	})
	if err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	again := receiveOne(t, r)
	if seq(again) != seq(first) || string(again.Body) != "retry me" {
		t.Fatalf("after abandon received %q (seq %d), want %q (seq %d)", again.Body, seq(again), "retry me", seq(first))
	}
	if again.DeliveryCount != 2 {
		t.Errorf("DeliveryCount %d after one abandon, want 2", again.DeliveryCount)
	}
	for k, want := range map[string]any{"abandonReason": "transient", "attempt": int64(1), "kept": "yes"} {
		if got := again.ApplicationProperties[k]; got != want {
			t.Errorf("application property %q = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
	complete(t, r, again)
}

var deferQueue = declareQueue("defer", admin.QueueProperties{})

// TestDeferAndReceiveDeferred: a deferred message leaves the normal
// delivery order, stays visible to peek in state Deferred, and is received
// by its sequence number.
func TestDeferAndReceiveDeferred(t *testing.T) {
	t.Parallel()
	q := deferQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("later"), textMessage("now"))
	r := newQueueReceiver(t, c, q, nil)
	first := receiveOne(t, r)
	if string(first.Body) != "later" {
		t.Fatalf("first message %q, want %q", first.Body, "later")
	}
	if err := r.DeferMessage(ctxFor(t, opTimeout), first, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	next := receiveOne(t, r)
	if string(next.Body) != "now" {
		t.Fatalf("after deferring, received %q, want %q", next.Body, "now")
	}
	complete(t, r, next)

	peeked := peekAll(t, r)
	if len(peeked) != 1 || seq(peeked[0]) != seq(first) || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek found %q (seqs %v, states %v), want the deferred message (seq %d) in state Deferred",
			bodies(peeked), seqsOf(peeked), statesOf(peeked), seq(first))
	}

	deferred, err := r.ReceiveDeferredMessages(ctxFor(t, opTimeout), []int64{seq(first)}, nil)
	if err != nil {
		t.Fatalf("ReceiveDeferredMessages: %v", err)
	}
	if len(deferred) != 1 || string(deferred[0].Body) != "later" {
		t.Fatalf("ReceiveDeferredMessages returned %q, want [%q]", bodies(deferred), "later")
	}
	if deferred[0].State != azservicebus.MessageStateDeferred {
		t.Errorf("deferred message has State %v, want Deferred", deferred[0].State)
	}
	if deferred[0].DeliveryCount != 2 {
		t.Errorf("deferred message received by sequence number has DeliveryCount %d, want 2 (receiving it is a second delivery)", deferred[0].DeliveryCount)
	}
	if deferred[0].LockedUntil == nil || !deferred[0].LockedUntil.After(time.Now()) {
		t.Errorf("deferred message LockedUntil %v, want a lock in the future", deferred[0].LockedUntil)
	}
	complete(t, r, deferred[0])
	requireEmpty(t, r, "after completing the deferred message")
}

var deadLetterQueue = declareQueue("dead-letter", admin.QueueProperties{})

// TestDeadLetterWithReason: a dead-lettered message leaves the queue and
// is received from its dead-letter queue with the reason and description.
func TestDeadLetterWithReason(t *testing.T) {
	t.Parallel()
	q := deadLetterQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), &azservicebus.Message{Body: []byte("poison"), MessageID: ptr("poison-1")})
	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	err := r.DeadLetterMessage(ctxFor(t, opTimeout), m, &azservicebus.DeadLetterOptions{
		Reason:           ptr("InvalidPayload"),
		ErrorDescription: ptr("the payload is not JSON"),
	})
	if err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	requireEmpty(t, r, "the queue after dead-lettering")

	dlq := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dm := receiveOne(t, dlq)
	if string(dm.Body) != "poison" || dm.MessageID != "poison-1" {
		t.Fatalf("dead-letter queue delivered %q (id %q), want %q (id %q)", dm.Body, dm.MessageID, "poison", "poison-1")
	}
	if strValue(dm.DeadLetterReason) != "InvalidPayload" {
		t.Errorf("DeadLetterReason %q, want %q", strValue(dm.DeadLetterReason), "InvalidPayload")
	}
	if strValue(dm.DeadLetterErrorDescription) != "the payload is not JSON" {
		t.Errorf("DeadLetterErrorDescription %q, want %q", strValue(dm.DeadLetterErrorDescription), "the payload is not JSON")
	}
	complete(t, dlq, dm)
	requireEmpty(t, dlq, "the dead-letter queue after completing")
}

var peekQueue = declareQueue("peek", admin.QueueProperties{})

// TestPeek: peek reads messages in sequence order without locking them,
// continues where it stopped, and starts at FromSequenceNumber.
func TestPeek(t *testing.T) {
	t.Parallel()
	q := peekQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("p0"), textMessage("p1"), textMessage("p2"))
	r := newQueueReceiver(t, c, q, nil)

	firstTwo, err := r.PeekMessages(ctxFor(t, opTimeout), 2, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if want := []string{"p0", "p1"}; !equalStrings(bodies(firstTwo), want) {
		t.Fatalf("first peek %q, want %q", bodies(firstTwo), want)
	}
	if seq(firstTwo[1]) <= seq(firstTwo[0]) {
		t.Errorf("peeked sequence numbers %v not increasing", seqsOf(firstTwo))
	}
	for _, m := range firstTwo {
		if m.LockToken != [16]byte{} || m.LockedUntil != nil {
			t.Errorf("peeked %q carries a lock (token %x, until %v)", m.Body, m.LockToken, m.LockedUntil)
		}
	}
	rest, err := r.PeekMessages(ctxFor(t, opTimeout), 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages (continuing): %v", err)
	}
	if want := []string{"p2"}; !equalStrings(bodies(rest), want) {
		t.Fatalf("continued peek %q, want %q", bodies(rest), want)
	}
	from, err := r.PeekMessages(ctxFor(t, opTimeout), 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: firstTwo[1].SequenceNumber})
	if err != nil {
		t.Fatalf("PeekMessages(FromSequenceNumber): %v", err)
	}
	if want := []string{"p1", "p2"}; !equalStrings(bodies(from), want) {
		t.Fatalf("peek from sequence number %d: %q, want %q", seq(firstTwo[1]), bodies(from), want)
	}
	// Peeking neither locked nor counted a delivery.
	got := receiveN(t, r, 3, receiveTimeout)
	for _, m := range got {
		if m.DeliveryCount != 1 {
			t.Errorf("%q: DeliveryCount %d after peeks, want 1", m.Body, m.DeliveryCount)
		}
	}
	complete(t, r, got...)
}

var renewLockQueue = declareQueue("renew-lock", admin.QueueProperties{LockDuration: ptr("PT5S")})

// TestRenewMessageLock: RenewMessageLock moves LockedUntil forward, and a
// message kept renewed past its original lock can still be completed.
func TestRenewMessageLock(t *testing.T) {
	t.Parallel()
	q := renewLockQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("long job"))
	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	original := *m.LockedUntil
	deadline := original.Add(1500 * time.Millisecond)
	last := original
	for time.Now().Before(deadline) {
		time.Sleep(time.Second) // the work being done between renewals
		if err := r.RenewMessageLock(ctxFor(t, opTimeout), m, nil); err != nil {
			t.Fatalf("RenewMessageLock: %v", err)
		}
		if m.LockedUntil == nil || !m.LockedUntil.After(last) {
			t.Fatalf("LockedUntil %v after renewal, want later than %v", m.LockedUntil, last)
		}
		last = *m.LockedUntil
	}
	// The original lock has expired by now; the renewed one holds.
	complete(t, r, m)
	requireEmpty(t, r, "after completing a renewed message")
}

var lockExpiryQueue = declareQueue("lock-expiry", admin.QueueProperties{LockDuration: ptr("PT5S")})

// TestLockExpiry: when a lock expires the message is redelivered with
// DeliveryCount 2, and settling with the expired lock fails with
// CodeLockLost.
func TestLockExpiry(t *testing.T) {
	t.Parallel()
	q := lockExpiryQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("slow"))
	r := newQueueReceiver(t, c, q, nil)
	first := receiveOne(t, r)
	if first.LockedUntil == nil {
		t.Fatalf("no LockedUntil on a peek-lock delivery")
	}
	if d := time.Until(*first.LockedUntil); d < 3*time.Second || d > 6*time.Second {
		t.Errorf("LockedUntil is %v away, want about the queue's LockDuration of 5s", d)
	}
	// Waiting for the redelivery is the poll: it returns once the lock has
	// expired.
	again := receiveN(t, r, 1, 15*time.Second)[0]
	if time.Now().Before(first.LockedUntil.Add(-100 * time.Millisecond)) {
		t.Errorf("redelivered at %v, before the lock expired at %v", time.Now(), first.LockedUntil)
	}
	if seq(again) != seq(first) || again.DeliveryCount != 2 {
		t.Errorf("redelivered seq %d with DeliveryCount %d, want seq %d with DeliveryCount 2", seq(again), again.DeliveryCount, seq(first))
	}
	requireCode(t, r.CompleteMessage(ctxFor(t, opTimeout), first, nil), azservicebus.CodeLockLost)
	complete(t, r, again)
}

var maxDeliveryQueue = declareQueue("max-delivery", admin.QueueProperties{MaxDeliveryCount: ptr(int32(2))})

// TestMaxDeliveryCount: a message abandoned MaxDeliveryCount times is
// dead-lettered with reason MaxDeliveryCountExceeded.
func TestMaxDeliveryCount(t *testing.T) {
	t.Parallel()
	q := maxDeliveryQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("always fails"))
	r := newQueueReceiver(t, c, q, nil)
	for i := 1; i <= 2; i++ {
		m := receiveOne(t, r)
		if m.DeliveryCount != uint32(i) {
			t.Errorf("delivery %d has DeliveryCount %d", i, m.DeliveryCount)
		}
		if err := r.AbandonMessage(ctxFor(t, opTimeout), m, nil); err != nil {
			t.Fatalf("AbandonMessage #%d: %v", i, err)
		}
	}
	requireEmpty(t, r, "the queue after MaxDeliveryCount abandons")
	dlq := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dm := receiveOne(t, dlq)
	if string(dm.Body) != "always fails" {
		t.Fatalf("dead-letter queue delivered %q", dm.Body)
	}
	if strValue(dm.DeadLetterReason) != "MaxDeliveryCountExceeded" {
		t.Errorf("DeadLetterReason %q, want MaxDeliveryCountExceeded", strValue(dm.DeadLetterReason))
	}
	complete(t, dlq, dm)
}

// statesOf returns the states of msgs, for failure messages.
func statesOf(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = fmt.Sprint(m.State)
	}
	return out
}
