// Command purchase-pipeline runs the two pipelines of "Pipeline Execution
// using Azure Service Bus" with the Busbar toolkit (package pipeline),
// against Busbar or Azure Service Bus.
//
// The purchase pipeline has the article's five tasks, in order: generate
// the order number, calculate the total, process the payment, generate the
// receipt, send the e-mail. It stops at the first failure: with
// --fail-payment (the default) the payment of the second order is declined,
// so its receipt and e-mail are never made; the three tasks are kept in the
// failed-job store. Then the payment gateway is "fixed" and the failed job
// is resubmitted from its payment, as a new job linked to the old one.
//
// The product import pipeline imports --rows products, one task each, and
// continues after a failure: every seventh row lacks a price and is set
// aside, the others are imported.
//
// Start a broker with the example's queues and run it:
//
//	busbar serve --config examples/purchase-pipeline/Config.json &
//	go run ./examples/purchase-pipeline --connection-string 'Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=...;UseDevelopmentEmulator=true'
//
// (or set BUSBAR_CONNECTION_STRING). Afterwards `busbar job failed imports`
// lists the rows that failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/pipeline"
)

// config is what a run needs.
type config struct {
	connStr     string
	failPayment bool
	rows        int
	wait        time.Duration
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("purchase-pipeline", flag.ExitOnError)
	fs.StringVar(&cfg.connStr, "connection-string", os.Getenv("BUSBAR_CONNECTION_STRING"), "the broker's connection string")
	fs.BoolVar(&cfg.failPayment, "fail-payment", true, "decline the payment of the second order until it is resubmitted")
	fs.IntVar(&cfg.rows, "rows", 20, "how many products the import has")
	fs.DurationVar(&cfg.wait, "wait", time.Minute, "how long to wait for each step")
	_ = fs.Parse(os.Args[1:])
	if cfg.connStr == "" {
		fmt.Fprintln(os.Stderr, "purchase-pipeline: give --connection-string or set BUSBAR_CONNECTION_STRING")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "purchase-pipeline:", err)
		os.Exit(1)
	}
}

// console prints lines from concurrent handlers.
type console struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *console) printf(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, format+"\n", a...)
}

func run(ctx context.Context, cfg config, w io.Writer) error {
	client, err := azservicebus.NewClientFromConnectionString(cfg.connStr, nil)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())
	out := &console{w: w}
	if err := purchases(ctx, cfg, client, out); err != nil {
		return err
	}
	return imports(ctx, cfg, client, out)
}

// start runs p until the returned function stops it.
func start(p *pipeline.Pipeline) (stop func()) {
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(context.Background()) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		<-done
	}
}

// waitFor checks cond every 50 ms until it holds or wait passes.
func waitFor(ctx context.Context, wait time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// ended reports whether the job's last task has been handled: run (done)
// or set aside (in the store).
func ended(ctx context.Context, st pipeline.Store, done *sync.Map, job string) bool {
	if _, ok := done.Load(job); ok {
		return true
	}
	fj, err := st.Job(ctx, job)
	return err == nil && fj.Tasks[len(fj.Tasks)-1].Last
}

func printFailed(ctx context.Context, st pipeline.Store, out *console) error {
	jobs, err := st.Jobs(ctx)
	if err != nil {
		return err
	}
	for _, fj := range jobs {
		out.printf("failed job %s:", fj.Job)
		for _, t := range fj.Tasks {
			out.printf("  task %d %-8s %-10s %s", t.Index, t.Type, t.Reason, t.Error)
		}
	}
	return nil
}

func imports(ctx context.Context, cfg config, client *azservicebus.Client, out *console) error {
	store := pipeline.NewBrokerStore(client, "imports-failed")
	defer store.Close(context.Background())
	p, err := pipeline.New(client, "imports", &pipeline.Options{Policy: pipeline.Continue, Store: store})
	if err != nil {
		return err
	}
	var imported atomic.Int64
	done := &sync.Map{}
	type product struct {
		SKU   string
		Price *float64
	}
	err = pipeline.HandleJSON(p, "import-product", func(_ context.Context, t *pipeline.Task, pr product) error {
		defer func() {
			if t.Last {
				done.Store(t.Job, true)
			}
		}()
		if pr.Price == nil {
			return pipeline.Permanent(fmt.Errorf("row %d: product %s has no price", t.Index+1, pr.SKU))
		}
		imported.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	job := fmt.Sprintf("import-%d", time.Now().UnixNano())
	tasks := make([]pipeline.TaskSpec, cfg.rows)
	for i := range tasks {
		pr := product{SKU: fmt.Sprintf("SKU-%04d", i+1)}
		if (i+1)%7 != 0 {
			price := 9.99 + float64(i)
			pr.Price = &price
		}
		if tasks[i], err = pipeline.JSONTask("import-product", pr); err != nil {
			return err
		}
	}
	out.printf("== product import (continue): %s with %d rows", job, cfg.rows)
	if err := p.Submit(ctx, job, tasks); err != nil {
		return err
	}
	stop := start(p)
	defer stop()
	want := int64(cfg.rows - cfg.rows/7)
	if err := waitFor(ctx, cfg.wait, "the import", func() bool {
		fj, _ := store.Job(ctx, job)
		return imported.Load() == want && len(fj.Tasks) == cfg.rows/7
	}); err != nil {
		return err
	}
	out.printf("imported %d products; %d rows set aside:", imported.Load(), cfg.rows/7)
	return printFailed(ctx, store, out)
}
