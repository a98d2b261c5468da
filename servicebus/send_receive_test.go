package servicebus_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
)

func TestSendReceiveComplete(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("orders", broker.QueueProperties{})
	c := e.client()
	ctx := testCtx(t)

	mustSend(t, c, "orders", &azservicebus.Message{
		Body:                  []byte("hello"),
		MessageID:             ptr("m-1"),
		CorrelationID:         ptr("corr"),
		Subject:               ptr("subj"),
		ContentType:           ptr("text/plain"),
		TimeToLive:            ptr(time.Hour),
		PartitionKey:          ptr("pk"),
		ApplicationProperties: map[string]any{"n": int64(7), "s": "x"},
	})
	r, err := c.NewReceiverForQueue("Orders", nil) // names are case-insensitive
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if !bytes.Equal(m.Body, []byte("hello")) || m.MessageID != "m-1" || *m.CorrelationID != "corr" ||
		*m.Subject != "subj" || *m.ContentType != "text/plain" || *m.PartitionKey != "pk" {
		t.Fatalf("received %+v", m)
	}
	if m.DeliveryCount != 1 || m.SequenceNumber == nil || *m.SequenceNumber != 1 || m.EnqueuedTime == nil || m.LockedUntil == nil {
		t.Fatalf("broker fields: delivery count %d, seq %v, enqueued %v, locked until %v", m.DeliveryCount, m.SequenceNumber, m.EnqueuedTime, m.LockedUntil)
	}
	if m.TimeToLive == nil || *m.TimeToLive != time.Hour {
		t.Fatalf("ttl %v", m.TimeToLive)
	}
	if m.ApplicationProperties["n"] != int64(7) || m.ApplicationProperties["s"] != "x" {
		t.Fatalf("app props %v", m.ApplicationProperties)
	}
	if m.LockToken == [16]byte{} {
		t.Fatal("no lock token")
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 0 {
		t.Fatalf("after complete, peek found %d messages", len(peeked))
	}
	// The lock is gone with the message.
	if err := r.RenewMessageLock(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("renew after complete: %v, want CodeLockLost", err)
	}
}

func TestServiceAssignedMessageID(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	c := e.client()
	mustSend(t, c, "q", &azservicebus.Message{Body: []byte("no id")})
	r, err := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if len(m.MessageID) != 32 {
		t.Fatalf("service-assigned message id %q, want 32 hex digits", m.MessageID)
	}
	if string(m.Body) != "no id" {
		t.Fatalf("body %q", m.Body)
	}
}

func TestBatchSend(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{MaxMessageSizeInKilobytes: 256})
	c := e.client()
	ctx := testCtx(t)
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte{byte('a' + i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	// A message over the entity's limit is refused by the SDK (it learns
	// the limit from the attach).
	big := make([]byte, 300*1024)
	if err := batch.AddMessage(&azservicebus.Message{Body: big}, nil); err != azservicebus.ErrMessageTooLarge {
		t.Fatalf("adding 300 KiB to a 256 KiB batch: %v", err)
	}
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := receiveN(t, r, 3)
	for i, m := range ms {
		if string(m.Body) != string(rune('a'+i)) || *m.SequenceNumber != int64(i+1) {
			t.Fatalf("message %d: body %q seq %d", i, m.Body, *m.SequenceNumber)
		}
	}
}

// A message with a null annotation Service Bus refuses is rejected with
// the argument error; a null partition key is fine.
func TestSendRejectsNullAnnotations(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := snd.MaxMessageSize(); got != 1024*1024 {
		t.Fatalf("max-message-size %d, want the entity's 1 MiB", got)
	}
	for _, k := range []string{"x-opt-scheduled-enqueue-time", "x-opt-message-state", "x-opt-enqueue-sequence-number"} {
		m := goamqp.NewMessage([]byte("x"))
		m.Annotations = goamqp.Annotations{k: nil}
		var ae *goamqp.Error
		if err := snd.Send(ctx, m, nil); !errors.As(err, &ae) || ae.Condition != "com.microsoft:argument-error" {
			t.Errorf("null %s: %v, want com.microsoft:argument-error", k, err)
		}
	}
	m := goamqp.NewMessage([]byte("x"))
	m.Annotations = goamqp.Annotations{"x-opt-partition-key": nil}
	if err := snd.Send(ctx, m, nil); err != nil {
		t.Fatalf("null partition key: %v", err)
	}
}

// TestEntityDefaultTTLOnDelivery: a message sent without a time to live gets
// the entity's default, and the delivery says so (the SDK derives ExpiresAt
// from it).
func TestEntityDefaultTTLOnDelivery(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("hourly", broker.QueueProperties{DefaultMessageTimeToLive: time.Hour})
	e.queue("forever", broker.QueueProperties{})
	c := e.client()
	for _, q := range []struct {
		name string
		want time.Duration
	}{{"hourly", time.Hour}, {"forever", 0}} {
		mustSend(t, c, q.name, &azservicebus.Message{Body: []byte("x")})
		r, err := c.NewReceiverForQueue(q.name, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, r, 1)[0]
		var got time.Duration
		if m.TimeToLive != nil {
			got = *m.TimeToLive
		}
		if got != q.want {
			t.Fatalf("%s: TimeToLive = %v, want %v", q.name, got, q.want)
		}
		if q.want > 0 && !m.ExpiresAt.Equal(m.EnqueuedTime.Add(q.want)) {
			t.Fatalf("%s: ExpiresAt = %v, want %v", q.name, m.ExpiresAt, m.EnqueuedTime.Add(q.want))
		}
	}
}
