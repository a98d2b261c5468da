package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// These tests drive the handler with the official Go administration client
// (azservicebus/admin v1.11.0), as a user of the emulator would.

func responseError(t *testing.T, err error, status int, detail string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not an *azcore.ResponseError", err)
	}
	if re.StatusCode != status {
		t.Fatalf("status %d, want %d (%v)", re.StatusCode, status, err)
	}
	if !strings.Contains(err.Error(), detail) {
		t.Fatalf("error %q does not contain %q", err, detail)
	}
}

func TestGoClientQueueLifecycle(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, "target", nil); err != nil {
		t.Fatal(err)
	}
	props := sbadmin.QueueProperties{
		LockDuration:                        ptr("PT45S"),
		MaxSizeInMegabytes:                  ptr(int32(2048)),
		RequiresDuplicateDetection:          ptr(true),
		RequiresSession:                     ptr(false),
		DefaultMessageTimeToLive:            ptr("P2D"),
		DeadLetteringOnMessageExpiration:    ptr(true),
		DuplicateDetectionHistoryTimeWindow: ptr("PT30M"),
		MaxDeliveryCount:                    ptr(int32(7)),
		EnableBatchedOperations:             ptr(false),
		Status:                              ptr(sbadmin.EntityStatusSendDisabled),
		AutoDeleteOnIdle:                    ptr("PT2H"),
		EnablePartitioning:                  ptr(false),
		ForwardTo:                           ptr("sb://" + e.host + "/target"),
		ForwardDeadLetteredMessagesTo:       ptr("sb://" + e.host + "/target"),
		UserMetadata:                        ptr("owner=<team a>"),
		MaxMessageSizeInKilobytes:           ptr(int64(512)),
	}
	created, err := c.CreateQueue(ctx, "orders", &sbadmin.CreateQueueOptions{Properties: &props})
	if err != nil {
		t.Fatal(err)
	}
	if created.QueueName != "orders" || !reflect.DeepEqual(created.QueueProperties, props) {
		t.Fatalf("created %+v\nwant %+v", created.QueueProperties, props)
	}
	got, err := c.GetQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.QueueName != "orders" || !reflect.DeepEqual(got.QueueProperties, props) {
		t.Fatalf("got %+v\nwant %+v", got.QueueProperties, props)
	}

	// Creating it again is a conflict.
	_, err = c.CreateQueue(ctx, "ORDERS", nil)
	responseError(t, err, http.StatusConflict, "already exists")

	// Update what GetQueue returned, as the SDK documents.
	upd := got.QueueProperties
	upd.MaxDeliveryCount = ptr(int32(3))
	upd.Status = ptr(sbadmin.EntityStatusActive)
	upd.UserMetadata = ptr("v2")
	upd.ForwardTo = nil // not sent: stays as it is
	updated, err := c.UpdateQueue(ctx, "orders", upd, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := props
	want.MaxDeliveryCount, want.Status, want.UserMetadata = ptr(int32(3)), ptr(sbadmin.EntityStatusActive), ptr("v2")
	if !reflect.DeepEqual(updated.QueueProperties, want) {
		t.Fatalf("updated %+v\nwant %+v", updated.QueueProperties, want)
	}
	info, err := e.b.GetQueue(ctx, "orders")
	if err != nil || info.Properties.MaxDeliveryCount != 3 || info.Properties.ForwardTo != "target" {
		t.Fatalf("broker sees %+v, %v", info, err)
	}

	// An update that the broker refuses changes nothing.
	bad := upd
	bad.LockDuration = ptr("PT10M")
	_, err = c.UpdateQueue(ctx, "orders", bad, nil)
	responseError(t, err, http.StatusBadRequest, "LockDuration 10m0s is outside [5s, 5m0s]")
	again, err := c.GetQueue(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "queue after a refused update", again.QueueProperties, want)

	// Update of a missing queue is a 404.
	_, err = c.UpdateQueue(ctx, "missing", sbadmin.QueueProperties{}, nil)
	responseError(t, err, http.StatusNotFound, "does not exist")

	if _, err := c.DeleteQueue(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	gone, err := c.GetQueue(ctx, "orders", nil)
	if gone != nil || err != nil {
		t.Fatalf("GetQueue of a deleted queue = %+v, %v; want nil, nil", gone, err)
	}
	rt, err := c.GetQueueRuntimeProperties(ctx, "orders", nil)
	if rt != nil || err != nil {
		t.Fatalf("GetQueueRuntimeProperties of a deleted queue = %+v, %v; want nil, nil", rt, err)
	}
	_, err = c.DeleteQueue(ctx, "orders", nil)
	responseError(t, err, http.StatusNotFound, "could not be found")
}

func TestGoClientQueueDefaults(t *testing.T) {
	e := newEnv(t)
	got, err := e.root().CreateQueue(context.Background(), "plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sbadmin.QueueProperties{
		LockDuration: ptr("PT1M"), MaxSizeInMegabytes: ptr(int32(1024)), RequiresDuplicateDetection: ptr(false),
		RequiresSession: ptr(false), DefaultMessageTimeToLive: ptr("P10675199DT2H48M5.4775807S"),
		DeadLetteringOnMessageExpiration: ptr(false), DuplicateDetectionHistoryTimeWindow: ptr("PT10M"),
		MaxDeliveryCount: ptr(int32(10)), EnableBatchedOperations: ptr(false), Status: ptr(sbadmin.EntityStatusActive),
		AutoDeleteOnIdle: ptr("P10675199DT2H48M5.4775807S"), EnablePartitioning: ptr(false),
		MaxMessageSizeInKilobytes: ptr(int64(1024)),
	}
	if !reflect.DeepEqual(got.QueueProperties, want) {
		t.Fatalf("defaults %+v\nwant %+v", got.QueueProperties, want)
	}
}

func TestGoClientListPaging(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	var want []string
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("q%02d", i)
		want = append(want, name)
		if _, err := c.CreateQueue(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTopic(ctx, "t"+name, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, pageSize := range []int32{0, 1, 3, 7, 100} {
		var got []string
		pages := 0
		pager := c.NewListQueuesPager(&sbadmin.ListQueuesOptions{MaxPageSize: pageSize})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pageSize > 0 && len(page.Queues) > int(pageSize) {
				t.Fatalf("page of %d items, max %d", len(page.Queues), pageSize)
			}
			for _, q := range page.Queues {
				got = append(got, q.QueueName)
			}
			pages++
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("page size %d: listed %v, want %v", pageSize, got, want)
		}
		var topics []string
		tp := c.NewListTopicsRuntimePropertiesPager(&sbadmin.ListTopicsRuntimePropertiesOptions{MaxPageSize: pageSize})
		for tp.More() {
			page, err := tp.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page.TopicRuntimeProperties {
				topics = append(topics, x.TopicName)
			}
		}
		if len(topics) != 7 || topics[0] != "tq00" || topics[6] != "tq06" {
			t.Fatalf("page size %d: topics %v", pageSize, topics)
		}
	}
}

func TestGoClientTopicSubscriptionRules(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	tprops := sbadmin.TopicProperties{
		MaxSizeInMegabytes: ptr(int32(5120)), RequiresDuplicateDetection: ptr(true),
		DefaultMessageTimeToLive: ptr("PT12H"), DuplicateDetectionHistoryTimeWindow: ptr("PT1M"),
		EnableBatchedOperations: ptr(true), Status: ptr(sbadmin.EntityStatusActive), AutoDeleteOnIdle: ptr("P7D"),
		EnablePartitioning: ptr(false), SupportOrdering: ptr(true), UserMetadata: ptr("topic meta"),
		MaxMessageSizeInKilobytes: ptr(int64(256)),
	}
	ct, err := c.CreateTopic(ctx, "events", &sbadmin.CreateTopicOptions{Properties: &tprops})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ct.TopicProperties, tprops) {
		t.Fatalf("topic %+v\nwant %+v", ct.TopicProperties, tprops)
	}
	if _, err := c.CreateQueue(ctx, "sink", nil); err != nil {
		t.Fatal(err)
	}
	sprops := sbadmin.SubscriptionProperties{
		LockDuration: ptr("PT2M"), RequiresSession: ptr(true), DefaultMessageTimeToLive: ptr("PT6H"),
		DeadLetteringOnMessageExpiration: ptr(true), EnableDeadLetteringOnFilterEvaluationExceptions: ptr(true),
		MaxDeliveryCount: ptr(int32(4)), Status: ptr(sbadmin.EntityStatusActive), // the Go client never sends Status of a subscription
		ForwardDeadLetteredMessagesTo: ptr("sb://" + e.host + "/sink"), UserMetadata: ptr("sub meta"),
		AutoDeleteOnIdle: ptr("PT3H"), EnableBatchedOperations: ptr(true),
	}
	cs, err := c.CreateSubscription(ctx, "events", "audit", &sbadmin.CreateSubscriptionOptions{Properties: &sprops})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "created subscription", cs.SubscriptionProperties, sprops)
	// A subscription created with a default rule gets it instead of $Default.
	_, err = c.CreateSubscription(ctx, "events", "blue", &sbadmin.CreateSubscriptionOptions{Properties: &sbadmin.SubscriptionProperties{
		DefaultRule: &sbadmin.RuleProperties{Name: "only-blue", Filter: &sbadmin.SQLFilter{Expression: "color = 'blue'"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rules := listRules(t, c, "events", "blue", 0)
	if len(rules) != 1 || rules[0].Name != "only-blue" || !reflect.DeepEqual(rules[0].Filter, &sbadmin.SQLFilter{Expression: "color = 'blue'"}) {
		t.Fatalf("rules of blue = %+v", rules)
	}

	// Rules of every kind round-trip.
	created := []sbadmin.RuleProperties{
		{Name: "corr", Filter: &sbadmin.CorrelationFilter{
			ContentType: ptr("application/json"), CorrelationID: ptr("c1"), MessageID: ptr("m1"), ReplyTo: ptr("r1"),
			ReplyToSessionID: ptr("rs1"), SessionID: ptr("s1"), Subject: ptr("subj"), To: ptr("to1"),
			ApplicationProperties: map[string]any{"region": "eu", "prio": int64(2), "vip": true, "score": 2.5,
				"at": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}},
		{Name: "sql", Filter: &sbadmin.SQLFilter{Expression: "size > @min AND kind = @kind",
			Parameters: map[string]any{"@min": int64(10), "@kind": "x"}},
			Action: &sbadmin.SQLAction{Expression: "SET routed = TRUE"}},
		{Name: "yes", Filter: &sbadmin.TrueFilter{}},
		{Name: "no", Filter: &sbadmin.FalseFilter{}},
	}
	for _, rp := range created {
		got, err := c.CreateRule(ctx, "events", "audit", &sbadmin.CreateRuleOptions{Name: ptr(rp.Name), Filter: rp.Filter, Action: rp.Action})
		if err != nil {
			t.Fatalf("rule %s: %v", rp.Name, err)
		}
		if !reflect.DeepEqual(got.RuleProperties, rp) {
			t.Fatalf("created rule %+v\nwant %+v", got.RuleProperties, rp)
		}
		one, err := c.GetRule(ctx, "events", "audit", rp.Name, nil)
		if err != nil || !reflect.DeepEqual(one.RuleProperties, rp) {
			t.Fatalf("GetRule %s = %+v, %v", rp.Name, one, err)
		}
	}
	_, err = c.CreateRule(ctx, "events", "audit", &sbadmin.CreateRuleOptions{Name: ptr("sql"), Filter: &sbadmin.TrueFilter{}})
	responseError(t, err, http.StatusConflict, "has a rule")
	_, err = c.CreateRule(ctx, "events", "audit", &sbadmin.CreateRuleOptions{Name: ptr("broken"), Filter: &sbadmin.SQLFilter{Expression: "a ="}})
	responseError(t, err, http.StatusBadRequest, "Filter.SqlExpression")

	// Paging over rules, in name order, $Default included.
	names := []string{}
	for _, r := range listRules(t, c, "events", "audit", 2) {
		names = append(names, r.Name)
	}
	if want := []string{"$Default", "corr", "no", "sql", "yes"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("rules %v, want %v", names, want)
	}

	// Update a rule.
	upd := sbadmin.RuleProperties{Name: "sql", Filter: &sbadmin.SQLFilter{Expression: "size > 99"}}
	ur, err := c.UpdateRule(ctx, "events", "audit", upd)
	if err != nil || !reflect.DeepEqual(ur.RuleProperties, upd) {
		t.Fatalf("UpdateRule = %+v, %v", ur, err)
	}
	_, err = c.UpdateRule(ctx, "events", "audit", sbadmin.RuleProperties{Name: "absent", Filter: &sbadmin.TrueFilter{}})
	responseError(t, err, http.StatusNotFound, "does not exist")

	// Update the subscription and the topic.
	sub, err := c.GetSubscription(ctx, "events", "audit", nil)
	if err != nil || !reflect.DeepEqual(sub.SubscriptionProperties, sprops) {
		t.Fatalf("GetSubscription = %+v, %v", sub, err)
	}
	sub.MaxDeliveryCount = ptr(int32(9))
	us, err := c.UpdateSubscription(ctx, "events", "audit", sub.SubscriptionProperties, nil)
	if err != nil || *us.MaxDeliveryCount != 9 || *us.LockDuration != "PT2M" {
		t.Fatalf("UpdateSubscription = %+v, %v", us, err)
	}
	top, err := c.GetTopic(ctx, "events", nil)
	if err != nil {
		t.Fatal(err)
	}
	top.UserMetadata = ptr("changed")
	ut, err := c.UpdateTopic(ctx, "events", top.TopicProperties, nil)
	if err != nil || *ut.UserMetadata != "changed" || *ut.MaxSizeInMegabytes != 5120 {
		t.Fatalf("UpdateTopic = %+v, %v", ut, err)
	}

	// Listing subscriptions, and runtime properties including filter counts.
	var subs []string
	sp := c.NewListSubscriptionsPager("events", &sbadmin.ListSubscriptionsOptions{MaxPageSize: 1})
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Subscriptions {
			subs = append(subs, s.SubscriptionName)
		}
	}
	if !reflect.DeepEqual(subs, []string{"audit", "blue"}) {
		t.Fatalf("subscriptions %v", subs)
	}
	trt, err := c.GetTopicRuntimeProperties(ctx, "events", nil)
	if err != nil {
		t.Fatal(err)
	}
	// audit: $Default, corr, no, sql, yes; blue: only-blue.
	if trt.SubscriptionCount != 2 || trt.SQLFilterCount != 5 || trt.CorrelationFilterCount != 1 {
		t.Fatalf("topic runtime %+v", trt.TopicRuntimeProperties)
	}

	// Deleting: a rule, a missing rule, a subscription, the topic.
	if _, err := c.DeleteRule(ctx, "events", "audit", "corr", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := c.GetRule(ctx, "events", "audit", "corr", nil); r != nil || err != nil {
		t.Fatalf("GetRule after delete = %+v, %v", r, err)
	}
	_, err = c.DeleteRule(ctx, "events", "audit", "corr", nil)
	responseError(t, err, http.StatusNotFound, "no rule")
	if _, err := c.DeleteSubscription(ctx, "events", "blue", nil); err != nil {
		t.Fatal(err)
	}
	if s, err := c.GetSubscription(ctx, "events", "blue", nil); s != nil || err != nil {
		t.Fatalf("GetSubscription after delete = %+v, %v", s, err)
	}
	if _, err := c.DeleteTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if tp, err := c.GetTopic(ctx, "events", nil); tp != nil || err != nil {
		t.Fatalf("GetTopic after delete = %+v, %v", tp, err)
	}
	if s, err := c.GetSubscription(ctx, "events", "audit", nil); s != nil || err != nil {
		t.Fatalf("GetSubscription of a deleted topic = %+v, %v", s, err)
	}
}

// mustEqual compares with reflect.DeepEqual and shows both sides as JSON
// (pointers followed) when they differ.
func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func listRules(t *testing.T, c *sbadmin.Client, topic, sub string, pageSize int32) []sbadmin.RuleProperties {
	t.Helper()
	var out []sbadmin.RuleProperties
	p := c.NewListRulesPager(topic, sub, &sbadmin.ListRulesOptions{MaxPageSize: pageSize})
	for p.More() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Rules...)
	}
	return out
}

func TestGoClientNamespaceAndAuth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ns, err := e.root().GetNamespaceProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Name != "busbar-test" || ns.SKU != "Premium" || ns.MessagingUnits == nil || *ns.MessagingUnits != 1 || ns.CreatedTime.IsZero() {
		t.Fatalf("namespace %+v", ns)
	}

	_, err = e.client(rootKeyName, "wrong-key", "").GetQueue(ctx, "q", nil)
	responseError(t, err, http.StatusUnauthorized, "invalid signature")
	_, err = e.client("NoSuchKey", rootKey, "").CreateQueue(ctx, "q", nil)
	responseError(t, err, http.StatusUnauthorized, "unknown shared access key name")
	// A valid key without Manage gets the service's 401 texts; reading a
	// missing entity stays "not found".
	_, err = e.client(listenName, listenKey, "").CreateQueue(ctx, "q", nil)
	responseError(t, err, http.StatusUnauthorized, "Authorization failed for specified action: Manage,EntityWrite.")
	if rt, err := e.client(listenName, listenKey, "").GetQueueRuntimeProperties(ctx, "q", nil); err != nil || rt != nil {
		t.Fatalf("reading a missing queue without Manage: %v, %v; want not found (nil, nil)", rt, err)
	}
	if _, err := e.b.GetQueue(ctx, "q"); err == nil {
		t.Fatal("a refused request created the queue")
	}

	// Every api-version the clients send works.
	for _, v := range APIVersions {
		if _, err := e.client(rootKeyName, rootKey, v).CreateQueue(ctx, "v"+strings.ReplaceAll(v, "-", ""), nil); err != nil {
			t.Fatalf("api-version %s: %v", v, err)
		}
	}
	_, err = e.client(rootKeyName, rootKey, "2099-01").GetQueue(ctx, "q", nil)
	responseError(t, err, http.StatusBadRequest, `api-version "2099-01" is not supported`)
}
