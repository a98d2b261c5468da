package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// showJSON runs a show command with --json and decodes it.
func (c *cli) showJSON(args ...string) (props, runtime map[string]any) {
	c.t.Helper()
	out := c.ok(append(args, "--json")...)
	var got struct {
		Properties map[string]any
		Runtime    map[string]any
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		c.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return got.Properties, got.Runtime
}

func TestQueueLifecycle(t *testing.T) {
	c := newCLI(t)
	if out := c.ok("queue", "create", "orders", "--lock-duration", "30s", "--max-delivery-count", "5", "--ttl", "14d", "--sessions",
		"--duplicate-detection", "--duplicate-window", "5m", "--dead-letter-on-expiration"); out != "created queue orders\n" {
		t.Fatalf("create printed %q", out)
	}
	c.ok("queue", "create", "archive")
	p, rt := c.showJSON("queue", "show", "orders")
	want := map[string]any{"LockDuration": "PT30S", "MaxDeliveryCount": float64(5), "DefaultMessageTimeToLive": "P14D", "RequiresSession": true,
		"RequiresDuplicateDetection": true, "DuplicateDetectionHistoryTimeWindow": "PT5M", "DeadLetteringOnMessageExpiration": true, "Status": "Active"}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("queue show: %s = %v, want %v", k, p[k], v)
		}
	}
	if rt["ActiveMessageCount"] != float64(0) {
		t.Errorf("runtime = %v", rt)
	}
	table := c.ok("queue", "show", "orders")
	for _, line := range []string{"Name", "LockDuration", "PT30S (30s)", "MaxDeliveryCount", "ActiveMessageCount"} {
		if !strings.Contains(table, line) {
			t.Errorf("queue show table lacks %q:\n%s", line, table)
		}
	}

	// update changes only what is given.
	c.ok("queue", "update", "orders", "--max-delivery-count", "20", "--status", "sendDisabled")
	p, _ = c.showJSON("queue", "show", "orders")
	if p["MaxDeliveryCount"] != float64(20) || p["Status"] != "SendDisabled" || p["LockDuration"] != "PT30S" || p["RequiresSession"] != true {
		t.Fatalf("after update: %v", p)
	}
	c.expect(exitUsage, "queue", "update", "orders")

	list := c.ok("queue", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "archive ") || !strings.HasPrefix(lines[2], "orders ") ||
		!strings.Contains(lines[2], "SendDisabled") {
		t.Fatalf("queue list:\n%s", list)
	}
	var listed []entityJSON
	if err := json.Unmarshal([]byte(c.ok("queue", "list", "--json")), &listed); err != nil || len(listed) != 2 || listed[1].Name != "orders" {
		t.Fatalf("queue list --json: %v %+v", err, listed)
	}

	if out := c.ok("queue", "delete", "orders"); out != "deleted queue orders\n" {
		t.Fatalf("delete printed %q", out)
	}
	c.expect(exitNotFound, "queue", "show", "orders")
	c.expect(exitNotFound, "queue", "update", "orders", "--max-delivery-count", "3")
	c.expect(exitNotFound, "queue", "delete", "orders")
	if r := c.run("queue", "create", "archive"); r.code != exitError || !strings.Contains(r.stderr, "archive") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("creating an existing queue: exit %d, %q", r.code, r.stderr)
	}
}

func TestTopicSubscriptionRuleLifecycle(t *testing.T) {
	c := newCLI(t)
	c.ok("topic", "create", "events", "--ttl", "7d", "--duplicate-detection")
	p, _ := c.showJSON("topic", "show", "events")
	if p["DefaultMessageTimeToLive"] != "P7D" || p["RequiresDuplicateDetection"] != true {
		t.Fatalf("topic show: %v", p)
	}
	c.ok("topic", "update", "events", "--ttl", "1d")
	if p, _ = c.showJSON("topic", "show", "events"); p["DefaultMessageTimeToLive"] != "P1D" || p["RequiresDuplicateDetection"] != true {
		t.Fatalf("topic after update: %v", p)
	}

	c.ok("subscription", "create", "events", "eu", "--sql", "region = 'eu'", "--action", "SET routed = 1", "--max-delivery-count", "3")
	c.ok("subscription", "create", "events", "all")
	c.ok("queue", "create", "sink")
	c.ok("subscription", "update", "events", "all", "--forward-to", "sink")
	if p, _ = c.showJSON("subscription", "show", "events", "all"); !strings.HasSuffix(p["ForwardTo"].(string), "sink") {
		t.Fatalf("forward-to not set: %v", p)
	}
	p, _ = c.showJSON("subscription", "show", "events", "eu")
	if p["MaxDeliveryCount"] != float64(3) {
		t.Fatalf("subscription show: %v", p)
	}
	c.ok("subscription", "update", "events", "eu", "--max-delivery-count", "4", "--sessions=false")
	if p, _ = c.showJSON("subscription", "show", "events", "eu"); p["MaxDeliveryCount"] != float64(4) {
		t.Fatalf("subscription after update: %v", p)
	}
	subs := c.ok("subscription", "list", "events")
	if lines := strings.Split(strings.TrimSpace(subs), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "all ") || !strings.HasPrefix(lines[2], "eu ") {
		t.Fatalf("subscription list:\n%s", subs)
	}
	if tl := c.ok("topic", "list"); !strings.Contains(tl, "events") || !strings.Contains(strings.Split(tl, "\n")[1], " 2 ") {
		t.Fatalf("topic list:\n%s", tl)
	}

	// The subscription's default rule carries the filter and action given.
	var rules []ruleJSON
	if err := json.Unmarshal([]byte(c.ok("rule", "list", "events", "eu", "--json")), &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Name != "$Default" || rules[0].Filter["sql"] != "region = 'eu'" || rules[0].Action == nil || *rules[0].Action != "SET routed = 1" {
		t.Fatalf("rules of eu = %+v", rules)
	}

	c.ok("rule", "create", "events", "eu", "invoices", "--correlation-subject", "invoice", "--correlation-property", "tier:int=2", "--correlation-id", "c1")
	var r ruleJSON
	if err := json.Unmarshal([]byte(c.ok("rule", "show", "events", "eu", "invoices", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	props, _ := r.Filter["properties"].(map[string]any)
	if r.Filter["type"] != "correlation" || r.Filter["subject"] != "invoice" || r.Filter["id"] != "c1" || props["tier"] != float64(2) || r.Action != nil {
		t.Fatalf("rule show = %+v", r)
	}
	if out := c.ok("rule", "show", "events", "eu", "invoices"); !strings.Contains(out, "correlation: id=c1, subject=invoice, tier=2") {
		t.Fatalf("rule show table:\n%s", out)
	}
	c.ok("rule", "create", "events", "eu", "everything")
	c.ok("rule", "update", "events", "eu", "invoices", "--action", "SET seen = true")
	c.ok("rule", "update", "events", "eu", "$Default", "--sql", "region = 'de'", "--action", "")
	list := c.ok("rule", "list", "events", "eu")
	want := []string{"NAME", "$Default", "region = 'de'", "everything", "true", "invoices", "SET seen = true"}
	for _, w := range want {
		if !strings.Contains(list, w) {
			t.Fatalf("rule list lacks %q:\n%s", w, list)
		}
	}
	if strings.Contains(list, "SET routed") {
		t.Fatalf("rule update --action \"\" kept the action:\n%s", list)
	}
	c.expect(exitUsage, "rule", "update", "events", "eu", "invoices")
	c.ok("rule", "delete", "events", "eu", "everything")
	c.expect(exitNotFound, "rule", "show", "events", "eu", "everything")
	c.expect(exitNotFound, "rule", "delete", "events", "eu", "everything")

	c.ok("subscription", "delete", "events", "eu")
	c.expect(exitNotFound, "subscription", "show", "events", "eu")
	c.ok("topic", "delete", "events")
	c.expect(exitNotFound, "topic", "show", "events")
	c.expect(exitNotFound, "subscription", "list", "events")
}
