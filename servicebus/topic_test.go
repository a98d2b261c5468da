package servicebus_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
)

// Messages sent to a topic reach each matching subscription; a rule action
// that changes properties is visible to the receiver, with the body intact.
func TestTopicSubscriptions(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if err := e.b.CreateTopic(ctx, "events", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "events", "all", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "events", "red", broker.SubscriptionProperties{DefaultRule: &broker.RuleProperties{
		Name:   "red",
		Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQL: "color = 'red'"},
		Action: "SET seen = 'yes'",
	}}); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	mustSend(t, c, "events",
		&azservicebus.Message{Body: []byte("r"), ApplicationProperties: map[string]any{"color": "red"}},
		&azservicebus.Message{Body: []byte("b"), ApplicationProperties: map[string]any{"color": "blue"}},
	)
	all, err := c.NewReceiverForSubscription("events", "all", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ms := receiveN(t, all, 2); string(ms[0].Body) != "r" || string(ms[1].Body) != "b" {
		t.Fatalf("all got %q %q", ms[0].Body, ms[1].Body)
	}
	red, err := c.NewReceiverForSubscription("events", "red", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, red, 1)[0]
	if string(m.Body) != "r" || m.ApplicationProperties["seen"] != "yes" || m.ApplicationProperties["color"] != "red" {
		t.Fatalf("red got %q %v", m.Body, m.ApplicationProperties)
	}
	if err := red.DeadLetterMessage(testCtx(t), m, nil); err != nil {
		t.Fatal(err)
	}
	dlq, err := c.NewReceiverForSubscription("events", "red", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	if d := receiveN(t, dlq, 1)[0]; string(d.Body) != "r" || d.ApplicationProperties["seen"] != "yes" {
		t.Fatalf("dead letter %q %v", d.Body, d.ApplicationProperties)
	}
}
