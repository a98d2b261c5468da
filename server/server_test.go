package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/config"
)

// emulatorConfig is an emulator Config.json: a session queue, and a topic
// whose subscription has the given rules.
func emulatorConfig(t *testing.T, maxDelivery int, rules string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(`{
	  // the emulator's format, comments and all
	  "UserConfig": {
	    "Namespaces": [{
	      "Name": "sbemulatorns",
	      "Queues": [{ "Name": "orders", "Properties": {
	        "RequiresSession": true, "MaxDeliveryCount": ` + strconv.Itoa(maxDelivery) + `, "LockDuration": "PT30S",
	        "DuplicateDetectionHistoryTimeWindow": "PT5S" } }],
	      "Topics": [{ "Name": "orchestration", "Properties": {},
	        "Subscriptions": [{ "Name": "orchestrator", "Properties": { "RequiresSession": true },
	          "Rules": [` + rules + `] }] }]
	    }],
	    "Logging": { "Type": "Console" }
	  }
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const (
	paymentRule  = `{ "Name": "payments", "Properties": { "FilterType": "Correlation", "CorrelationFilter": { "Properties": { "MessageType": "PaymentAccepted" } } } }`
	shippingRule = `{ "Name": "shipping", "Properties": { "FilterType": "Sql", "SqlFilter": { "SqlExpression": "MessageType = 'ItemShipped'" }, "Action": { "SqlExpression": "SET seen = TRUE" } } }`
)

func start(t *testing.T, dir string, cfg *config.File) *Server {
	t.Helper()
	s, err := Start(context.Background(), Options{DataDir: dir, AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stop(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEmulatorConfigAppliedIdempotently(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := start(t, dir, emulatorConfig(t, 3, paymentRule+","+shippingRule))
	key, created := s.RootKey()
	if !created || key == "" {
		t.Fatalf("first start: root key %q created %v", key, created)
	}
	q, err := s.Broker().GetQueue(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Properties.RequiresSession || q.Properties.MaxDeliveryCount != 3 || q.Properties.LockDuration != 30*time.Second ||
		q.Properties.DuplicateDetectionHistoryTimeWindow != broker.MinDuplicateDetectionWindow {
		t.Fatalf("declared queue = %+v", q.Properties)
	}
	rules, err := s.Broker().ListRules(ctx, "orchestration", "orchestrator", 0, 0)
	if err != nil || len(rules) != 2 || rules[0].Name != "payments" || rules[1].Name != "shipping" || rules[1].Action != "SET seen = TRUE" {
		t.Fatalf("declared rules (the $Default rule must be gone) = %+v, %v", rules, err)
	}

	// The emulator's well-known key works, with the emulator's connection string.
	c, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://"+s.AMQPAddr().String()+
		";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+config.EmulatorKey+";UseDevelopmentEmulator=true;", nil)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sender, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.SendMessage(sctx, &azservicebus.Message{Body: []byte("x"), SessionID: ptr("s1")}, nil); err != nil {
		t.Fatalf("send with SAS_KEY_VALUE: %v", err)
	}
	_ = c.Close(ctx)
	stop(t, s)

	// Start again with changed declarations: properties are updated, rules
	// replaced, messages and the key kept.
	s = start(t, dir, emulatorConfig(t, 7, paymentRule))
	defer stop(t, s)
	if key2, created := s.RootKey(); key2 != key || created {
		t.Fatalf("restart: root key %q (created %v), want the kept %q", key2, created, key)
	}
	q, _ = s.Broker().GetQueue(ctx, "orders")
	if q.Properties.MaxDeliveryCount != 7 || q.Runtime.ActiveMessageCount != 1 {
		t.Fatalf("after restart: max delivery %d, active %d", q.Properties.MaxDeliveryCount, q.Runtime.ActiveMessageCount)
	}
	rules, _ = s.Broker().ListRules(ctx, "orchestration", "orchestrator", 0, 0)
	if len(rules) != 1 || rules[0].Name != "payments" {
		t.Fatalf("after restart the rules are %+v, want only payments", rules)
	}
}

func TestConfiguredPoliciesReplaceTheGeneratedKey(t *testing.T) {
	dir := t.TempDir()
	f, err := config.Parse([]byte(`{"Busbar": {"SharedAccessPolicies": [
		{"KeyName": "writer", "PrimaryKey": "w-key", "Rights": ["Send"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, dir, f)
	defer stop(t, s)
	if key, _ := s.RootKey(); key != "" || s.ConnectionString() != "" {
		t.Fatalf("with policies configured, no root key is generated (got %q)", key)
	}
	if _, err := os.Stat(filepath.Join(dir, "root-key.json")); !os.IsNotExist(err) {
		t.Fatalf("root-key.json written although policies are configured (stat: %v)", err)
	}
	ctx := context.Background()
	if err := s.Broker().CreateQueue(ctx, "q", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	conn := ConnectionString(s.AMQPAddr().String(), "writer", "w-key")
	c, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sender, _ := c.NewSender("q", nil)
	if err := sender.SendMessage(sctx, &azservicebus.Message{Body: []byte("ok")}, nil); err != nil {
		t.Fatalf("send with a Send policy: %v", err)
	}
	r, _ := c.NewReceiverForQueue("q", nil)
	_, err = r.ReceiveMessages(sctx, 1, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("receive with a Send-only policy: %v, want CodeUnauthorizedAccess", err)
	}
}

func TestDamagedKeyFileIsReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "root-key.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{DataDir: dir, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-"})
	if err == nil || !strings.Contains(err.Error(), "root-key.json is damaged") || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("Start with a damaged key file: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStoreMetricsAreExported: the embedded store's commit and WAL fsync
// histograms reach /metrics once something is committed.
func TestStoreMetricsAreExported(t *testing.T) {
	s := start(t, t.TempDir(), nil)
	defer stop(t, s)
	ctx := context.Background()
	if err := s.Broker().CreateQueue(ctx, "q", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Broker().Send(ctx, "q", []*broker.Message{{Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"busbar_store_wal_sync_seconds_count", "busbar_store_commit_seconds_count"} {
		n, ok := metricValue(string(body), name)
		if !ok || n < 1 {
			t.Errorf("%s: %v (found %v), want at least 1", name, n, ok)
		}
	}
}

// metricValue returns the value of an unlabelled sample in a Prometheus
// exposition.
func metricValue(exposition, name string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
