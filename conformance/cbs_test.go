package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/sas"
)

// TestOneCBSLinkPair: the $cbs node takes one sender and one receiver per
// connection at a time, as Service Bus does (Azure/azure-sdk-for-go#20334:
// "You're only allowed to have one Sender+Receiver for the $cbs endpoint");
// a second one is refused while the first is attached, and accepted once it
// has detached (the Go SDK attaches a fresh pair for every token). Written
// with go-amqp, the AMQP library under the Go SDK, since the SDK itself
// never attaches two.
func TestOneCBSLinkPair(t *testing.T) {
	t.Parallel()
	harness(t)
	ctx := ctxFor(t, opTimeout)
	conn := dialAMQP(t, ctx)
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	first, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatalf("first $cbs sender: %v", err)
	}
	_, err = sess.NewSender(ctx, "$cbs", nil)
	if !refused(err) {
		t.Fatalf("second $cbs sender while the first is attached: %v, want the attach refused", err)
	}
	firstR, err := sess.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: "$cbs-reply-1"})
	if err != nil {
		t.Fatalf("first $cbs receiver: %v", err)
	}
	if _, err = sess.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: "$cbs-reply-2"}); !refused(err) {
		t.Fatalf("second $cbs receiver while the first is attached: %v, want the attach refused", err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatalf("closing the first $cbs sender: %v", err)
	}
	if err := firstR.Close(ctx); err != nil {
		t.Fatalf("closing the first $cbs receiver: %v", err)
	}
	if _, err := sess.NewSender(ctx, "$cbs", nil); err != nil {
		t.Fatalf("a $cbs sender after the first detached: %v", err)
	}
	if _, err := sess.NewReceiver(ctx, "$cbs", &amqp.ReceiverOptions{TargetAddress: "$cbs-reply-3"}); err != nil {
		t.Fatalf("a $cbs receiver after the first detached: %v", err)
	}
}

// refused reports whether an attach failed with the broker's error (not a
// local or connection failure).
func refused(err error) bool {
	var ae *amqp.Error
	var le *amqp.LinkError
	return errors.As(err, &ae) && ae.Condition != "" || errors.As(err, &le) && le.RemoteErr != nil
}

// dialAMQP opens a go-amqp connection to the broker under test (SASL
// ANONYMOUS: the $cbs node needs no claim), closed when the test ends.
func dialAMQP(t *testing.T, ctx context.Context) *amqp.Conn {
	t.Helper()
	cs := sas.ParseConnectionString(suite.connStr)
	ep := strings.TrimSuffix(strings.TrimPrefix(cs.Endpoint, "sb://"), "/")
	url := "amqps://" + ep
	if cs.Emulator {
		url = "amqp://" + ep
	}
	conn, err := amqp.Dial(ctx, url, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
