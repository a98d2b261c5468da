package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

// TestRedeliveryAfterCrash: a worker dies while a task runs; another
// worker gets the task again, told it is the second attempt (Busbar does
// not count a delivery released by a closed connection; the start recorded
// in the job state does), and the job goes on in order. The task that had
// completed is not run again.
func TestRedeliveryAfterCrash(t *testing.T) {
	srv := startBroker(t)
	release := make(chan struct{})
	rec := &recorder{block: func(tk *pipeline.Task) <-chan struct{} {
		if tk.Job == "crash" && tk.Index == 1 && tk.Attempt == 1 {
			return release
		}
		return nil
	}}
	ca, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newPipeline(t, ca, srv, rec, pipeline.Options{})
	submit(t, a, "crash", purchase("crash"))
	actx, kill := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	poll.Until(t, 30*time.Second, "task 1 to start", func() bool { return len(rec.attempts("crash", 1)) == 1 })

	// The crash: worker A dies in the middle of task 1. Its handler's work
	// is done, but nothing after it (recording, completing) happens, and
	// its connection goes away.
	kill()
	close(release)
	<-done
	_ = ca.Close(context.Background())
	srv.Advance(lockTime + time.Second) // had the lock been kept, it expires

	cb := busbartest.NewClient(t, srv.ConnectionString())
	b := newPipeline(t, cb, srv, rec, pipeline.Options{})
	run(t, b)
	waitEnded(t, cb, "crash")
	if got := rec.of("crash"); !slices.Equal(got, []int{0, 1, 1, 2, 3, 4}) {
		t.Fatalf("ran %v, want 0 1 1 2 3 4 (task 1 again, nothing else twice); calls %+v", got, rec.calls)
	}
	if got := rec.attempts("crash", 1); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("task 1 attempts %v, want 1 2", got)
	}
}

// TestRecordedTaskNotRunAgain: tasks a crashed worker had recorded as done
// in the job state but not completed are completed without running.
func TestRecordedTaskNotRunAgain(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{}
	p := newPipeline(t, c, srv, rec, pipeline.Options{})
	submit(t, p, "half", purchase("half"))
	// What a worker that crashed after recording task 1 leaves behind.
	state, _ := json.Marshal(pipeline.JobState{LastTask: 1, Count: 5, Started: epoch, Updated: epoch})
	setState(t, c, "half", state)
	run(t, p)
	waitEnded(t, c, "half")
	if got := rec.of("half"); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("ran %v, want 2 3 4", got)
	}
	if n := p.Metrics().TasksRedelivered.Load(); n != 2 {
		t.Fatalf("%d tasks recognised as done, want 2", n)
	}
}

func setState(t *testing.T, c *azservicebus.Client, job string, state []byte) {
	t.Helper()
	r, err := c.AcceptSessionForQueue(testCtx(t), workQueue, job, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if err := r.SetSessionState(testCtx(t), state, nil); err != nil {
		t.Fatal(err)
	}
}

// TestSweepOrphanedState: a job whose last task never arrives keeps its
// state; Sweep leaves it while it is fresh and clears it once it is old.
func TestSweepOrphanedState(t *testing.T) {
	srv := startBroker(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{}
	p := newPipeline(t, c, srv, rec, pipeline.Options{SessionIdleTimeout: time.Minute})
	// Three of five tasks, the last never sent.
	s, err := c.NewSender(workQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range 3 {
		id, job, typ := fmt.Sprintf("orphan/%d", i), "orphan", purchaseTypes[i]
		err := s.SendMessage(testCtx(t), &azservicebus.Message{MessageID: &id, SessionID: &job, Subject: &typ,
			ApplicationProperties: map[string]any{pipeline.PropIndex: int64(i), pipeline.PropCount: int64(5), pipeline.PropLast: false}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	submit(t, p, "whole", purchase("whole"))
	run(t, p)
	waitRan(t, rec, "orphan", 0, 1, 2)
	waitEnded(t, c, "whole")
	srv.Advance(time.Minute) // the idle session is released
	var jp pipeline.JobProgress
	poll.UntilNil(t, 30*time.Second, "the orphan's state", func() error {
		jp, err = pipeline.JobOf(testCtx(t), c, workQueue, "orphan")
		if err == nil && (jp.Locked || jp.State == nil) {
			err = fmt.Errorf("progress %+v", jp)
		}
		return err
	})
	if jp.State.LastTask != 2 || jp.State.Count != 5 || jp.Pending != 0 || jp.State.Failed {
		t.Fatalf("orphan progress %+v state %+v", jp, jp.State)
	}
	all, err := pipeline.Jobs(testCtx(t), c, workQueue)
	if err != nil || len(all) != 1 || all[0].Job != "orphan" {
		t.Fatalf("Jobs = %+v, %v; want only the orphan", all, err)
	}
	swept, err := p.Sweep(testCtx(t), &pipeline.SweepOptions{OlderThan: time.Hour})
	if err != nil || len(swept) != 0 {
		t.Fatalf("Sweep of a fresh state = %v, %v", swept, err)
	}
	srv.Advance(time.Hour)
	swept, err = p.Sweep(testCtx(t), &pipeline.SweepOptions{OlderThan: time.Hour})
	if err != nil || !slices.Equal(swept, []string{"orphan"}) {
		t.Fatalf("Sweep = %v, %v; want the orphan", swept, err)
	}
	waitEnded(t, c, "orphan")
	all, err = pipeline.Jobs(testCtx(t), c, workQueue)
	if err != nil || len(all) != 0 {
		t.Fatalf("Jobs after the sweep = %+v, %v", all, err)
	}
}
