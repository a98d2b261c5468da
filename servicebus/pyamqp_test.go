package servicebus_test

import (
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// The Python SDK's own AMQP stack (pyamqp) attaches its $cbs and
// $management request and reply links both with the node's address, and
// sends requests without a reply-to: the reply goes to the reply link whose
// target is the node.
func TestRequestWithoutReplyTo(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	sess := e.anonSession(ctx, t)
	// request sends one request to node and returns the reply's status.
	request := func(node string, app map[string]any, value any) any {
		t.Helper()
		snd, err := sess.NewSender(ctx, node, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		rcv, err := sess.NewReceiver(ctx, node, &goamqp.ReceiverOptions{TargetAddress: node, Credit: 10,
			RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr()})
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close(ctx)
		req := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: "req-1"}, ApplicationProperties: app, Value: value}
		if err := snd.Send(ctx, req, nil); err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		resp, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		if resp.Properties == nil || resp.Properties.CorrelationID != "req-1" {
			t.Fatalf("%s: correlation-id %#v, want req-1", node, resp.Properties)
		}
		for _, k := range []string{"status-code", "statusCode"} {
			if v, ok := resp.ApplicationProperties[k]; ok {
				return v
			}
		}
		t.Fatalf("%s: no status in %v", node, resp.ApplicationProperties)
		return nil
	}
	aud := "amqp://" + e.addr + "/q"
	token := sas.Sign(aud, rootKeyName, rootKey, time.Now().Add(time.Hour))
	if got := request("$cbs", map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": aud}, token); got != int32(202) {
		t.Fatalf("put-token status %v, want 202", got)
	}
	peek := map[string]any{"from-sequence-number": int64(1), "message-count": int32(1)}
	if got := request("q/$management", map[string]any{"operation": "com.microsoft:peek-message"}, peek); got != int32(204) {
		t.Fatalf("peek on an empty queue: status %v, want 204", got)
	}
}

// pyamqp's senders ask for rcv-settle-mode second but never settle an
// unsettled disposition: the broker answers first (it settles at once).
func TestSenderLinkSettlesFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypePlain(rootKeyName, rootKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.NewSender(ctx, "q", &goamqp.SenderOptions{RequestedReceiverSettleMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	// go-amqp refuses an answer other than what it asked, quoting it.
	if err == nil || !strings.Contains(err.Error(), `received "first"`) {
		t.Fatalf("attach asking rcv-settle-mode second: %v, want the broker's answer first", err)
	}
}
