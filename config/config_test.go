package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadEmulatorFile(t *testing.T) {
	f, err := Load("testdata/emulator.json")
	if err != nil {
		t.Fatal(err)
	}
	if !f.IsEmulatorFile() {
		t.Fatal("IsEmulatorFile = false for an emulator file")
	}
	ns := f.UserConfig.Namespaces[0]
	if ns.Name != "sbemulatorns" || len(ns.Queues) != 1 || len(ns.Topics) != 1 {
		t.Fatalf("namespace = %+v", ns)
	}
	q := ns.Queues[0]
	if q.Name != "orders.in" || !*q.Properties.RequiresSession || *q.Properties.MaxDeliveryCount != 3 ||
		q.Properties.LockDuration.Duration != time.Minute || !q.Properties.LockDuration.Set ||
		q.Properties.DefaultMessageTimeToLive.Duration != time.Hour ||
		q.Properties.DuplicateDetectionHistoryTimeWindow.Duration != 20*time.Second ||
		!*q.Properties.DeadLetteringOnMessageExpiration || q.Properties.AutoDeleteOnIdle.Set {
		t.Fatalf("queue = %+v", q)
	}
	sub := ns.Topics[0].Subscriptions[0]
	if sub.Name != "orchestrator" || len(sub.Rules) != 2 {
		t.Fatalf("subscription = %+v", sub)
	}
	corr := sub.Rules[0].Properties.CorrelationFilter
	if corr.ContentType != "application/json" || corr.Properties["MessageType"] != "PaymentAccepted" {
		t.Fatalf("correlation filter = %+v", corr)
	}
	sql := sub.Rules[1].Properties
	if sql.SqlFilter.SqlExpression != "MessageType = 'ItemShipped' -- not a JSON comment" ||
		sql.Action.SqlExpression != "SET sys.To = 'Entity'" {
		t.Fatalf("sql rule = %+v %+v", sql.SqlFilter, sql.Action)
	}
}

func TestBusbarSection(t *testing.T) {
	f, err := Parse([]byte(`{"Busbar": {"AmqpAddr": "0.0.0.0:5672", "DataDir": "/var/lib/busbar",
		"SharedAccessPolicies": [{"KeyName": "app", "PrimaryKey": "k", "Rights": ["Send", "Listen"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.IsEmulatorFile() || f.Busbar.AMQPAddr != "0.0.0.0:5672" || f.Busbar.SharedAccessPolicies[0].KeyName != "app" {
		t.Fatalf("parsed %+v", f.Busbar)
	}
}

func TestParseErrors(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"unknown field":      {`{"UserConfig": {"Namespaces": [], "Colour": 1}}`, `unknown field "Colour"`},
		"bad duration":       {`{"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuration": "1 minute"}}]}]}}`, `invalid ISO 8601 duration "1 minute"`},
		"duration not text":  {`{"UserConfig": {"Namespaces": [{"Queues": [{"Name": "q", "Properties": {"LockDuration": 60}}]}]}}`, `want an ISO 8601 duration string`},
		"syntax error line":  {"{\n\"UserConfig\": {\n  \"Namespaces\": [,]\n}}", "line 3, column"},
		"type error line":    {"{\n\"UserConfig\": {\"Namespaces\": [{\"Queues\": [{\"Name\": 5}]}]}}", "line 2"},
		"two namespaces":     {`{"UserConfig": {"Namespaces": [{}, {}]}}`, "one namespace expected, found 2"},
		"bad filter type":    {`{"UserConfig": {"Namespaces": [{"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [{"Name": "r", "Properties": {"FilterType": "Regex"}}]}]}]}]}}`, `rule "r": FilterType "Regex"`},
		"sql without filter": {`{"UserConfig": {"Namespaces": [{"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [{"Name": "r", "Properties": {"FilterType": "Sql"}}]}]}]}]}}`, `needs a SqlFilter`},
		"policy without key": {`{"Busbar": {"SharedAccessPolicies": [{"KeyName": "a", "Rights": ["Send"]}]}}`, "KeyName and PrimaryKey are required"},
		"policy no rights":   {`{"Busbar": {"SharedAccessPolicies": [{"KeyName": "a", "PrimaryKey": "k"}]}}`, "Rights must list"},
		"tls half":           {`{"Busbar": {"TlsCertFile": "c.pem"}}`, "go together"},
		"open comment":       {`{"UserConfig": {} /* never closed`, "unterminated /* comment"},
		"trailing text":      {`{} {}`, "unexpected text after"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestStripCommentsKeepsStrings(t *testing.T) {
	in := `{"a": "x // y /* z */", "b\"//": 1} // tail` + "\n/* block\nspans */"
	out, err := stripComments([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a": "x // y /* z */", "b\"//": 1}        ` + "\n" + "        \n        "
	if string(out) != want {
		t.Fatalf("stripComments =\n%q\nwant\n%q", out, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"UserConfig": {"Namespaces": [{"Name": "n", "Queues": [{"Name": "q", "Properties": {"LockDuration": "PT1M"}}]}]}}`))
	f.Add([]byte(`{"Busbar": {"SharedAccessPolicies": [{"KeyName": "a", "PrimaryKey": "k", "Rights": ["Send"]}]}} // c`))
	f.Add([]byte(`/* x */ {"a": "/*"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Parse(b)
	})
}
