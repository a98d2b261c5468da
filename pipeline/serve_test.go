package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/pipeline"
)

// serveConfig declares the job queues for `busbar serve --config`.
const serveConfig = `{"UserConfig":{"Namespaces":[{"Name":"sbemulatorns","Queues":[
 {"Name":"jobs","Properties":{"RequiresSession":true,"RequiresDuplicateDetection":true,"DuplicateDetectionHistoryTimeWindow":"PT1H","MaxDeliveryCount":100,"LockDuration":"PT30S"}},
 {"Name":"failed","Properties":{"RequiresSession":true}}],"Topics":[]}],"Logging":{"Type":"File"}}}`

// busbarBinary builds ./cmd/busbar, or returns $BUSBAR_CRASHTEST_BINARY.
func busbarBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BUSBAR_CRASHTEST_BINARY"); bin != "" {
		return bin
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "busbar")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := serveproc.Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestCrashOfBusbarServe: a real `busbar serve` is killed (SIGKILL) while
// jobs run and restarted on its data: every job still runs its tasks in
// order, a task is repeated only where the crash cut it (and is then told
// it is a later attempt), the jobs whose payment fails are stored in order,
// and no job state is left behind once Sweep has cleared what the crash cut
// between completing a last task and clearing its state.
func TestCrashOfBusbarServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs busbar serve")
	}
	bin := busbarBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(serveConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	start := func() *serveproc.Process {
		c, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: data, Config: cfg, LogLimit: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	const jobs = 40
	rec := &recorder{fail: func(tk *pipeline.Task) error {
		var i int
		if _, err := fmt.Sscanf(tk.Job, "job-%d", &i); err == nil && i%4 == 0 && tk.Type == "payment" {
			return pipeline.Permanent(errPayment)
		}
		return nil
	}}
	child := start()
	ca, err := azservicebus.NewClientFromConnectionString(child.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newPipeline(t, ca, nil, rec, pipeline.Options{MaxConcurrentJobs: 8, Store: pipeline.NewBrokerStore(ca, failedQueue)})
	for i := range jobs {
		id := fmt.Sprintf("job-%02d", i)
		submit(t, a, id, purchase(id))
	}
	actx, kill := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	poll.Until(t, time.Minute, "a third of the tasks to run", func() bool { return rec.count() >= jobs*5/3 })
	if err := child.Kill(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	kill()
	<-done
	_ = ca.Close(context.Background())
	before := rec.count()

	child = start()
	cb := busbartest.NewClient(t, child.ConnectionString())
	b := newPipeline(t, cb, nil, rec, pipeline.Options{MaxConcurrentJobs: 8, Store: pipeline.NewBrokerStore(cb, failedQueue)})
	run(t, b)
	// Every job ends: no task pending, none held. A crash between
	// completing a job's last task and clearing its state leaves the state
	// behind, by design, for Sweep.
	poll.UntilNil(t, 2*time.Minute, "every job to end", func() error {
		left, err := pipeline.Jobs(testCtx(t), cb, workQueue)
		for _, jp := range left {
			if err == nil && (jp.Pending > 0 || jp.Locked) {
				err = fmt.Errorf("job %s not ended: %+v %+v", jp.Job, jp, jp.State)
			}
		}
		return err
	})
	swept, err := b.Sweep(testCtx(t), &pipeline.SweepOptions{OlderThan: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := pipeline.Jobs(testCtx(t), cb, workQueue); err != nil || len(left) > 0 {
		t.Fatalf("after sweeping %v: %d jobs left (%v)", swept, len(left), err)
	}
	t.Logf("swept the state of %v", swept)
	t.Logf("%d handler calls before the crash, %d in all", before, rec.count())
	for i := range jobs {
		id := fmt.Sprintf("job-%02d", i)
		want := []int{0, 1, 2, 3, 4}
		if i%4 == 0 {
			want = []int{0, 1, 2}
		}
		rec.mu.Lock()
		var runs []execution
		for _, e := range rec.calls {
			if e.Job == id {
				runs = append(runs, e)
			}
		}
		rec.mu.Unlock()
		// In order, each task at least once; a repeat follows the run the
		// crash cut short and knows it is a later attempt.
		next := 0
		for k, e := range runs {
			switch {
			case e.Index == next:
				next++
			case k > 0 && e.Index == runs[k-1].Index && e.Attempt > 1:
			default:
				t.Fatalf("job %s ran %+v: out of order or repeated without a later attempt", id, runs)
			}
		}
		if next != len(want) {
			t.Fatalf("job %s ran %+v, want tasks %v", id, runs, want)
		}
		if i%4 == 0 {
			fj, err := b.Store().Job(testCtx(t), id)
			if err != nil || len(storedTasks(fj)) != 3 || fj.Tasks[0].Index != 2 || fj.Tasks[2].Index != 4 {
				t.Fatalf("job %s stored as %v (%v)", id, storedTasks(fj), err)
			}
		} else if _, err := b.Store().Job(testCtx(t), id); !errors.Is(err, pipeline.ErrNotFound) {
			t.Fatalf("job %s is in the store: %v", id, err)
		}
	}
}
