package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/pipeline"
)

// brokenPayment fails every payment permanently while broken is set.
func brokenPayment(broken *atomic.Bool) func(*pipeline.Task) error {
	return func(tk *pipeline.Task) error {
		if tk.Type == "payment" && broken.Load() {
			return pipeline.Permanent(errPayment)
		}
		return nil
	}
}

// brokenShop starts a broker and a running pipeline whose payments fail
// while the returned flag is set, as it is at first. Its store is the
// broker store, wrapped by wrap unless nil.
func brokenShop(t *testing.T, wrap func(pipeline.Store) pipeline.Store) (*azservicebus.Client, *pipeline.Pipeline, *recorder, *atomic.Bool) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	broken := &atomic.Bool{}
	broken.Store(true)
	rec := &recorder{fail: brokenPayment(broken)}
	var st pipeline.Store = pipeline.NewBrokerStore(c, failedQueue)
	if wrap != nil {
		st = wrap(st)
	}
	p := newPipeline(t, c, srv, rec, pipeline.Options{Store: st})
	run(t, p)
	return c, p, rec, broken
}

// TestResubmission: a failed job resubmitted while the fault persists
// fails again and is stored under its new id, linked to the old; once
// fixed, a resubmission runs the failed task and the later ones, in order,
// once; resubmitting again finds nothing and runs nothing.
func TestResubmission(t *testing.T) {
	c, p, rec, broken := brokenShop(t, nil)
	ctx := testCtx(t)

	submit(t, p, "p-1", purchase("p-1"))
	waitEnded(t, c, "p-1")
	stored(t, p.Store(), "p-1")

	r1, err := p.Resubmit(ctx, "p-1", nil)
	if err != nil || r1 != "p-1~r1" {
		t.Fatalf("Resubmit = %q, %v", r1, err)
	}
	waitEnded(t, c, r1)
	fj := stored(t, p.Store(), r1)
	if fj.Origin != "p-1" || !slices.Equal(storedTasks(fj), []string{"2:payment:TaskFailed", "3:receipt:JobFailed", "4:email:JobFailed"}) {
		t.Fatalf("resubmitted job failed again: origin %q, %v", fj.Origin, storedTasks(fj))
	}
	if _, err := p.Store().Job(ctx, "p-1"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("the original job is still stored: %v", err)
	}

	broken.Store(false)
	r2, err := p.Resubmit(ctx, r1, nil)
	if err != nil || r2 != "p-1~r2" {
		t.Fatalf("Resubmit = %q, %v", r2, err)
	}
	waitEnded(t, c, r2)
	if got := rec.of(r2); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("second resubmission ran %v, want 2 3 4", got)
	}
	rec.mu.Lock()
	for _, e := range rec.calls {
		if e.Job == r2 && (e.Origin != r1 || e.Type != purchaseTypes[e.Index] || e.Attempt != 1) {
			t.Errorf("task %+v: want origin %s, its original type, attempt 1", e, r1)
		}
	}
	rec.mu.Unlock()
	if _, err := p.Resubmit(ctx, r1, nil); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("resubmitting again: %v, want ErrNotFound", err)
	}
	jobs, err := p.Store().Jobs(ctx)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("store after success: %+v, %v", jobs, err)
	}
	if got := rec.of(r2); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("after the repeat the job ran %v", got)
	}
}

// flakyRemove fails the first Remove, as a crash between sending the new
// job and removing the old would.
type flakyRemove struct {
	pipeline.Store
	failed atomic.Bool
}

func (f *flakyRemove) Remove(ctx context.Context, job string) error {
	if f.failed.CompareAndSwap(false, true) {
		return errors.New("crash before removal")
	}
	return f.Store.Remove(ctx, job)
}

// TestResubmitRepeatedAfterCrash: a resubmission interrupted after it sent
// the new job and repeated sends the same job again, which the queue drops:
// the tasks run once.
func TestResubmitRepeatedAfterCrash(t *testing.T) {
	var st *flakyRemove
	c, p, rec, broken := brokenShop(t, func(s pipeline.Store) pipeline.Store { st = &flakyRemove{Store: s}; return st })
	ctx := testCtx(t)
	submit(t, p, "p-2", purchase("p-2"))
	waitEnded(t, c, "p-2")
	stored(t, st, "p-2")
	broken.Store(false)
	if id, err := p.Resubmit(ctx, "p-2", nil); err == nil || id != "p-2~r1" {
		t.Fatalf("interrupted Resubmit = %q, %v; want the new id and an error", id, err)
	}
	if id, err := p.Resubmit(ctx, "p-2", nil); err != nil || id != "p-2~r1" {
		t.Fatalf("repeated Resubmit = %q, %v", id, err)
	}
	waitEnded(t, c, "p-2~r1")
	if got := rec.of("p-2~r1"); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("resubmitted job ran %v, want 2 3 4 once", got)
	}
}

// TestResubmitFromChosenTask: From picks a later stored task; an earlier
// task that is not stored (it completed) is refused.
func TestResubmitFromChosenTask(t *testing.T) {
	c, p, rec, broken := brokenShop(t, nil)
	ctx := testCtx(t)
	for _, id := range []string{"p-3", "p-4"} {
		submit(t, p, id, purchase(id))
		waitEnded(t, c, id)
		stored(t, p.Store(), id)
	}
	broken.Store(false)
	zero, three := 0, 3
	if _, err := p.Resubmit(ctx, "p-3", &pipeline.ResubmitOptions{From: &zero}); err == nil {
		t.Fatal("resubmitting from a completed task succeeded")
	}
	if _, err := p.Resubmit(ctx, "p-3", &pipeline.ResubmitOptions{From: &three}); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, c, "p-3~r1")
	if got := rec.of("p-3~r1"); !slices.Equal(got, []int{3, 4}) {
		t.Fatalf("ran %v, want 3 4", got)
	}
	// ResubmitAll with a filter and progress.
	var seen []string
	n, err := p.ResubmitAll(ctx, pipeline.Filter{TaskType: "payment", ErrorContains: "declined"}, nil, func(done, total int, job, newJob string, err error) {
		if err != nil || total != 1 || done != 1 {
			t.Errorf("progress %d/%d %s: %v", done, total, job, err)
		}
		seen = append(seen, job+">"+newJob)
	})
	if err != nil || n != 1 || !slices.Equal(seen, []string{"p-4>p-4~r1"}) {
		t.Fatalf("ResubmitAll = %d, %v, %v", n, err, seen)
	}
	waitEnded(t, c, "p-4~r1")
	if got := rec.of("p-4~r1"); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("ran %v, want 2 3 4", got)
	}
}
