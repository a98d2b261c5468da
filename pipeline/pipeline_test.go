package pipeline_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinetest"
)

// TestOrderUnderConcurrency: many five-task jobs run by two workers (two
// pipelines on their own connections) with eight jobs each at once: every
// job's tasks run exactly once each, in order.
func TestOrderUnderConcurrency(t *testing.T) {
	srv := startBroker(t)
	rec := &recorder{}
	jobs := 60
	var ps []*pipeline.Pipeline
	for range 2 {
		c := busbartest.NewClient(t, srv.ConnectionString())
		p := newPipeline(t, c, srv, rec, pipeline.Options{MaxConcurrentJobs: 8})
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("order-%03d", i)
			submit(t, ps[i%2], id, purchase(id))
		}()
	}
	wg.Wait()
	for _, p := range ps {
		run(t, p)
	}
	poll.Until(t, time.Minute, "every task to run", func() bool { return rec.count() >= 5*jobs })
	for i := range jobs {
		id := fmt.Sprintf("order-%03d", i)
		if got := rec.of(id); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("job %s ran %v, want 0..4 once each in order", id, got)
		}
	}
	if rec.count() != 5*jobs {
		t.Fatalf("%d handler calls, want %d", rec.count(), 5*jobs)
	}
	poll.Until(t, 30*time.Second, "every job to be counted completed", func() bool {
		return ps[0].Metrics().JobsCompleted.Load()+ps[1].Metrics().JobsCompleted.Load() == int64(jobs)
	})
}

// TestStopLeavesLaterTasksUnexecuted: under Stop, a payment failing with a
// permanent error runs once; the receipt and the e-mail never run; the
// failed task and the later ones are stored in order with their reasons;
// the job's state is cleared; another job is unaffected.
func TestStopLeavesLaterTasksUnexecuted(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{fail: func(tk *pipeline.Task) error {
		if tk.Job == "bad" && tk.Type == "payment" {
			return pipeline.Permanent(errPayment)
		}
		return nil
	}}
	p := newPipeline(t, c, srv, rec, pipeline.Options{MaxAttempts: 3})
	submit(t, p, "bad", purchase("bad"))
	submit(t, p, "good", purchase("good"))
	run(t, p)
	waitRan(t, rec, "good", 0, 1, 2, 3, 4)
	waitEnded(t, c, "bad")
	fj := stored(t, p.Store(), "bad")
	want := []string{"2:payment:TaskFailed", "3:receipt:JobFailed", "4:email:JobFailed"}
	if got := storedTasks(fj); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	waitEnded(t, c, "bad")
	if got := rec.of("bad"); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("failed job ran %v, want 0 1 2 (payment once: permanent)", got)
	}
	f := fj.Tasks[0]
	if f.Error != errPayment.Error() || f.Attempts != 1 || string(f.Body) != `{"job":"bad","step":2}` || f.Count != 5 {
		t.Fatalf("failed task %+v", f)
	}
	if s := fj.Tasks[1]; s.Attempts != 0 || s.Error != "task 2 of the job failed: card declined" || !fj.Tasks[2].Last {
		t.Fatalf("skipped tasks %+v", fj.Tasks[1:])
	}
	if _, err := p.Store().Job(testCtx(t), "good"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("the good job is in the store: %v", err)
	}
	got := p.Metrics().Events()
	wantM := map[string]int64{"job_submitted": 2, "job_completed": 1, "job_failed": 1, "job_resubmitted": 0,
		"task_started": 8, "task_succeeded": 7, "task_retried": 0, "task_failed": 1, "task_skipped": 2, "task_redelivered": 0, "state_swept": 0}
	if !maps.Equal(got, wantM) {
		t.Fatalf("metrics %v, want %v", got, wantM)
	}
}

// TestContinueRunsLaterTasks: under Continue only the failed row is set
// aside and the rest of the import runs.
func TestContinueRunsLaterTasks(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{fail: func(tk *pipeline.Task) error {
		if tk.Index == 1 || tk.Index == 3 {
			return pipeline.Permanent(fmt.Errorf("row %d: missing price", tk.Index))
		}
		return nil
	}}
	p := newPipeline(t, c, srv, rec, pipeline.Options{Policy: pipeline.Continue})
	submit(t, p, "import-1", purchase("import-1"))
	run(t, p)
	waitRan(t, rec, "import-1", 0, 1, 2, 3, 4)
	waitEnded(t, c, "import-1")
	fj := stored(t, p.Store(), "import-1")
	if got, want := storedTasks(fj), []string{"1:total:TaskFailed", "3:receipt:TaskFailed"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if fj.Tasks[1].Error != "row 3: missing price" {
		t.Fatalf("error text %q", fj.Tasks[1].Error)
	}
	waitEnded(t, c, "import-1")
}

// TestRetriesWithBackoff: a failing task is retried after the backoff on
// the pipeline's clock, told its attempt number, and set aside once
// MaxAttempts attempts failed.
func TestRetriesWithBackoff(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{fail: func(tk *pipeline.Task) error {
		if tk.Type == "payment" && (tk.Job == "always" || tk.Attempt < 3) {
			return fmt.Errorf("gateway down (attempt %d)", tk.Attempt)
		}
		return nil
	}}
	backoff := func(n int) time.Duration { return time.Duration(n) * 10 * time.Second }
	rec.clk = srv.Clock()
	p := newPipeline(t, c, srv, rec, pipeline.Options{MaxAttempts: 3, Backoff: backoff})
	run(t, p)
	for _, job := range []string{"flaky", "always"} {
		submit(t, p, job, purchase(job))
		// Move the fake clock a second at a time until the third attempt:
		// each retry must have waited its backoff of fake time.
		poll.Until(t, 30*time.Second, job+" attempt 3", func() bool {
			if len(rec.attempts(job, 2)) == 3 {
				return true
			}
			srv.Advance(time.Second)
			return false
		})
		if got := rec.attempts(job, 2); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("%s: attempts %v", job, got)
		}
		at := rec.times(job, 2)
		for k := 1; k < 3; k++ {
			if gap := at[k].Sub(at[k-1]); gap < backoff(k) {
				t.Fatalf("%s: attempt %d ran %v after attempt %d, before the backoff of %v", job, k+1, gap, k, backoff(k))
			}
		}
	}
	waitRan(t, rec, "flaky", 0, 1, 2, 2, 2, 3, 4)
	waitEnded(t, c, "always")
	fj := stored(t, p.Store(), "always")
	if f := fj.Tasks[0]; f.Index != 2 || f.Attempts != 3 || f.Error != "gateway down (attempt 3)" || len(fj.Tasks) != 3 {
		t.Fatalf("stored %+v", fj.Tasks)
	}
	if got := rec.of("always"); !slices.Equal(got, []int{0, 1, 2, 2, 2}) {
		t.Fatalf("always ran %v", got)
	}
	if _, err := p.Store().Job(testCtx(t), "flaky"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("flaky job stored: %v", err)
	}
}

// TestBrokerStore runs the shared store suite on BrokerStore.
func TestBrokerStore(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	n := 0
	pipelinetest.Run(t, func(t *testing.T) pipeline.Store {
		n++
		q := fmt.Sprintf("failed-%d", n)
		if err := srv.Broker().CreateQueue(testCtx(t), q, sessionQueue()); err != nil {
			t.Fatal(err)
		}
		return pipeline.NewBrokerStore(c, q)
	})
}
