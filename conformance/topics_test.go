package conformance

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Topics: fan-out to subscriptions, SQL and correlation filters, several
// rules on one subscription, and rule actions.

var filterTopic = declareTopic("filters", admin.TopicProperties{},
	subSpec{name: "all"},
	subSpec{name: "none", rules: []admin.RuleProperties{{Name: "never", Filter: &admin.FalseFilter{}}}},
	subSpec{name: "sql-high", rules: []admin.RuleProperties{
		{Name: "high-eu", Filter: &admin.SQLFilter{Expression: "priority > 5 AND region = 'eu'"}},
	}},
	subSpec{name: "corr-orders", rules: []admin.RuleProperties{
		{Name: "new-orders", Filter: &admin.CorrelationFilter{Subject: ptr("order"), ApplicationProperties: map[string]any{"kind": "new"}}},
	}},
	subSpec{name: "corr-id", rules: []admin.RuleProperties{
		{Name: "by-correlation-id", Filter: &admin.CorrelationFilter{CorrelationID: ptr("c-42")}},
	}},
	subSpec{name: "either", rules: []admin.RuleProperties{
		{Name: "us", Filter: &admin.SQLFilter{Expression: "region = 'us'"}},
		{Name: "invoices", Filter: &admin.CorrelationFilter{Subject: ptr("invoice")}},
	}},
	subSpec{name: "action", rules: []admin.RuleProperties{
		{Name: "route-new", Filter: &admin.SQLFilter{Expression: "kind = 'new'"}, Action: &admin.SQLAction{Expression: "SET routed = 'yes'; REMOVE secret"}},
	}},
)

// TestTopicFilters: each subscription gets exactly the messages its rules
// match, once each; rule actions change only the subscription's copy.
func TestTopicFilters(t *testing.T) {
	t.Parallel()
	topic := filterTopic.create(t)
	c := newClient(t)
	send(t, newSender(t, c, topic),
		&azservicebus.Message{Body: []byte("m1"), Subject: ptr("order"),
			ApplicationProperties: map[string]any{"kind": "new", "priority": int64(9), "region": "eu", "secret": "s"}},
		&azservicebus.Message{Body: []byte("m2"), Subject: ptr("order"), CorrelationID: ptr("c-42"),
			ApplicationProperties: map[string]any{"kind": "update", "priority": int64(1), "region": "us"}},
		&azservicebus.Message{Body: []byte("m3"), Subject: ptr("invoice"),
			ApplicationProperties: map[string]any{"kind": "new", "priority": int64(6), "region": "eu", "secret": "s"}},
	)

	want := map[string][]string{
		"all":         {"m1", "m2", "m3"},
		"none":        nil,
		"sql-high":    {"m1", "m3"},
		"corr-orders": {"m1"},
		"corr-id":     {"m2"},
		"either":      {"m2", "m3"},
		"action":      {"m1", "m3"},
	}
	got := map[string][]*azservicebus.ReceivedMessage{}
	for sub, bodiesWanted := range want {
		r := newSubReceiver(t, c, topic, sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if len(bodiesWanted) > 0 {
			got[sub] = receiveN(t, r, len(bodiesWanted), receiveTimeout)
		}
		if b := bodies(got[sub]); !equalStrings(b, bodiesWanted) {
			t.Errorf("subscription %s received %q, want %q", sub, b, bodiesWanted)
		}
		// Nothing more: no extra copies, nothing unmatched.
		if rest := peekAll(t, r); len(rest) > 0 {
			t.Errorf("subscription %s also holds %q, want nothing more", sub, bodies(rest))
		}
	}

	for _, m := range got["action"] {
		if v := m.ApplicationProperties["routed"]; v != "yes" {
			t.Errorf("action subscription: %q has routed = %#v, want %q", m.Body, v, "yes")
		}
		if _, ok := m.ApplicationProperties["secret"]; ok {
			t.Errorf("action subscription: %q still has the property the action removed", m.Body)
		}
		if m.ApplicationProperties["kind"] != "new" {
			t.Errorf("action subscription: %q lost its kind property: %v", m.Body, m.ApplicationProperties)
		}
	}
	for _, m := range got["all"] {
		if _, ok := m.ApplicationProperties["routed"]; ok {
			t.Errorf("subscription all: %q carries the other subscription's action result", m.Body)
		}
		if string(m.Body) != "m2" && m.ApplicationProperties["secret"] != "s" {
			t.Errorf("subscription all: %q lost a property another subscription's action removed", m.Body)
		}
	}
}
