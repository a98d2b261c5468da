package conformance

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// TestAccessedAt: a queue's AccessedAt is the zero time until a client
// uses it, then the time of that use (Microsoft's admin tests assert both);
// a subscription's is set from its creation.
func TestAccessedAt(t *testing.T) {
	t.Parallel()
	harness(t)
	if suite.mode != "admin" {
		t.Skip("needs the management API")
	}
	ac := adminClient()
	q := entityName("accessed")
	if _, err := ac.CreateQueue(ctxFor(t, opTimeout), q, nil); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() { _, _ = ac.DeleteQueue(ctxFor(t, opTimeout), q, nil) })
	rt, err := ac.GetQueueRuntimeProperties(ctxFor(t, opTimeout), q, nil)
	if err != nil {
		t.Fatalf("GetQueueRuntimeProperties: %v", err)
	}
	if !rt.AccessedAt.IsZero() || rt.CreatedAt.IsZero() {
		t.Fatalf("a new queue has AccessedAt %v, CreatedAt %v; want zero and set", rt.AccessedAt, rt.CreatedAt)
	}
	before := time.Now().Add(-time.Second)
	send(t, newSender(t, newClient(t), q), textMessage("use"))
	rt, err = ac.GetQueueRuntimeProperties(ctxFor(t, opTimeout), q, nil)
	if err != nil {
		t.Fatalf("GetQueueRuntimeProperties: %v", err)
	}
	if rt.AccessedAt.Before(before) {
		t.Fatalf("after a send AccessedAt is %v, want about now", rt.AccessedAt)
	}

	topic := entityName("accessedt")
	if _, err := ac.CreateTopic(ctxFor(t, opTimeout), topic, nil); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	t.Cleanup(func() { _, _ = ac.DeleteTopic(ctxFor(t, opTimeout), topic, nil) })
	if _, err := ac.CreateSubscription(ctxFor(t, opTimeout), topic, "s", &admin.CreateSubscriptionOptions{}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	trt, err := ac.GetTopicRuntimeProperties(ctxFor(t, opTimeout), topic, nil)
	if err != nil {
		t.Fatalf("GetTopicRuntimeProperties: %v", err)
	}
	if !trt.AccessedAt.IsZero() {
		t.Errorf("an unused topic has AccessedAt %v, want zero", trt.AccessedAt)
	}
	srt, err := ac.GetSubscriptionRuntimeProperties(ctxFor(t, opTimeout), topic, "s", nil)
	if err != nil {
		t.Fatalf("GetSubscriptionRuntimeProperties: %v", err)
	}
	if srt.AccessedAt.IsZero() {
		t.Errorf("a new subscription has AccessedAt zero; Service Bus sets it at creation")
	}
}
