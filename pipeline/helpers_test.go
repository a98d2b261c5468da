package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

var epoch = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

const (
	workQueue   = "jobs"
	failedQueue = "failed"
	lockTime    = 5 * time.Minute
)

// jobQueues are the queues CreateQueue would make: session-enabled, the
// work queue with duplicate detection.
func jobQueues() []busbartest.Option {
	return []busbartest.Option{
		busbartest.WithQueue(workQueue, broker.QueueProperties{RequiresSession: true, RequiresDuplicateDetection: true,
			DuplicateDetectionHistoryTimeWindow: time.Hour, MaxDeliveryCount: 100, LockDuration: lockTime}),
		busbartest.WithQueue(failedQueue, broker.QueueProperties{RequiresSession: true, LockDuration: lockTime}),
	}
}

// startBroker starts busbartest on the fake clock with the job queues.
func startBroker(t testing.TB, opts ...busbartest.Option) *busbartest.Server {
	t.Helper()
	all := append([]busbartest.Option{busbartest.WithFakeClock(epoch)}, jobQueues()...)
	return busbartest.Start(t, append(all, opts...)...)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// run starts p and stops it when the test ends.
func run(t testing.TB, p *pipeline.Pipeline) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// execution is one handler call.
type execution struct {
	Job     string
	Index   int
	Type    string
	Attempt int
	Origin  string
	At      time.Time // on clk, when set
}

// recorder records handler calls and fails the ones fail says to.
type recorder struct {
	mu    sync.Mutex
	calls []execution
	// fail, when set, returns the error task t's handler returns.
	fail func(t *pipeline.Task) error
	// block, when set, is waited on before a task whose block returns
	// non-nil returns.
	block func(t *pipeline.Task) <-chan struct{}
	// clk, when set, stamps the calls.
	clk clock.Clock
}

func (r *recorder) handler(ctx context.Context, t *pipeline.Task) error {
	r.mu.Lock()
	e := execution{Job: t.Job, Index: t.Index, Type: t.Type, Attempt: t.Attempt, Origin: t.Origin}
	if r.clk != nil {
		e.At = r.clk.Now()
	}
	r.calls = append(r.calls, e)
	fail, block := r.fail, r.block
	r.mu.Unlock()
	if block != nil {
		if ch := block(t); ch != nil {
			<-ch
		}
	}
	if fail != nil {
		return fail(t)
	}
	return nil
}

// of returns the indices run for job, in call order.
func (r *recorder) of(job string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.calls {
		if c.Job == job {
			out = append(out, c.Index)
		}
	}
	return out
}

func (r *recorder) attempts(job string, index int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.calls {
		if c.Job == job && c.Index == index {
			out = append(out, c.Attempt)
		}
	}
	return out
}

func (r *recorder) times(job string, index int) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Time
	for _, c := range r.calls {
		if c.Job == job && c.Index == index {
			out = append(out, c.At)
		}
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// purchaseTypes are the article's five tasks.
var purchaseTypes = []string{"order-number", "total", "payment", "receipt", "email"}

func purchase(job string) []pipeline.TaskSpec {
	out := make([]pipeline.TaskSpec, len(purchaseTypes))
	for i, typ := range purchaseTypes {
		out[i] = pipeline.TaskSpec{Type: typ, Body: []byte(fmt.Sprintf(`{"job":%q,"step":%d}`, job, i))}
	}
	return out
}

// newPipeline returns a pipeline on the work queue with the broker store,
// every purchase task handled by rec.
func newPipeline(t testing.TB, c *azservicebus.Client, srv *busbartest.Server, rec *recorder, o pipeline.Options) *pipeline.Pipeline {
	t.Helper()
	if o.Store == nil {
		o.Store = pipeline.NewBrokerStore(c, failedQueue)
	}
	if o.Clock == nil && srv != nil && srv.Clock() != nil {
		o.Clock = srv.Clock()
	}
	p, err := pipeline.New(c, workQueue, &o)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range purchaseTypes {
		if err := p.Handle(typ, rec.handler); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func submit(t testing.TB, p *pipeline.Pipeline, job string, tasks []pipeline.TaskSpec) {
	t.Helper()
	if err := p.Submit(testCtx(t), job, tasks); err != nil {
		t.Fatal(err)
	}
}

// waitRan waits until job's handler calls are want.
func waitRan(t testing.TB, rec *recorder, job string, want ...int) {
	t.Helper()
	poll.Until(t, 30*time.Second, fmt.Sprintf("job %s to run tasks %v (ran %v)", job, want, rec.of(job)), func() bool {
		return slices.Equal(rec.of(job), want)
	})
}

// waitEnded waits until job has left the work queue: no state, no tasks.
func waitEnded(t testing.TB, c *azservicebus.Client, job string) {
	t.Helper()
	poll.UntilNil(t, 30*time.Second, "job "+job+" to end", func() error {
		jp, err := pipeline.JobOf(testCtx(t), c, workQueue, job)
		switch {
		case err != nil:
			return err
		case jp.Locked || jp.State != nil || jp.Pending != 0:
			return fmt.Errorf("progress %+v", jp)
		}
		return nil
	})
}

// stored returns the failed-job store's record of job.
func stored(t testing.TB, s pipeline.Store, job string) pipeline.FailedJob {
	t.Helper()
	var fj pipeline.FailedJob
	poll.UntilNil(t, 30*time.Second, "job "+job+" in the failed-job store", func() error {
		var err error
		fj, err = s.Job(testCtx(t), job)
		return err
	})
	return fj
}

func storedTasks(fj pipeline.FailedJob) []string {
	var out []string
	for _, ft := range fj.Tasks {
		out = append(out, fmt.Sprintf("%d:%s:%s", ft.Index, ft.Type, ft.Reason))
	}
	return out
}

var errPayment = errors.New("card declined")

func sessionQueue() broker.QueueProperties {
	return broker.QueueProperties{RequiresSession: true, LockDuration: lockTime}
}
