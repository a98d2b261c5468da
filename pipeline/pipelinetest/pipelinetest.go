// Package pipelinetest is the one test suite every pipeline.Store
// implementation passes. It owns no store of its own and touches nothing
// but the store it is given.
package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/pipeline"
)

// Run runs the suite; newStore returns an empty store for each subtest.
func Run(t *testing.T, newStore func(t *testing.T) pipeline.Store) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, newStore(t)) })
	t.Run("OrderAndFields", func(t *testing.T) { testOrderAndFields(t, newStore(t)) })
	t.Run("AddIsIdempotent", func(t *testing.T) { testIdempotent(t, newStore(t)) })
	t.Run("JobsAndRemove", func(t *testing.T) { testJobsAndRemove(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore(t)) })
}

var at = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// task returns task i of a 5-task job.
func task(job string, i int, reason string) pipeline.FailedTask {
	return pipeline.FailedTask{
		Job: job, Origin: "origin-of-" + job, Index: i, Count: 5, Last: i == 4,
		Type: fmt.Sprintf("type-%d", i), Body: []byte(fmt.Sprintf(`{"task":%d,"bin":"\u0000\u00ff"}`, i)),
		Reason: reason, Error: fmt.Sprintf("error of task %d: ünïcode", i), Attempts: i,
		FailedAt: at.Add(time.Duration(i) * time.Millisecond),
	}
}

func add(t *testing.T, s pipeline.Store, ts ...pipeline.FailedTask) {
	t.Helper()
	for _, ft := range ts {
		if err := s.Add(ctx(t), ft); err != nil {
			t.Fatalf("Add(%s, %d): %v", ft.Job, ft.Index, err)
		}
	}
}

func testEmpty(t *testing.T, s pipeline.Store) {
	if _, err := s.Job(ctx(t), "none"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("Job of an unknown job: %v, want ErrNotFound", err)
	}
	jobs, err := s.Jobs(ctx(t))
	if err != nil || len(jobs) != 0 {
		t.Fatalf("Jobs of an empty store: %v, %v", jobs, err)
	}
	if err := s.Remove(ctx(t), "none"); err != nil {
		t.Fatalf("Remove of an unknown job: %v", err)
	}
}

// testOrderAndFields: tasks come back in index order, whatever order they
// were added in, with every field intact.
func testOrderAndFields(t *testing.T, s pipeline.Store) {
	want := []pipeline.FailedTask{task("job-a", 2, pipeline.ReasonFailed), task("job-a", 3, pipeline.ReasonSkipped), task("job-a", 4, pipeline.ReasonSkipped)}
	add(t, s, want[2], want[0], want[1])
	got, err := s.Job(ctx(t), "job-a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Job != "job-a" || got.Origin != "origin-of-job-a" {
		t.Fatalf("job %q origin %q", got.Job, got.Origin)
	}
	if len(got.Tasks) != len(want) {
		t.Fatalf("%d tasks, want %d", len(got.Tasks), len(want))
	}
	for i := range want {
		g, w := got.Tasks[i], want[i]
		if !g.FailedAt.Equal(w.FailedAt) {
			t.Errorf("task %d FailedAt %v, want %v", i, g.FailedAt, w.FailedAt)
		}
		g.FailedAt, w.FailedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("task %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if f := got.Failed(); f.Index != 2 || f.Reason != pipeline.ReasonFailed {
		t.Errorf("Failed() = task %d %s, want task 2", f.Index, f.Reason)
	}
}

// testIdempotent: adding a task again (a redelivery after a crash) keeps
// the first record.
func testIdempotent(t *testing.T, s pipeline.Store) {
	first := task("job-b", 1, pipeline.ReasonFailed)
	again := first
	again.Reason, again.Error, again.Attempts = pipeline.ReasonSkipped, "skipped on redelivery", 0
	add(t, s, first, again, task("job-b", 2, pipeline.ReasonSkipped))
	got, err := s.Job(ctx(t), "job-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 2 || got.Tasks[0].Index != 1 || got.Tasks[1].Index != 2 {
		t.Fatalf("tasks %+v, want 1 and 2 once each", got.Tasks)
	}
	if g := got.Tasks[0]; g.Reason != pipeline.ReasonFailed || g.Error != first.Error || g.Attempts != first.Attempts {
		t.Fatalf("the repeat replaced the first record: %+v", g)
	}
}

func testJobsAndRemove(t *testing.T, s pipeline.Store) {
	for _, j := range []string{"job-c", "job-a", "job-b"} {
		add(t, s, task(j, 3, pipeline.ReasonFailed), task(j, 4, pipeline.ReasonSkipped))
	}
	jobs, err := s.Jobs(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.Job)
		if len(j.Tasks) != 2 || j.Tasks[0].Index != 3 || j.Tasks[1].Index != 4 {
			t.Errorf("job %s tasks %+v", j.Job, j.Tasks)
		}
	}
	if !reflect.DeepEqual(ids, []string{"job-a", "job-b", "job-c"}) {
		t.Fatalf("Jobs = %v, want job-a, job-b, job-c", ids)
	}
	if err := s.Remove(ctx(t), "job-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job(ctx(t), "job-b"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Fatalf("Job after Remove: %v, want ErrNotFound", err)
	}
	if err := s.Remove(ctx(t), "job-b"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	jobs, err = s.Jobs(ctx(t))
	if err != nil || len(jobs) != 2 || jobs[0].Job != "job-a" || jobs[1].Job != "job-c" {
		t.Fatalf("Jobs after Remove: %+v, %v", jobs, err)
	}
	// A job removed and failed again (a resubmission under the same id is
	// not made, but a store must not keep ghosts) is stored afresh.
	add(t, s, task("job-b", 4, pipeline.ReasonFailed))
	got, err := s.Job(ctx(t), "job-b")
	if err != nil || len(got.Tasks) != 1 || got.Tasks[0].Index != 4 || got.Tasks[0].Reason != pipeline.ReasonFailed {
		t.Fatalf("job stored again after Remove: %+v, %v", got, err)
	}
}

// testConcurrent: tasks added from many goroutines, to many jobs, are all
// kept, each job in order.
func testConcurrent(t *testing.T, s pipeline.Store) {
	const jobs, tasks = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, jobs*tasks)
	for j := range jobs {
		for i := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.Add(ctx(t), task(fmt.Sprintf("job-%d", j), i, pipeline.ReasonSkipped))
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Jobs(ctx(t))
	if err != nil || len(all) != jobs {
		t.Fatalf("Jobs: %d jobs, %v; want %d", len(all), err, jobs)
	}
	for _, fj := range all {
		for i, ft := range fj.Tasks {
			if ft.Index != i {
				t.Fatalf("job %s: task %d at position %d", fj.Job, ft.Index, i)
			}
		}
		if len(fj.Tasks) != tasks {
			t.Fatalf("job %s: %d tasks, want %d", fj.Job, len(fj.Tasks), tasks)
		}
	}
}
