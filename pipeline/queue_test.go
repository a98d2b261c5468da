package pipeline_test

import (
	"testing"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/pipeline"
)

// TestCreateQueue: CreateQueue makes a session-enabled queue with
// duplicate detection and a MaxDeliveryCount above the pipeline's
// attempts, and leaves an existing one alone; a job submitted twice to it
// runs once.
func TestCreateQueue(t *testing.T) {
	srv := busbartest.Start(t)
	ac, err := srv.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for range 2 {
		if err := pipeline.CreateQueue(ctx, ac, workQueue); err != nil {
			t.Fatal(err)
		}
	}
	if err := pipeline.CreateQueue(ctx, ac, failedQueue); err != nil {
		t.Fatal(err)
	}
	q, err := ac.GetQueue(ctx, workQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !*q.RequiresSession || !*q.RequiresDuplicateDetection || *q.MaxDeliveryCount != 100 || *q.DuplicateDetectionHistoryTimeWindow != "PT1H" {
		t.Fatalf("queue properties %+v", q.QueueProperties)
	}
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := &recorder{}
	p := newPipeline(t, c, srv, rec, pipeline.Options{})
	submit(t, p, "twice", purchase("twice"))
	submit(t, p, "twice", purchase("twice"))
	run(t, p)
	waitEnded(t, c, "twice")
	if got := rec.of("twice"); len(got) != 5 {
		t.Fatalf("a job submitted twice ran %v", got)
	}
}
