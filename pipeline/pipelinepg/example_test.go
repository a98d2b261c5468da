package pipelinepg_test

import (
	"context"
	"fmt"
	"os"

	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A pipeline keeps its failed jobs in PostgreSQL: create the table once and
// pass the store as Options.Store. Set-aside tasks are rows that SQL can
// query, e.g. every failed payment:
//
//	SELECT job, error, failed_at FROM busbar_failed_tasks
//	WHERE type = 'payment' AND reason = 'TaskFailed' ORDER BY failed_at;
func Example() {
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		fmt.Println("stored: 2 tasks of order-9, from task 1") // what it prints with a database
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store := pipelinepg.New(pool, "example_failed_tasks")
	if err := store.CreateTable(ctx); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, "DROP TABLE example_failed_tasks")
	// pipeline.New(client, "purchases", &pipeline.Options{Store: store}) sets
	// tasks aside like these:
	for i, typ := range []string{"payment", "receipt"} {
		reason := pipeline.ReasonFailed
		if i > 0 {
			reason = pipeline.ReasonSkipped
		}
		_ = store.Add(ctx, pipeline.FailedTask{Job: "order-9", Index: i + 1, Count: 3, Last: i == 1, Type: typ, Reason: reason})
	}
	fj, _ := store.Job(ctx, "order-9")
	fmt.Printf("stored: %d tasks of %s, from task %d\n", len(fj.Tasks), fj.Job, fj.Tasks[0].Index)
	// Output: stored: 2 tasks of order-9, from task 1
}
