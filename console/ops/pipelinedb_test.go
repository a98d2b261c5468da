package ops_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/busbar-io/busbar/server"
)

const (
	rootKey   = "cm9vdC1rZXktZm9yLXRoZS1vcHMtdGVzdHM="
	listenKey = "bGlzdGVuLWtleS1mb3ItdGhlLW9wcy10ZXN0cw=="
)

// failedView is a failed task as the console's toolkit view shows it.
type failedView struct {
	Entity, Queue, Store, Job, Type, Reason, Error, FailedAt string
	Index, Attempts                                          int
}

// TestPipelineDB: a pipeline keeps its failed jobs in PostgreSQL
// (pipelinepg); the console lists the job with its failed task, a
// Listen-only key sees it but may not resubmit it, and a Manage key's
// resubmission through the API runs it again and empties the store.
func TestPipelineDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool, "console_failed_")
	st := pipelinepg.New(pool, table)
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	dbs, err := ops.ParsePipelineDBs(dsn + sep + "busbar_queue=imports&busbar_table=" + table)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.File{Busbar: &config.Busbar{SharedAccessPolicies: []config.Policy{
		{KeyName: server.RootKeyName, PrimaryKey: rootKey, Rights: []string{"Manage", "Send", "Listen"}},
		{KeyName: "watcher", PrimaryKey: listenKey, Rights: []string{"Listen"}},
	}}}
	srv, err := server.Start(ctx, server.Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Config: cfg,
		ConsoleToolkit: ops.Toolkit{PipelineDBs: dbs}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	if err := srv.Broker().CreateQueue(ctx, "imports", broker.QueueProperties{RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 100}); err != nil {
		t.Fatal(err)
	}

	client, err := azservicebus.NewClientFromConnectionString(server.ConnectionString(srv.AMQPAddr().String(), server.RootKeyName, rootKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	p, err := pipeline.New(client, "imports", &pipeline.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	var ran []string
	for _, typ := range []string{"fetch", "load"} {
		_ = p.Handle(typ, func(_ context.Context, tk *pipeline.Task) error {
			mu.Lock()
			ran = append(ran, tk.Job+":"+tk.Type)
			mu.Unlock()
			if typ == "load" && broken.Load() {
				return pipeline.Permanent(errors.New("table products is locked"))
			}
			return nil
		})
	}
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())
	before := time.Now().Add(-time.Second)
	if err := p.Submit(ctx, "batch-1", []pipeline.TaskSpec{{Type: "fetch"}, {Type: "load"}}); err != nil {
		t.Fatal(err)
	}

	watcher := signIn(t, srv, "watcher", listenKey)
	var view struct{ Failed []failedView }
	poll.UntilNil(t, 30*time.Second, "the failed job in the console", func() error {
		if st := watcher("toolkit", nil, &view); st != http.StatusOK || len(view.Failed) == 0 {
			return fmt.Errorf("toolkit: %d %+v", st, view.Failed)
		}
		return nil
	})
	got := view.Failed[0]
	at, _ := time.Parse(time.RFC3339, got.FailedAt)
	got.FailedAt = ""
	want := failedView{Queue: "imports", Store: "postgres:" + table, Job: "batch-1", Type: "load", Index: 1,
		Reason: pipeline.ReasonFailed, Error: "table products is locked", Attempts: 1}
	if len(view.Failed) != 1 || got != want || at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
		t.Fatalf("failed jobs %+v (failed at %v), want %+v", view.Failed, at, want)
	}

	var res map[string]string
	resubmit := map[string]string{"op": "resubmit", "queue": "imports", "store": got.Store, "name": "batch-1"}
	if st := watcher("toolkit", resubmit, &res); st != http.StatusForbidden || !strings.Contains(res["error"], "Manage") {
		t.Fatalf("a Listen-only key's resubmit: %d %v", st, res)
	}
	if _, err := st.Job(ctx, "batch-1"); err != nil {
		t.Fatalf("after a refused resubmit: %v", err)
	}

	broken.Store(false)
	root := signIn(t, srv, server.RootKeyName, rootKey)
	if st := root("toolkit", resubmit, &res); st != http.StatusOK || res["job"] != "batch-1~r1" {
		t.Fatalf("resubmit: %d %v", st, res)
	}
	poll.Until(t, 30*time.Second, "the resubmitted job", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == 3
	})
	mu.Lock()
	if want := []string{"batch-1:fetch", "batch-1:load", "batch-1~r1:load"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	mu.Unlock()
	if _, err := st.Job(ctx, "batch-1"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("batch-1 still stored: %v", err)
	}
	if st := root("toolkit", nil, &view); st != http.StatusOK || len(view.Failed) != 0 {
		t.Fatalf("failed jobs after the resubmit: %d %+v", st, view.Failed)
	}
	resubmit["store"] = "postgres:elsewhere"
	if st := root("toolkit", resubmit, &res); st != http.StatusBadGateway || !strings.Contains(res["error"], "no failed-job store postgres:elsewhere for imports") {
		t.Fatalf("resubmit from a store not configured: %d %v", st, res)
	}
}

func TestParsePipelineDBs(t *testing.T) {
	dbs, err := ops.ParsePipelineDBs(" postgres://u:pw@db/app?sslmode=disable&busbar_queue=imports\n postgresql://db/app?busbar_queue=orders&busbar_table=order_failures ")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dbs) != "[{imports postgres://u:pw@db/app?sslmode=disable } {orders postgresql://db/app order_failures}]" {
		t.Fatalf("parsed %v", dbs)
	}
	for in, msg := range map[string]string{
		"mysql://db/app?busbar_queue=q":                           "mysql://db/app?(query hidden) is not a postgres:// URL",
		"postgres://u:secret@db/app":                              "postgres://u:xxxxx@db/app: name the pipeline's work queue with ?busbar_queue=QUEUE",
		"postgres://a?busbar_queue=q postgres://b?busbar_queue=q": "the failed jobs of q in postgres:busbar_failed_tasks are named twice",
	} {
		if _, err := ops.ParsePipelineDBs(in); err == nil || err.Error() != msg {
			t.Errorf("%q: err %v, want %q", in, err, msg)
		}
	}
}

// TestPipelineDBUnreachable: a failed-job database out of reach leaves the
// rest of the toolkit view standing and says so, without its address.
func TestPipelineDBUnreachable(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		ConsoleToolkit: ops.Toolkit{PipelineDBs: []ops.PipelineDB{{Queue: "imports", DSN: "postgres://busbar:secret@127.0.0.1:1/app?connect_timeout=5"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(ctx) }()
	if err := srv.Broker().CreateQueue(ctx, "imports-failed", broker.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	store := pipeline.NewBrokerStore(busbartest.NewClient(t, srv.ConnectionString()), "imports-failed")
	defer func() { _ = store.Close(ctx) }()
	if err := store.Add(ctx, pipeline.FailedTask{Job: "batch-2", Count: 1, Last: true, Type: "load", Body: []byte("{}"),
		Reason: pipeline.ReasonFailed, Error: "disk full", Attempts: 2, FailedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	key, _ := srv.RootKey()
	var view struct {
		Failed      []failedView
		FailedError string
	}
	if st := signIn(t, srv, server.RootKeyName, key)("toolkit", nil, &view); st != http.StatusOK ||
		len(view.Failed) != 1 || view.Failed[0].Job != "batch-2" || view.Failed[0].Queue != "imports" ||
		!strings.Contains(view.FailedError, "could not be read") || strings.Contains(view.FailedError, "127.0.0.1") {
		t.Fatalf("toolkit with a database out of reach: %d %+v", st, view)
	}
}
