package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Seed 000, "Sagas with Azure Service Bus": an order saga on a
// session-enabled subscription. PaymentAccepted and ItemShipped arrive out
// of order for an order id used as the session id; the saga keeps its
// progress in the session state; a scheduled Timeout message checks the
// state and compensates when ItemShipped never came; the state is cleared
// when the saga ends.

var sagaTopic = declareTopic("orchestration", admin.TopicProperties{},
	subSpec{
		name:  "orchestrator",
		props: admin.SubscriptionProperties{RequiresSession: ptr(true)},
		rules: []admin.RuleProperties{
			{Name: "PaymentAccepted", Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"MessageType": "PaymentAccepted"}}},
			{Name: "ItemShipped", Filter: &admin.SQLFilter{Expression: "MessageType = 'ItemShipped'"}},
			{Name: "Timeout", Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"MessageType": "Timeout"}}},
		},
	},
)

// sagaTimeout is how long after its first message the saga gives up
// waiting (the seed uses 5 s timeouts; short here to keep the suite fast).
const sagaTimeout = 2 * time.Second

// sagaState is the saga's progress, kept in the session state.
type sagaState struct {
	PaymentAccepted bool `json:"paymentAccepted"`
	ItemShipped     bool `json:"itemShipped"`
}

// orderMessage is a message of the saga for order id.
func orderMessage(orderID, messageType, body string) *azservicebus.Message {
	return &azservicebus.Message{
		Body:                  []byte(body),
		SessionID:             ptr(orderID),
		CorrelationID:         ptr(orderID),
		ApplicationProperties: map[string]any{"MessageType": messageType},
	}
}

// TestSeedSaga runs the saga for two orders at once: one whose shipment
// arrives (after its payment, late) and completes, and one whose shipment
// never comes and is compensated when its timeout fires.
func TestSeedSaga(t *testing.T) {
	t.Parallel()
	topic := sagaTopic.create(t)
	const sub = "orchestrator"
	c := newClient(t)
	publisher := newSender(t, c, topic)
	happy, unhappy := uniqueID(t, "order-happy"), uniqueID(t, "order-unhappy")

	log := newEventLog()
	handle := func(ctx context.Context, r *azservicebus.SessionReceiver, m *azservicebus.ReceivedMessage) error {
		order := r.SessionID()
		kind, _ := m.ApplicationProperties["MessageType"].(string)
		raw, err := r.GetSessionState(ctx, nil)
		if err != nil {
			return fmt.Errorf("GetSessionState: %w", err)
		}
		var st sagaState
		started := raw != nil
		if started {
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("session state %q: %w", raw, err)
			}
		}
		switch kind {
		case "PaymentAccepted", "ItemShipped":
			if !started {
				// The first message of the saga schedules its timeout.
				timeout := orderMessage(order, "Timeout", "check "+order)
				if _, err := publisher.ScheduleMessages(ctx, []*azservicebus.Message{timeout}, time.Now().Add(sagaTimeout), nil); err != nil {
					return fmt.Errorf("scheduling the timeout: %w", err)
				}
			}
			if kind == "PaymentAccepted" {
				st.PaymentAccepted = true
			} else {
				st.ItemShipped = true
			}
			log.add(order, kind)
			if st.PaymentAccepted && st.ItemShipped {
				log.add(order, "completed")
				err = r.SetSessionState(ctx, nil, nil)
			} else {
				b, _ := json.Marshal(st)
				err = r.SetSessionState(ctx, b, nil)
			}
			if err != nil {
				return fmt.Errorf("SetSessionState: %w", err)
			}
		case "Timeout":
			if !started {
				log.add(order, "timeout discarded")
				break
			}
			log.add(order, fmt.Sprintf("compensated (payment %t, shipment %t)", st.PaymentAccepted, st.ItemShipped))
			if err := r.SetSessionState(ctx, nil, nil); err != nil {
				return fmt.Errorf("SetSessionState: %w", err)
			}
		default:
			log.add(order, "unexpected "+kind)
		}
		return r.CompleteMessage(ctx, m, nil)
	}

	// The happy order: payment now, shipment one second later (scheduled,
	// as the seed's Shipping service does), and an audit message no rule
	// of the orchestrator matches.
	send(t, publisher, orderMessage(happy, "PaymentAccepted", "Payment OK"), orderMessage(happy, "Audit", "not for the saga"))
	if _, err := publisher.ScheduleMessages(ctxFor(t, opTimeout), []*azservicebus.Message{orderMessage(happy, "ItemShipped", "Shipping OK")}, time.Now().Add(time.Second), nil); err != nil {
		t.Fatalf("scheduling ItemShipped: %v", err)
	}
	// The unhappy order: payment only.
	send(t, publisher, orderMessage(unhappy, "PaymentAccepted", "Payment OK"))

	finished := func(order string) bool {
		last := log.last(order)
		return last == "timeout discarded" || strings.HasPrefix(last, "compensated")
	}
	runSessionProcessors(t, handle, processorOptions{
		accept: func(ctx context.Context, c *azservicebus.Client) (*azservicebus.SessionReceiver, error) {
			return c.AcceptNextSessionForSubscription(ctx, topic, sub, nil)
		},
		concurrency: 2,
		acceptWait:  2 * time.Second,
		idle:        time.Second,
		done:        func() bool { return finished(happy) && finished(unhappy) },
		limit:       45 * time.Second,
		log:         log,
	})

	if got, want := log.get(happy), []string{"PaymentAccepted", "ItemShipped", "completed", "timeout discarded"}; !slices.Equal(got, want) {
		t.Errorf("order %s: saga did %q, want %q", happy, got, want)
	}
	if got, want := log.get(unhappy), []string{"PaymentAccepted", "compensated (payment true, shipment false)"}; !slices.Equal(got, want) {
		t.Errorf("order %s: saga did %q, want %q", unhappy, got, want)
	}
	// Both sagas cleared their state, and nothing is left in the
	// subscription (the audit message matched no rule).
	for _, order := range []string{happy, unhappy} {
		r, err := c.AcceptSessionForSubscription(ctxFor(t, opTimeout), topic, sub, order, nil)
		if err != nil {
			t.Fatalf("AcceptSessionForSubscription(%s): %v", order, err)
		}
		state, err := r.GetSessionState(ctxFor(t, opTimeout), nil)
		if err != nil || state != nil {
			t.Errorf("order %s: session state %q, %v after the saga ended; want nil", order, state, err)
		}
		if left := peekAll(t, r); len(left) > 0 {
			t.Errorf("order %s: session still holds %q", order, bodies(left))
		}
		_ = r.Close(ctxFor(t, opTimeout))
	}
}
