package servicebus_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
)

// A released message is not a failed delivery: released more often than
// the queue's MaxDeliveryCount, it is redelivered at once on the link's
// remaining credit, every time with delivery-count 0 in its header.
func TestReleasedIsNotCounted(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{MaxDeliveryCount: 2})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("1")})
	for i := range 5 {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
		if m.Header == nil || m.Header.DeliveryCount != 0 || string(m.GetData()) != "1" {
			t.Fatalf("delivery %d: header %+v body %q, want delivery-count 0 and body 1", i+1, m.Header, m.GetData())
		}
		if err := r.ReleaseMessage(ctx, m); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
}

// rootSession opens a go-amqp connection with the root key (SASL PLAIN),
// closed when the test ends, and a session on it.
func rootSession(t *testing.T, ctx context.Context, e *env) *goamqp.Session {
	t.Helper()
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(rootKeyName, rootKey)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}
