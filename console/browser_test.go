package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/schedule"
	"github.com/busbar-io/busbar/server"
)

// toolkitState makes what the toolkit view shows: a schedule "nightly" in
// the control queue "schedules", and a failed job "order-7" of the
// pipeline "purchases", made by the toolkit packages themselves.
func toolkitState(t *testing.T, s *server.Server) {
	ctx := context.Background()
	for _, q := range []string{"schedules", "purchases", "purchases" + pipeline.FailedQueueSuffix} {
		if err := s.Broker().CreateQueue(ctx, q, broker.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Broker().CreateQueue(ctx, "reports", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	client := busbartest.NewClient(t, server.ConnectionString(s.AMQPAddr().String(), server.RootKeyName, rootKey))
	sch, err := schedule.New(client, "schedules", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sch.Put(ctx, schedule.Definition{Name: "nightly", Spec: schedule.Spec{Cron: "0 0 3 * * *", TimeZone: "UTC"}, Target: "reports"}); err != nil {
		t.Fatal(err)
	}
	store := pipeline.NewBrokerStore(client, "purchases"+pipeline.FailedQueueSuffix)
	defer func() { _ = store.Close(ctx) }()
	if err := store.Add(ctx, pipeline.FailedTask{Job: "order-7", Index: 1, Count: 2, Last: true, Type: "charge", Body: []byte("{}"),
		Reason: pipeline.ReasonFailed, Error: "card declined", Attempts: 3, FailedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// traffic creates queue q and, until stopped, sends 30 messages a second
// to it and receives 20, so that its charts have something to show.
func traffic(t *testing.T, b *broker.Broker, q string) (stop func()) {
	ctx := context.Background()
	if err := b.CreateQueue(ctx, q, broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	body, err := message.Encode(nil, &message.Message{Properties: &message.Properties{MessageID: "m"},
		Body: message.Body{Kind: message.BodyData, Data: [][]byte{[]byte(`{"reading":1}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := b.NewConsumer(ctx, q, broker.ConsumerOptions{Mode: broker.ReceiveAndDelete, Deliver: func(*broker.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			msgs := []*broker.Message{{Body: body, MessageID: "m"}, {Body: body, MessageID: "m"}, {Body: body, MessageID: "m"}}
			if err := b.Send(ctx, q, msgs); err != nil {
				return
			}
			cons.AddCredit(2)
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = cons.Close()
	}
}

// TestBrowser runs test/node/console_e2e.js: headless Chromium (Debian's
// chromium, driven by playwright-core) through the console of a real
// broker; it then checks in the broker the queues the script created
// through the New queue page. It is skipped when node, playwright-core or
// chromium is missing,
// unless BUSBAR_REQUIRE_INTEROP=1. With BUSBAR_CONSOLE_SCREENSHOTS=1 it
// writes its screenshots to docs/console/ (committed, shown in the README).
func TestBrowser(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "test", "node"))
	if err != nil {
		t.Fatal(err)
	}
	chromium := os.Getenv("BUSBAR_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	node, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	_, chrErr := os.Stat(chromium)
	if nodeErr != nil || modErr != nil || chrErr != nil {
		why := "node, playwright-core (npm ci in test/node) or chromium is missing"
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but %s: %v %v %v", why, nodeErr, modErr, chrErr)
		}
		t.Skipf("%s: %v %v %v", why, nodeErr, modErr, chrErr)
	}
	shots := t.TempDir()
	if os.Getenv("BUSBAR_CONSOLE_SCREENSHOTS") == "1" {
		if shots, err = filepath.Abs(filepath.Join("..", "docs", "console")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := server.Start(context.Background(), server.Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0", Config: testConfig(), ConsoleSampleEvery: time.Second, ConsoleToolkit: ops.Toolkit{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stop := traffic(t, s.Broker(), "telemetry")
	defer stop()
	toolkitState(t, s)
	env := append(os.Environ(),
		"BUSBAR_CONSOLE_URL=http://"+s.HTTPAddr().String()+"/ui/",
		"BUSBAR_CONNECTION_STRING="+server.ConnectionString(s.AMQPAddr().String(), server.RootKeyName, rootKey),
		"BUSBAR_LISTEN_KEY=watcher:"+listenKey,
		"BUSBAR_SCREENSHOTS="+shots,
		"BUSBAR_CHROMIUM="+chromium)
	cmd := exec.CommandContext(ctx, node, "console_e2e.js")
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("console_e2e.js: %v\n%s", err, out)
	}
	for _, name := range []string{"signin", "namespace", "overview", "messages", "deadletters", "sessions", "rules", "toolkit", "phone-dark"} {
		if fi, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s.png: %v", name, err)
		}
	}

	// The New queue page: properties its form once lacked reach the broker,
	// and an untouched form creates the queue the broker makes of no
	// properties at all.
	q, err := s.Broker().GetQueue(ctx, "dedupe")
	if err != nil {
		t.Fatal(err)
	}
	if p := q.Properties; !p.RequiresDuplicateDetection || p.DuplicateDetectionHistoryTimeWindow != 2*time.Minute || p.AutoDeleteOnIdle != time.Hour {
		t.Errorf("the queue created with duplicate detection and auto-delete has %+v", p)
	}
	if err := s.Broker().CreateQueue(ctx, "reference", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	plain, err := s.Broker().GetQueue(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.Broker().GetQueue(ctx, "reference")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain.Properties, ref.Properties) {
		t.Errorf("the queue created from the untouched form has\n%+v\nthe broker's defaults are\n%+v", plain.Properties, ref.Properties)
	}
}
