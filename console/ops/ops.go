// Package ops runs the toolkit's own operations for the web console —
// pausing, resuming and triggering a schedule, resubmitting a failed
// pipeline job — with the schedule and pipeline packages, as the CLI's
// `busbar schedule` and `busbar job` commands do, over the broker's AMQP
// listener and as the signed-in key. It implements console.Toolkit; only
// cmd/busbar (and tests) import it, so the console itself never depends on
// the toolkit or rewrites its state.
package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/schedule"
)

// Toolkit implements console.Toolkit. The zero value is ready to use.
type Toolkit struct{}

func (Toolkit) client(connStr string) (*azservicebus.Client, func(), error) {
	c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close(context.Background()) }, nil
}

// Schedule pauses, resumes or triggers a schedule.
func (k Toolkit) Schedule(ctx context.Context, connStr, queue, name, op string) error {
	c, done, err := k.client(connStr)
	if err != nil {
		return err
	}
	defer done()
	sch, err := schedule.New(c, queue, nil)
	if err != nil {
		return err
	}
	switch op {
	case "pause":
		err = sch.Pause(ctx, name)
	case "resume":
		err = sch.Resume(ctx, name)
	case "trigger":
		_, err = sch.Trigger(ctx, name)
	default:
		return fmt.Errorf("unknown schedule operation %q", op)
	}
	if errors.Is(err, schedule.ErrNotFound) {
		return fmt.Errorf("schedule %q does not exist in %s", name, queue)
	}
	return err
}

// ResubmitJob resubmits a failed job kept in the pipeline's broker store.
func (k Toolkit) ResubmitJob(ctx context.Context, connStr, queue, job string) (string, error) {
	c, done, err := k.client(connStr)
	if err != nil {
		return "", err
	}
	defer done()
	p, err := pipeline.New(c, queue, &pipeline.Options{Store: pipeline.NewBrokerStore(c, queue+pipeline.FailedQueueSuffix)})
	if err != nil {
		return "", err
	}
	defer p.Close(context.Background())
	return p.Resubmit(ctx, job, nil)
}
