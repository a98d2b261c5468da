// Package ops runs the toolkit's own operations for the web console —
// pausing, resuming and triggering a schedule, resubmitting a failed
// pipeline job — with the schedule and pipeline packages, as the CLI's
// `busbar schedule` and `busbar job` commands do, over the broker's AMQP
// listener and as the signed-in key. It implements console.Toolkit; only
// cmd/busbar (and tests) import it, so the console itself never depends on
// the toolkit or rewrites its state. It also reads the failed jobs of
// pipelines that keep them in PostgreSQL (package pipelinepg), from the
// databases it is given.
package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"

	"github.com/busbar-io/busbar/console"
	"github.com/busbar-io/busbar/internal/pgurl"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/busbar-io/busbar/schedule"
)

// Toolkit implements console.Toolkit. The zero value is ready to use and
// knows only the broker's failed-job stores.
type Toolkit struct {
	// PipelineDBs are the pipelines whose failed jobs are in PostgreSQL.
	PipelineDBs []PipelineDB
}

// PipelineDB is a pipeline's failed-job store in PostgreSQL.
type PipelineDB struct {
	Queue string // the pipeline's work queue
	DSN   string // the database
	Table string // pipelinepg's table ("": pipelinepg.DefaultTable)
}

// storeName names the store in console.FailedJob.Store.
func (d PipelineDB) storeName() string {
	if d.Table == "" {
		return "postgres:" + pipelinepg.DefaultTable
	}
	return "postgres:" + d.Table
}

// ParsePipelineDB reads postgres://…?busbar_queue=QUEUE[&busbar_table=T]:
// busbar_queue names the pipeline's work queue, busbar_table the
// pipelinepg table; every other parameter is PostgreSQL's. A query that
// cannot be read whole, or names either parameter twice, is refused rather
// than cut.
func ParsePipelineDB(raw string) (PipelineDB, error) {
	dsn, v, err := pgurl.Split(raw, "busbar_queue", "busbar_table")
	if err != nil {
		return PipelineDB{}, err
	}
	if v[0] == "" {
		return PipelineDB{}, fmt.Errorf("%s: name the pipeline's work queue with ?busbar_queue=QUEUE", pgurl.Redact(raw))
	}
	return PipelineDB{DSN: dsn, Queue: v[0], Table: v[1]}, nil
}

// ParsePipelineDBs reads whitespace-separated ParsePipelineDB URLs; a
// store may be named once.
func ParsePipelineDBs(list string) ([]PipelineDB, error) {
	var out []PipelineDB
	seen := map[[2]string]bool{}
	for _, raw := range strings.Fields(list) {
		d, err := ParsePipelineDB(raw)
		if err != nil {
			return nil, err
		}
		k := [2]string{d.Queue, d.storeName()}
		if seen[k] {
			return nil, fmt.Errorf("the failed jobs of %s in %s are named twice", d.Queue, d.storeName())
		}
		seen[k] = true
		out = append(out, d)
	}
	return out, nil
}

// FailedJobs lists the failed jobs of every PipelineDB, by the task that
// failed each.
func (k Toolkit) FailedJobs(ctx context.Context) ([]console.FailedJob, error) {
	var out []console.FailedJob
	for _, d := range k.PipelineDBs {
		err := d.with(ctx, func(st *pipelinepg.Store) error {
			jobs, err := st.Jobs(ctx)
			for _, j := range jobs {
				ft := j.Failed()
				out = append(out, console.FailedJob{Queue: d.Queue, Store: d.storeName(), Job: j.Job, Index: ft.Index, Type: ft.Type,
					Reason: ft.Reason, Error: ft.Error, Attempts: ft.Attempts, FailedAt: j.FailedAt()})
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("the failed jobs of %s: %w", d.Queue, err)
		}
	}
	return out, nil
}

// connectTimeout bounds connecting to a PipelineDB, so that a database
// out of reach fails quickly rather than holding the console's request.
const connectTimeout = 10 * time.Second

// with runs f on the store over a connection of its own.
func (d PipelineDB) with(ctx context.Context, f func(*pipelinepg.Store) error) error {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	conn, err := pgx.Connect(cctx, d.DSN)
	cancel()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return f(pipelinepg.New(conn, d.Table))
}

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

// ResubmitJob resubmits a failed job kept in the pipeline's broker store,
// or in the PipelineDB store names.
func (k Toolkit) ResubmitJob(ctx context.Context, connStr, queue, store, job string) (string, error) {
	c, done, err := k.client(connStr)
	if err != nil {
		return "", err
	}
	defer done()
	resubmit := func(st pipeline.Store) (string, error) {
		p, err := pipeline.New(c, queue, &pipeline.Options{Store: st})
		if err != nil {
			return "", err
		}
		defer p.Close(context.Background())
		return p.Resubmit(ctx, job, nil)
	}
	if store == "" {
		return resubmit(pipeline.NewBrokerStore(c, queue+pipeline.FailedQueueSuffix))
	}
	for _, d := range k.PipelineDBs {
		if d.Queue == queue && d.storeName() == store {
			var id string
			err := d.with(ctx, func(st *pipelinepg.Store) (err error) {
				id, err = resubmit(st)
				return err
			})
			return id, err
		}
	}
	return "", fmt.Errorf("no failed-job store %s for %s", store, queue)
}
