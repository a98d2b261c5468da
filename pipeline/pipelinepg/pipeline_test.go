package pipelinepg_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

// TestFailedJobInPostgres: a pipeline storing its failed jobs in
// PostgreSQL: the failed and skipped tasks land there in order, and the
// job resubmitted once fixed runs from its failed task.
func TestFailedJobInPostgres(t *testing.T) {
	st := newStore(t)
	srv := busbartest.Start(t, busbartest.WithFakeClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)),
		busbartest.WithQueue("jobs", broker.QueueProperties{RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 100}))
	c, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	var ran []string
	p, err := pipeline.New(c, "jobs", &pipeline.Options{Store: st, Clock: srv.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"a", "b", "c"} {
		_ = p.Handle(typ, func(_ context.Context, tk *pipeline.Task) error {
			mu.Lock()
			ran = append(ran, tk.Job+":"+tk.Type)
			mu.Unlock()
			if typ == "b" && broken.Load() {
				return pipeline.Permanent(errors.New("b is broken"))
			}
			return nil
		})
	}
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tasks := []pipeline.TaskSpec{{Type: "a"}, {Type: "b", Body: []byte("payload of b")}, {Type: "c"}}
	if err := p.Submit(ctx, "j1", tasks); err != nil {
		t.Fatal(err)
	}
	var fj pipeline.FailedJob
	poll.UntilNil(t, 30*time.Second, "both tasks in PostgreSQL", func() error {
		fj, err = st.Job(ctx, "j1")
		if err == nil && len(fj.Tasks) != 2 {
			err = errors.New("not yet")
		}
		return err
	})
	if fj.Tasks[0].Index != 1 || fj.Tasks[0].Reason != pipeline.ReasonFailed || string(fj.Tasks[0].Body) != "payload of b" ||
		fj.Tasks[1].Index != 2 || fj.Tasks[1].Reason != pipeline.ReasonSkipped {
		t.Fatalf("stored %+v", fj.Tasks)
	}
	broken.Store(false)
	if id, err := p.Resubmit(ctx, "j1", nil); err != nil || id != "j1~r1" {
		t.Fatalf("Resubmit = %q, %v", id, err)
	}
	poll.Until(t, 30*time.Second, "the resubmitted job", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == 4
	})
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"j1:a", "j1:b", "j1~r1:b", "j1~r1:c"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if _, err := st.Job(ctx, "j1"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("j1 still stored: %v", err)
	}
}
