package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/schedule"
	"github.com/busbar-io/busbar/server"
)

// TestToolkit drives the console's toolkit operations, which run
// the schedule and pipeline packages over the broker's AMQP listener with
// the signed-in key's token.
func TestToolkit(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		ConsoleToolkit: ops.Toolkit{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(ctx) }()
	b := srv.Broker()
	for _, q := range []string{"schedules", "purchases", "purchases-failed"} {
		if err := b.CreateQueue(ctx, q, broker.QueueProperties{RequiresSession: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CreateQueue(ctx, "reports", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	client := busbartest.NewClient(t, srv.ConnectionString())
	sch, err := schedule.New(client, "schedules", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sch.Put(ctx, schedule.Definition{Name: "nightly", Spec: schedule.Spec{Cron: "0 0 3 * * *", TimeZone: "UTC"}, Target: "reports"}); err != nil {
		t.Fatal(err)
	}
	store := pipeline.NewBrokerStore(client, "purchases-failed")
	defer func() { _ = store.Close(ctx) }()
	for i := 1; i < 3; i++ {
		if err := store.Add(ctx, pipeline.FailedTask{Job: "order-7", Index: i, Count: 3, Last: i == 2, Type: "charge", Body: []byte("{}"),
			Reason: pipeline.ReasonFailed, Error: "card declined", Attempts: 3, FailedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	key, _ := srv.RootKey()
	post := signIn(t, srv, server.RootKeyName, key)
	var res map[string]string
	if st := post("toolkit", map[string]string{"op": "pause", "queue": "schedules", "name": "nightly"}, &res); st != http.StatusOK {
		t.Fatalf("pause: %d %v", st, res)
	}
	if info, err := sch.Get(ctx, "nightly"); err != nil || !info.Paused {
		t.Fatalf("after pause: %+v %v", info, err)
	}
	if st := post("toolkit", map[string]string{"op": "trigger", "queue": "schedules", "name": "nightly"}, &res); st != http.StatusOK {
		t.Fatalf("trigger: %d %v", st, res)
	}
	if q, err := b.GetQueue(ctx, "reports"); err != nil || q.Runtime.ActiveMessageCount != 1 {
		t.Fatalf("reports after a trigger: %+v %v", q, err)
	}
	if st := post("toolkit", map[string]string{"op": "resume", "queue": "schedules", "name": "nightly"}, &res); st != http.StatusOK {
		t.Fatalf("resume: %d %v", st, res)
	}
	if info, err := sch.Get(ctx, "nightly"); err != nil || info.Paused || info.Next.IsZero() {
		t.Fatalf("after resume: %+v %v", info, err)
	}
	if st := post("toolkit", map[string]string{"op": "pause", "queue": "schedules", "name": "nope"}, &res); st != http.StatusBadGateway || res["error"] == "" {
		t.Fatalf("pausing a schedule that does not exist: %d %v", st, res)
	}
	if st := post("toolkit", map[string]string{"op": "resubmit", "queue": "purchases", "name": "order-7"}, &res); st != http.StatusOK || res["job"] == "" {
		t.Fatalf("resubmit: %d %v", st, res)
	}
	if jobs, err := store.Jobs(ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("failed jobs after the resubmit: %+v %v", jobs, err)
	}
	if q, err := b.GetQueue(ctx, "purchases"); err != nil || q.Runtime.ActiveMessageCount != 2 {
		t.Fatalf("purchases after the resubmit: %+v %v", q.Runtime, err)
	}
}

// signIn signs keyName in to srv's console and returns a function calling
// its API: POST when in is not nil, GET otherwise; it decodes the answer
// into out and returns the status.
func signIn(t *testing.T, srv *server.Server, keyName, key string) func(path string, in, out any) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	base := "http://" + srv.HTTPAddr().String() + "/ui/api/"
	var csrf string
	call := func(path string, in, out any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if in != nil {
			body, _ := json.Marshal(in)
			req, _ = http.NewRequest("POST", base+path, bytes.NewReader(body))
			req.Header.Set("X-Busbar-Csrf", csrf)
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	var who struct{ CSRF string }
	if st := call("signin", map[string]string{"keyName": keyName, "key": key}, &who); st != http.StatusOK {
		t.Fatalf("sign-in of %s: %d", keyName, st)
	}
	csrf = who.CSRF
	return call
}
