package conformance

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Entity features: duplicate detection and expiry.

var dedupQueue = declareQueue("dedup", admin.QueueProperties{
	RequiresDuplicateDetection:          ptr(true),
	DuplicateDetectionHistoryTimeWindow: ptr("PT1M"),
})

// TestDuplicateDetection: a second send with the same MessageID inside the
// window is accepted and dropped.
func TestDuplicateDetection(t *testing.T) {
	t.Parallel()
	q := dedupQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	send(t, s,
		&azservicebus.Message{Body: []byte("first copy"), MessageID: ptr("order-7")},
		&azservicebus.Message{Body: []byte("second copy"), MessageID: ptr("order-7")},
		&azservicebus.Message{Body: []byte("other"), MessageID: ptr("order-8")},
	)
	r := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	got := receiveN(t, r, 2, receiveTimeout)
	if want := []string{"first copy", "other"}; !equalStrings(bodies(got), want) {
		t.Fatalf("received %q, want %q: the duplicate must be dropped", bodies(got), want)
	}
	requireEmpty(t, r, "after the duplicate")
}

var ttlQueue = declareQueue("ttl", admin.QueueProperties{DeadLetteringOnMessageExpiration: ptr(true)})

// TestTTLDeadLettering: on a queue with DeadLetteringOnMessageExpiration a
// message whose TimeToLive passes moves to the dead-letter queue with
// reason TTLExpiredException; a message with a long TTL stays.
func TestTTLDeadLettering(t *testing.T) {
	t.Parallel()
	q := ttlQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q),
		&azservicebus.Message{Body: []byte("short-lived"), TimeToLive: ptr(time.Second)},
		&azservicebus.Message{Body: []byte("long-lived"), TimeToLive: ptr(time.Hour)},
	)
	dlq := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dm := receiveN(t, dlq, 1, 15*time.Second)[0]
	if string(dm.Body) != "short-lived" {
		t.Fatalf("dead-letter queue delivered %q, want %q", dm.Body, "short-lived")
	}
	if strValue(dm.DeadLetterReason) != "TTLExpiredException" {
		t.Errorf("DeadLetterReason %q, want TTLExpiredException", strValue(dm.DeadLetterReason))
	}
	complete(t, dlq, dm)

	r := newQueueReceiver(t, c, q, nil)
	if left := bodies(peekAll(t, r)); !equalStrings(left, []string{"long-lived"}) {
		t.Fatalf("queue holds %q, want only %q", left, "long-lived")
	}
}
