package conformance

import (
	"context"
	"errors"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Time limits of single operations. They bound how long a failing test
// waits; a passing one finishes as soon as the broker answers.
const (
	opTimeout      = 20 * time.Second // one send, settle or management call
	receiveTimeout = 20 * time.Second // waiting for messages already sent
)

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// retryOptions keep the SDK's retries short, so a failing test reports
// quickly; a passing one never retries.
var retryOptions = azservicebus.RetryOptions{
	MaxRetries:    2,
	RetryDelay:    100 * time.Millisecond,
	MaxRetryDelay: time.Second,
}

// newClient returns a data-plane client for the broker under test, closed
// when the test ends.
func newClient(t *testing.T) *azservicebus.Client {
	t.Helper()
	harness(t)
	return newClientFor(t, suite.connStr)
}

// newClientFor returns a client for the connection string cs.
func newClientFor(t *testing.T, cs string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{RetryOptions: retryOptions})
	if err != nil {
		t.Fatalf("NewClientFromConnectionString: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// ctxFor returns a context cancelled after d or when the test ends.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newSender returns a sender for a queue or topic.
func newSender(t *testing.T, c *azservicebus.Client, entity string) *azservicebus.Sender {
	t.Helper()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("NewSender(%s): %v", entity, err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// newQueueReceiver returns a receiver for a queue (or one of its
// sub-queues).
func newQueueReceiver(t *testing.T, c *azservicebus.Client, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := c.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatalf("NewReceiverForQueue(%s): %v", queue, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// newSubReceiver returns a receiver for a subscription.
func newSubReceiver(t *testing.T, c *azservicebus.Client, topic, sub string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := c.NewReceiverForSubscription(topic, sub, opts)
	if err != nil {
		t.Fatalf("NewReceiverForSubscription(%s, %s): %v", topic, sub, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// send sends messages one by one.
func send(t *testing.T, s *azservicebus.Sender, msgs ...*azservicebus.Message) {
	t.Helper()
	for i, m := range msgs {
		if err := s.SendMessage(ctxFor(t, opTimeout), m, nil); err != nil {
			t.Fatalf("SendMessage #%d: %v", i, err)
		}
	}
}

// textMessage is a message with a string body.
func textMessage(body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body)}
}

// messageReceiver is what Receiver and SessionReceiver have in common for
// receiving.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN receives exactly n messages, failing the test if they do not
// arrive within limit.
func receiveN(t *testing.T, r messageReceiver, n int, limit time.Duration) []*azservicebus.ReceivedMessage {
	t.Helper()
	got, err := tryReceiveN(r, n, limit)
	if err != nil {
		t.Fatalf("received %d of %d messages (bodies %q): %v", len(got), n, bodies(got), err)
	}
	return got
}

// tryReceiveN receives until n messages have arrived, the limit passes or
// an error occurs; it returns what arrived.
func tryReceiveN(r messageReceiver, n int, limit time.Duration) ([]*azservicebus.ReceivedMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		got = append(got, msgs...)
		if err != nil {
			return got, err
		}
	}
	if len(got) > n {
		return got, fmt.Errorf("asked for at most %d messages, got %d", n, len(got))
	}
	return got, nil
}

// receiveOne receives one message.
func receiveOne(t *testing.T, r messageReceiver) *azservicebus.ReceivedMessage {
	t.Helper()
	return receiveN(t, r, 1, receiveTimeout)[0]
}

// messagePeeker is what Receiver and SessionReceiver have in common for
// peeking.
type messagePeeker interface {
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// peekAll peeks up to 100 messages from the start of the entity.
func peekAll(t *testing.T, p messagePeeker) []*azservicebus.ReceivedMessage {
	t.Helper()
	msgs, err := p.PeekMessages(ctxFor(t, opTimeout), 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(0))})
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	return msgs
}

// requireEmpty fails the test when a peek from the start finds messages.
func requireEmpty(t *testing.T, p messagePeeker, what string) {
	t.Helper()
	if msgs := peekAll(t, p); len(msgs) != 0 {
		t.Fatalf("%s: peek found %d messages %q, want none", what, len(msgs), bodies(msgs))
	}
}

// bodies returns the bodies of msgs as strings, for comparisons and
// failure messages.
func bodies(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// equalStrings reports whether a and b hold the same strings in order.
func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// requireCode fails the test unless err is an *azservicebus.Error with code.
func requireCode(t *testing.T, err error, code azservicebus.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want an *azservicebus.Error with code %q", code)
	}
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) {
		t.Fatalf("error %v (%T) is not an *azservicebus.Error, want code %q", err, err, code)
	}
	if sbErr.Code != code {
		t.Fatalf("error code %q, want %q (error: %v)", sbErr.Code, code, err)
	}
}

// complete completes msgs.
func complete(t *testing.T, s interface {
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
}, msgs ...*azservicebus.ReceivedMessage) {
	t.Helper()
	for _, m := range msgs {
		if err := s.CompleteMessage(ctxFor(t, opTimeout), m, nil); err != nil {
			t.Fatalf("CompleteMessage(%q, seq %v): %v", m.Body, seq(m), err)
		}
	}
}

// seq returns a message's sequence number, or -1 when it has none.
func seq(m *azservicebus.ReceivedMessage) int64 {
	if m.SequenceNumber == nil {
		return -1
	}
	return *m.SequenceNumber
}

// strValue dereferences s, returning "<nil>" for nil, for messages.
func strValue(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// waitUntil polls cond every interval until it returns true or limit
// passes; it returns whether cond became true.
func waitUntil(limit, _ time.Duration, cond func() bool) bool {
	return poll.Wait(limit, cond)
}

// uniqueID returns a string unique to this run and test, for message and
// session ids.
func uniqueID(t *testing.T, prefix string) string {
	return fmt.Sprintf("%s-%s-%s", prefix, strings.ReplaceAll(t.Name(), "/", "-"), suite.runID)
}
