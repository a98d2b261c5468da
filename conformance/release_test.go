package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/sas"
)

// Deliveries that end without a settlement by the application: the
// released outcome and a receiver that goes away.

var releaseQueue = declareQueue("release", admin.QueueProperties{MaxDeliveryCount: ptr(int32(3))})

// TestReleasedIsNotADelivery: the Go SDK releases every message that
// arrives between ReceiveMessages calls (its "releaser"). Service Bus does
// not count a released message as a delivery, so however often that
// happens the message's DeliveryCount stays 1 and it never reaches
// MaxDeliveryCount.
//
// An empty ReceiveMessages cut short by its context leaves its 5 credits
// on the link, and the SDK's releaser then receives and releases whatever
// arrives: the one message sent is delivered and released 5 times, more
// than the queue's MaxDeliveryCount (3). The broker's delivery counter
// (busbar_messages_out_total on /metrics) tells when that has happened.
func TestReleasedIsNotADelivery(t *testing.T) {
	t.Parallel()
	q := releaseQueue.create(t)
	c := newClient(t)
	if _, ok := deliveriesOf(t, q); !ok {
		t.Skip("the broker under test has no busbar_messages_out_total on /metrics to tell when the SDK has released")
	}
	r := newQueueReceiver(t, c, q, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	got, err := r.ReceiveMessages(ctx, 5, nil)
	cancel()
	if len(got) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReceiveMessages on an empty queue: %d messages, %v; want none and a deadline error", len(got), err)
	}
	send(t, newSender(t, c, q), textMessage("released"))
	poll.Until(t, receiveTimeout, "the SDK's releaser to receive and release the message 5 times", func() bool {
		n, _ := deliveriesOf(t, q)
		return n >= 5
	})
	peeked := peekAll(t, r)
	if len(peeked) != 1 || peeked[0].DeliveryCount != 1 {
		t.Fatalf("after 5 releases peek found %q with delivery counts %v, want the message with DeliveryCount 1", bodies(peeked), deliveryCounts(peeked))
	}
	m := receiveOne(t, r)
	if string(m.Body) != "released" || m.DeliveryCount != 1 {
		t.Fatalf("received %q with DeliveryCount %d after 5 releases, want %q with 1", m.Body, m.DeliveryCount, "released")
	}
	complete(t, r, m)
	dlq := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	requireEmpty(t, dlq, "the dead-letter queue")
}

var detachQueue = declareQueue("detach", admin.QueueProperties{})

// TestDetachKeepsLocks: on an entity without sessions, a receiver that
// closes with unsettled messages leaves them locked, and they can still be
// settled (the SDK does it on the management link, which is why Service
// Bus keeps the locks: azure-sdk-for-js#8406, "messages received from
// non-sessionful entities can now be settled even after the receiver is
// closed").
func TestDetachKeepsLocks(t *testing.T) {
	t.Parallel()
	q := detachQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), textMessage("held"))
	r1, err := c.NewReceiverForQueue(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, r1)
	if err := r1.Close(ctxFor(t, opTimeout)); err != nil {
		t.Fatalf("closing the receiver: %v", err)
	}
	r2 := newQueueReceiver(t, c, q, nil)
	if err := r2.CompleteMessage(ctxFor(t, opTimeout), m, nil); err != nil {
		t.Fatalf("completing, from another receiver, a message received on a closed one: %v (its lock should have survived the detach)", err)
	}
	requireEmpty(t, r2, "the queue after completing the message")
}

var detachSessionQueue = sessionQueue("detachsess", admin.QueueProperties{})

// TestSessionDetachReturnsUncounted: closing a session receiver releases
// the session, and its unsettled messages are available to the next
// receiver of the session at once, without counting the delivery (the
// JavaScript SDK's tests record this service behaviour:
// azure-sdk-for-js#1050).
func TestSessionDetachReturnsUncounted(t *testing.T) {
	t.Parallel()
	q := detachSessionQueue.create(t)
	c := newClient(t)
	send(t, newSender(t, c, q), sessionMessage("s1", "held"))
	r1, err := c.AcceptSessionForQueue(ctxFor(t, opTimeout), q, "s1", nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue: %v", err)
	}
	first := receiveOne(t, r1)
	if err := r1.Close(ctxFor(t, opTimeout)); err != nil {
		t.Fatalf("closing the session receiver: %v", err)
	}
	r2 := acceptSession(t, c, q, "s1")
	again := receiveOne(t, r2)
	if seq(again) != seq(first) || again.DeliveryCount != 1 {
		t.Fatalf("after the session receiver closed, got seq %d with DeliveryCount %d, want seq %d with DeliveryCount 1", seq(again), again.DeliveryCount, seq(first))
	}
	complete(t, r2, again)
}

// deliveryCounts returns the delivery counts of msgs, for failure messages.
func deliveryCounts(msgs []*azservicebus.ReceivedMessage) []uint32 {
	out := make([]uint32, len(msgs))
	for i, m := range msgs {
		out[i] = m.DeliveryCount
	}
	return out
}

// deliveriesOf reads busbar_messages_out_total for entity from the
// broker's /metrics on its management endpoint; false when the broker
// does not expose it.
func deliveriesOf(t *testing.T, entity string) (float64, bool) {
	t.Helper()
	ep := strings.TrimPrefix(sas.ParseConnectionString(suite.adminCS).Endpoint, "sb://")
	scheme := "http"
	if suite.adminTLS {
		scheme = "https"
	}
	resp, err := plainHTTPClient.Get(fmt.Sprintf("%s://%s/metrics", scheme, strings.TrimSuffix(ep, "/")))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	want := fmt.Sprintf("busbar_messages_out_total{entity=%q} ", entity)
	found := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "busbar_connections ") {
			found = true
		}
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, found
}
