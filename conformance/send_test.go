package conformance

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Sending: single messages, batches, scheduled messages, ids, sizes and
// every settable property.

var sendReceiveQueue = declareQueue("send-receive", admin.QueueProperties{})

// TestSendReceivePeekLock: a sent message is delivered once, locked, with
// the broker's annotations; completed, it is gone.
func TestSendReceivePeekLock(t *testing.T) {
	t.Parallel()
	q := sendReceiveQueue.create(t)
	c := newClient(t)
	before := time.Now()
	send(t, newSender(t, c, q), textMessage("hello"))

	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	if string(m.Body) != "hello" {
		t.Fatalf("body %q, want %q", m.Body, "hello")
	}
	if m.DeliveryCount != 1 {
		t.Errorf("DeliveryCount %d, want 1 on the first delivery", m.DeliveryCount)
	}
	if m.SequenceNumber == nil {
		t.Errorf("no SequenceNumber")
	}
	if m.EnqueuedTime == nil || m.EnqueuedTime.Before(before.Add(-2*time.Second)) || m.EnqueuedTime.After(time.Now().Add(2*time.Second)) {
		t.Errorf("EnqueuedTime %v, want about %v", m.EnqueuedTime, before)
	}
	if m.LockedUntil == nil || !m.LockedUntil.After(time.Now()) {
		t.Errorf("LockedUntil %v, want a time in the future", m.LockedUntil)
	}
	if m.LockToken == [16]byte{} {
		t.Errorf("zero LockToken")
	}
	if m.State != azservicebus.MessageStateActive {
		t.Errorf("State %v, want Active", m.State)
	}
	complete(t, r, m)
	requireEmpty(t, r, "after CompleteMessage")
}

var receiveAndDeleteQueue = declareQueue("receive-and-delete", admin.QueueProperties{})

// TestReceiveAndDelete: in ReceiveAndDelete mode messages are delivered
// without a lock and removed on delivery.
func TestReceiveAndDelete(t *testing.T) {
	t.Parallel()
	q := receiveAndDeleteQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("one"), textMessage("two"))

	r := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	got := receiveN(t, r, 2, receiveTimeout)
	if want := []string{"one", "two"}; !equalStrings(bodies(got), want) {
		t.Fatalf("bodies %q, want %q", bodies(got), want)
	}
	if got[0].LockedUntil != nil {
		t.Errorf("LockedUntil %v on a ReceiveAndDelete delivery, want none", got[0].LockedUntil)
	}
	requireEmpty(t, r, "after ReceiveAndDelete")
}

var batchQueue = declareQueue("batch", admin.QueueProperties{})

// TestSendMessageBatch: a batch's messages arrive in order, with
// increasing sequence numbers.
func TestSendMessageBatch(t *testing.T) {
	t.Parallel()
	q := batchQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	batch, err := s.NewMessageBatch(ctxFor(t, opTimeout), nil)
	if err != nil {
		t.Fatalf("NewMessageBatch: %v", err)
	}
	var want []string
	for i := range 10 {
		body := fmt.Sprintf("batch-%d", i)
		want = append(want, body)
		if err := batch.AddMessage(textMessage(body), nil); err != nil {
			t.Fatalf("AddMessage(%s): %v", body, err)
		}
	}
	if batch.NumMessages() != 10 {
		t.Fatalf("NumMessages %d, want 10", batch.NumMessages())
	}
	if err := s.SendMessageBatch(ctxFor(t, opTimeout), batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	r := newQueueReceiver(t, c, q, nil)
	got := receiveN(t, r, 10, receiveTimeout)
	if !equalStrings(bodies(got), want) {
		t.Fatalf("bodies %q, want %q", bodies(got), want)
	}
	for i := 1; i < len(got); i++ {
		if seq(got[i]) <= seq(got[i-1]) {
			t.Fatalf("sequence numbers not increasing: #%d is %d after %d", i, seq(got[i]), seq(got[i-1]))
		}
	}
	complete(t, r, got...)
}

var scheduleQueue = declareQueue("schedule", admin.QueueProperties{})

// TestScheduleAndCancel: scheduled messages are visible to peek in state
// Scheduled with their enqueue time, and a cancelled one disappears.
func TestScheduleAndCancel(t *testing.T) {
	t.Parallel()
	q := scheduleQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctxFor(t, opTimeout), []*azservicebus.Message{textMessage("keep"), textMessage("cancel")}, at, nil)
	if err != nil {
		t.Fatalf("ScheduleMessages: %v", err)
	}
	if len(seqs) != 2 || seqs[0] == seqs[1] {
		t.Fatalf("ScheduleMessages returned sequence numbers %v, want two distinct ones", seqs)
	}
	r := newQueueReceiver(t, c, q, nil)
	peeked := peekAll(t, r)
	if len(peeked) != 2 {
		t.Fatalf("peeked %d messages %q, want the 2 scheduled ones", len(peeked), bodies(peeked))
	}
	for i, m := range peeked {
		if seq(m) != seqs[i] {
			t.Errorf("peeked #%d has sequence number %d, want %d", i, seq(m), seqs[i])
		}
		if m.State != azservicebus.MessageStateScheduled {
			t.Errorf("peeked %q has State %v, want Scheduled", m.Body, m.State)
		}
		if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) {
			t.Errorf("peeked %q has ScheduledEnqueueTime %v, want %v", m.Body, m.ScheduledEnqueueTime, at)
		}
	}
	if err := s.CancelScheduledMessages(ctxFor(t, opTimeout), seqs[1:], nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	peeked = peekAll(t, r)
	if len(peeked) != 1 || string(peeked[0].Body) != "keep" || seq(peeked[0]) != seqs[0] {
		t.Fatalf("after cancelling, peek found %q (seqs %v), want only %q (seq %d)", bodies(peeked), seqsOf(peeked), "keep", seqs[0])
	}
}

var scheduleDeliveryQueue = declareQueue("schedule-delivery", admin.QueueProperties{})

// TestScheduledDelivery: a message scheduled with ScheduleMessages and one
// sent with ScheduledEnqueueTime both stay invisible until their time and
// are then delivered.
func TestScheduledDelivery(t *testing.T) {
	t.Parallel()
	q := scheduleDeliveryQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	at := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	if _, err := s.ScheduleMessages(ctxFor(t, opTimeout), []*azservicebus.Message{textMessage("scheduled")}, at, nil); err != nil {
		t.Fatalf("ScheduleMessages: %v", err)
	}
	send(t, s, &azservicebus.Message{Body: []byte("annotated"), ScheduledEnqueueTime: &at})

	r := newQueueReceiver(t, c, q, nil)
	peeked := peekAll(t, r)
	if time.Now().Before(at.Add(-200 * time.Millisecond)) {
		if len(peeked) != 2 {
			t.Errorf("before their time, peek found %q, want the 2 scheduled messages", bodies(peeked))
		}
		for _, m := range peeked {
			if m.State != azservicebus.MessageStateScheduled {
				t.Errorf("before its time, %q has State %v, want Scheduled", m.Body, m.State)
			}
		}
	}
	got := receiveN(t, r, 2, 15*time.Second)
	arrived := time.Now()
	// The clocks are the same machine's; allow for the broker's timer
	// granularity only.
	if arrived.Before(at.Add(-100 * time.Millisecond)) {
		t.Errorf("scheduled messages delivered at %v, before their time %v", arrived, at)
	}
	seen := map[string]bool{}
	for _, m := range got {
		seen[string(m.Body)] = true
		if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) {
			t.Errorf("%q has ScheduledEnqueueTime %v, want %v", m.Body, m.ScheduledEnqueueTime, at)
		}
		if m.State != azservicebus.MessageStateActive {
			t.Errorf("delivered %q has State %v, want Active", m.Body, m.State)
		}
	}
	if !seen["scheduled"] || !seen["annotated"] {
		t.Errorf("delivered %q, want both %q and %q", bodies(got), "scheduled", "annotated")
	}
	complete(t, r, got...)
}

var messageIDQueue = declareQueue("message-id", admin.QueueProperties{})

// TestServiceAssignedMessageID: a message sent without a MessageID gets
// one from the broker, different for each message; a set one is kept.
func TestServiceAssignedMessageID(t *testing.T) {
	t.Parallel()
	q := messageIDQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("a"), textMessage("b"), &azservicebus.Message{Body: []byte("c"), MessageID: ptr("mine")})
	r := newQueueReceiver(t, c, q, nil)
	got := receiveN(t, r, 3, receiveTimeout)
	if got[0].MessageID == "" || got[1].MessageID == "" {
		t.Fatalf("MessageIDs %q and %q, want service-assigned ones", got[0].MessageID, got[1].MessageID)
	}
	if got[0].MessageID == got[1].MessageID {
		t.Errorf("two messages got the same service-assigned MessageID %q", got[0].MessageID)
	}
	if got[2].MessageID != "mine" {
		t.Errorf("MessageID %q, want %q as sent", got[2].MessageID, "mine")
	}
	complete(t, r, got...)
}

var largeMessageQueue = declareQueue("large", admin.QueueProperties{})

// TestLargeMessage: a 1 MB body (the Premium default limit, and Busbar's)
// round-trips byte for byte.
func TestLargeMessage(t *testing.T) {
	t.Parallel()
	q := largeMessageQueue.create(t)
	c := newClient(t)
	body := make([]byte, 1000*1000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(rng.UintN(256))
	}
	send(t, newSender(t, c, q), &azservicebus.Message{Body: body})
	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	if !bytes.Equal(m.Body, body) {
		t.Fatalf("received %d bytes, differing from the %d sent", len(m.Body), len(body))
	}
	complete(t, r, m)
}

var propertiesQueue = declareQueue("properties", admin.QueueProperties{})

// TestMessagePropertiesRoundTrip: every property a sender can set, and
// application properties of every supported type, arrive unchanged.
func TestMessagePropertiesRoundTrip(t *testing.T) {
	t.Parallel()
	q := propertiesQueue.create(t)
	c := newClient(t)
	when := time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC)
	appProps := map[string]any{
		"string":  "text",
		"int32":   int32(-32),
		"int64":   int64(1) << 40,
		"float64": 2.5,
		"bool":    true,
		"time":    when,
		"bytes":   []byte{0, 1, 2, 0xff},
	}
	sent := &azservicebus.Message{
		Body:                  []byte("props"),
		ApplicationProperties: appProps,
		ContentType:           ptr("application/json"),
		CorrelationID:         ptr("corr-1"),
		MessageID:             ptr("msg-1"),
		PartitionKey:          ptr("pk-1"),
		ReplyTo:               ptr("reply-queue"),
		ReplyToSessionID:      ptr("reply-session"),
		Subject:               ptr("subject-1"),
		TimeToLive:            ptr(10 * time.Minute),
		To:                    ptr("to-1"),
	}
	send(t, newSender(t, c, q), sent)
	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	check := func(name string, got, want *string) {
		if strValue(got) != strValue(want) {
			t.Errorf("%s %q, want %q", name, strValue(got), strValue(want))
		}
	}
	if m.MessageID != "msg-1" {
		t.Errorf("MessageID %q, want %q", m.MessageID, "msg-1")
	}
	check("ContentType", m.ContentType, sent.ContentType)
	check("CorrelationID", m.CorrelationID, sent.CorrelationID)
	check("PartitionKey", m.PartitionKey, sent.PartitionKey)
	check("ReplyTo", m.ReplyTo, sent.ReplyTo)
	check("ReplyToSessionID", m.ReplyToSessionID, sent.ReplyToSessionID)
	check("Subject", m.Subject, sent.Subject)
	check("To", m.To, sent.To)
	if m.TimeToLive == nil || *m.TimeToLive != 10*time.Minute {
		t.Errorf("TimeToLive %v, want 10m", m.TimeToLive)
	}
	if m.ExpiresAt == nil || m.EnqueuedTime == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(10*time.Minute)) {
		t.Errorf("ExpiresAt %v, want EnqueuedTime %v + 10m", m.ExpiresAt, m.EnqueuedTime)
	}
	for k, want := range appProps {
		got, ok := m.ApplicationProperties[k]
		if !ok {
			t.Errorf("application property %q missing", k)
			continue
		}
		if wt, ok := want.(time.Time); ok {
			if gt, ok := got.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("application property %q = %v (%T), want %v (time.Time)", k, got, got, wt)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("application property %q = %#v (%T), want %#v (%T)", k, got, got, want, want)
		}
	}
	if len(m.ApplicationProperties) != len(appProps) {
		t.Errorf("application properties %v, want exactly %v", m.ApplicationProperties, appProps)
	}
	complete(t, r, m)
}

// seqsOf returns the sequence numbers of msgs.
func seqsOf(msgs []*azservicebus.ReceivedMessage) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = seq(m)
	}
	return out
}
