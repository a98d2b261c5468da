package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

// exampleBroker starts an in-process Busbar with a work queue "purchases"
// and a failed-job queue "purchases-failed" for the examples (tests use
// busbartest) and returns a client.
func exampleBroker() (*azservicebus.Client, func()) {
	connStr, stopBroker, err := busbartest.StartExample(map[string]broker.QueueProperties{
		"purchases":        {RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 100},
		"purchases-failed": {RequiresSession: true},
	})
	if err != nil {
		panic(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		panic(err)
	}
	return client, func() {
		_ = client.Close(context.Background())
		stopBroker()
	}
}

// A job's tasks run in order, one handler per task type; with the Stop
// policy a failed payment sets aside the payment and the receipt, which
// never runs. Once the payment works, the job is resubmitted from its
// failed task as a new job.
func Example() {
	client, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	store := pipeline.NewBrokerStore(client, "purchases-failed")
	p, _ := pipeline.New(client, "purchases", &pipeline.Options{Policy: pipeline.Stop, Store: store, MaxAttempts: 1})
	var declined atomic.Bool
	declined.Store(true)
	done := make(chan string, 4)
	for _, typ := range []string{"total", "payment", "receipt"} {
		_ = p.Handle(typ, func(_ context.Context, t *pipeline.Task) error {
			if typ == "payment" && declined.Load() {
				fmt.Printf("%s: %s declined\n", t.Job, typ)
				done <- t.Job
				return errors.New("card declined")
			}
			fmt.Printf("%s: %s\n", t.Job, typ)
			if t.Last {
				done <- t.Job
			}
			return nil
		})
	}
	go func() { _ = p.Run(ctx) }()
	defer p.Close(ctx)

	_ = p.Submit(ctx, "order-7", []pipeline.TaskSpec{{Type: "total"}, {Type: "payment"}, {Type: "receipt"}})
	<-done
	var fj pipeline.FailedJob
	poll.Wait(time.Minute, func() bool { // the receipt is set aside just after
		fj, _ = store.Job(ctx, "order-7")
		return len(fj.Tasks) == 2
	})
	for _, t := range fj.Tasks {
		fmt.Printf("set aside: task %d %s (%s: %s)\n", t.Index, t.Type, t.Reason, t.Error)
	}

	declined.Store(false)
	newJob, _ := p.Resubmit(ctx, "order-7", nil)
	<-done
	_, err := p.Resubmit(ctx, "order-7", nil)
	fmt.Println("resubmitted as", newJob, "- again:", err)
	// Output:
	// order-7: total
	// order-7: payment declined
	// set aside: task 1 payment (TaskFailed: card declined)
	// set aside: task 2 receipt (JobFailed: task 1 of the job failed: card declined)
	// order-7~r1: payment
	// order-7~r1: receipt
	// resubmitted as order-7~r1 - again: pipeline: job not found in the failed-job store
}
