package conformance

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/sas"
)

// TestAccessedAt: a queue's AccessedAt is the zero time until a client
// uses it, then the time of that use (Microsoft's admin tests assert both);
// a subscription's is set from its creation.
func TestAccessedAt(t *testing.T) {
	t.Parallel()
	ac := adminOnly(t)
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

// TestRuleParameters: SQL filters and SQL rule actions take @parameters,
// given beside the expression; the rule comes back with them (types kept)
// and the subscription's copy of a message is filtered and changed with
// their values.
func TestRuleParameters(t *testing.T) {
	t.Parallel()
	ac := adminOnly(t)
	topic := entityName("ruleparams")
	if _, err := ac.CreateTopic(ctxFor(t, opTimeout), topic, nil); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	t.Cleanup(func() { _, _ = ac.DeleteTopic(ctxFor(t, opTimeout), topic, nil) })
	rule := admin.RuleProperties{
		Name:   "params",
		Filter: &admin.SQLFilter{Expression: "region = @region", Parameters: map[string]any{"@region": "eu"}},
		Action: &admin.SQLAction{Expression: "SET routed = @how",
			Parameters: map[string]any{"@how": "by-rule", "@level": int64(7)}}, // @level unused: kept all the same
	}
	if _, err := ac.CreateSubscription(ctxFor(t, opTimeout), topic, "s", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{DefaultRule: &rule}}); err != nil {
		t.Fatalf("CreateSubscription with a parameterized rule: %v", err)
	}
	got, err := ac.GetRule(ctxFor(t, opTimeout), topic, "s", "params", nil)
	if err != nil || got == nil {
		t.Fatalf("GetRule: %v, %v", got, err)
	}
	act, ok := got.Action.(*admin.SQLAction)
	if !ok || act.Parameters["@how"] != "by-rule" || act.Parameters["@level"] != int64(7) {
		t.Fatalf("rule action came back as %#v, want its parameters", got.Action)
	}
	if f, ok := got.Filter.(*admin.SQLFilter); !ok || f.Parameters["@region"] != "eu" {
		t.Fatalf("rule filter came back as %#v, want its parameter", got.Filter)
	}
	c := newClient(t)
	s := newSender(t, c, topic)
	send(t, s, &azservicebus.Message{Body: []byte("us"), ApplicationProperties: map[string]any{"region": "us"}},
		&azservicebus.Message{Body: []byte("eu"), ApplicationProperties: map[string]any{"region": "eu"}})
	r := newSubReceiver(t, c, topic, "s", nil)
	m := receiveOne(t, r)
	if string(m.Body) != "eu" || m.ApplicationProperties["routed"] != "by-rule" {
		t.Fatalf("received %q with properties %v, want the eu message with routed=by-rule", m.Body, m.ApplicationProperties)
	}
	complete(t, r, m)
	requireEmpty(t, r, "the subscription")
}

// adminOnly returns the management client, skipping the test when the
// suite declares its entities in a configuration file instead.
func adminOnly(t *testing.T) *admin.Client {
	t.Helper()
	harness(t)
	if suite.mode != "admin" {
		t.Skip("needs the management API")
	}
	return adminClient()
}

// TestEntityAuthorizationRules: a queue created with an authorization rule
// of its own keeps it (GetQueue returns it), and a client with that rule's
// key may do on that queue what the rule grants (here Send), nothing more,
// and nothing on other queues.
func TestEntityAuthorizationRules(t *testing.T) {
	t.Parallel()
	ac := adminOnly(t)
	q, other := entityName("authrules"), entityName("authrules-other")
	key := base64.StdEncoding.EncodeToString([]byte("a key of this queue's own, 32 b!"))
	rules := []admin.AuthorizationRule{{KeyName: ptr("writer"), PrimaryKey: &key, AccessRights: []admin.AccessRight{admin.AccessRightSend}}}
	if _, err := ac.CreateQueue(ctxFor(t, opTimeout), q, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{AuthorizationRules: rules}}); err != nil {
		t.Fatalf("CreateQueue with an authorization rule: %v", err)
	}
	t.Cleanup(func() { _, _ = ac.DeleteQueue(ctxFor(t, opTimeout), q, nil) })
	if _, err := ac.CreateQueue(ctxFor(t, opTimeout), other, nil); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	t.Cleanup(func() { _, _ = ac.DeleteQueue(ctxFor(t, opTimeout), other, nil) })
	got, err := ac.GetQueue(ctxFor(t, opTimeout), q, nil)
	if err != nil || got == nil {
		t.Fatalf("GetQueue: %v, %v", got, err)
	}
	if len(got.AuthorizationRules) != 1 || strValue(got.AuthorizationRules[0].KeyName) != "writer" ||
		strValue(got.AuthorizationRules[0].PrimaryKey) != key || len(got.AuthorizationRules[0].AccessRights) != 1 ||
		got.AuthorizationRules[0].AccessRights[0] != admin.AccessRightSend {
		t.Fatalf("GetQueue returned authorization rules %+v, want the one created", got.AuthorizationRules)
	}

	cs := replaceKey(sas.ReplaceField(suite.connStr, "SharedAccessKeyName", "writer"), key)
	c := newClientFor(t, cs)
	send(t, newSender(t, c, q), textMessage("with the queue's own key"))
	requireCode(t, newSender(t, c, other).SendMessage(ctxFor(t, opTimeout), textMessage("x"), nil), azservicebus.CodeUnauthorizedAccess)
	_, err = newQueueReceiver(t, c, q, nil).ReceiveMessages(ctxFor(t, opTimeout), 1, nil)
	requireCode(t, err, azservicebus.CodeUnauthorizedAccess)
	m := receiveOne(t, newQueueReceiver(t, newClient(t), q, nil))
	if string(m.Body) != "with the queue's own key" {
		t.Fatalf("received %q", m.Body)
	}
}
