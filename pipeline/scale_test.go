package pipeline_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

// scaleJobs is how many concurrent jobs TestManyConcurrentJobs runs:
// 10,000, or 250 under the race detector unless BUSBAR_LONG=1.
func scaleJobs() int {
	if raceEnabled && os.Getenv("BUSBAR_LONG") != "1" {
		return 250
	}
	return 10000
}

// TestManyConcurrentJobs: 10,000 two-task jobs, every tenth failing its
// first task, all submitted before the workers start: every job ends, in
// order, failing ones stored with their second task skipped, and no state
// is left behind.
func TestManyConcurrentJobs(t *testing.T) {
	n := scaleJobs()
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{fail: func(tk *pipeline.Task) error {
		var i int
		if _, err := fmt.Sscanf(tk.Job, "job-%d", &i); err == nil && i%10 == 0 && tk.Index == 0 {
			return pipeline.Permanent(fmt.Errorf("job %d fails", i))
		}
		return nil
	}}
	p := newPipeline(t, c, srv, rec, pipeline.Options{MaxConcurrentJobs: 64})
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("job-%05d", i)
			submit(t, p, id, purchase(id)[:2])
		}()
	}
	wg.Wait()
	sent := time.Since(start)
	run(t, p)
	failing := n / 10
	m := p.Metrics()
	poll.Until(t, 5*time.Minute, "every job to end", func() bool {
		return m.JobsCompleted.Load()+m.JobsFailed.Load() == int64(n) && m.TasksSkipped.Load() == int64(failing)
	})
	t.Logf("%d jobs: submitted in %v, run in %v", n, sent, time.Since(start)-sent)
	if m.JobsFailed.Load() != int64(failing) {
		t.Fatalf("%d jobs failed, want %d", m.JobsFailed.Load(), failing)
	}
	for i := range n {
		id := fmt.Sprintf("job-%05d", i)
		got, want := rec.of(id), []int{0, 1}
		if i%10 == 0 {
			want = []int{0}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("job %s ran %v, want %v", id, got, want)
		}
	}
	jobs, err := pipeline.Jobs(testCtx(t), c, workQueue)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("%d jobs left in the queue (%v)", len(jobs), err)
	}
	failed, err := p.Store().Jobs(testCtx(t))
	if err != nil || len(failed) != failing {
		t.Fatalf("%d failed jobs stored, want %d (%v)", len(failed), failing, err)
	}
	fj, err := p.Store().Job(testCtx(t), "job-00010")
	if err != nil || len(fj.Tasks) != 2 || fj.Tasks[1].Reason != pipeline.ReasonSkipped {
		t.Fatalf("job-00010 stored as %+v (%v)", fj.Tasks, err)
	}
}
