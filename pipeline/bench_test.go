package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

// The benchmarks run b.N jobs of 1 or 5 tasks through an in-process
// Busbar (busbartest, real clock), submitted before the workers start, with
// benchJobs jobs at once, and report jobs/s, tasks/s and the process's CPU
// time per task (broker included: it runs in the same process).
//
// BenchmarkPipeline runs them with this package (job state, start and
// progress records, failure store on standby). BenchmarkHandWrittenSDK runs
// the same jobs with hand-written SDK code that only accepts sessions,
// receives and completes the tasks in order (no state, no retries), so the
// difference is the pipeline's overhead. docs/toolkit-pipelines.md has the
// command and the numbers.

const benchJobs = 32

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRun submits b.N jobs of n tasks, runs work until done counts every
// task, and reports the rates.
func benchRun(b *testing.B, n int, work func(c *azservicebus.Client, done *atomic.Int64) (stop func())) {
	srv := busbartest.Start(b, jobQueues()...)
	c := busbartest.NewClient(b, srv.ConnectionString())
	sub, err := pipeline.New(c, workQueue, &pipeline.Options{Store: pipeline.NewBrokerStore(c, failedQueue)})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range b.N {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := fmt.Sprintf("job-%06d", i)
			submit(b, sub, id, purchase(id)[:n])
		}()
	}
	wg.Wait()
	var done atomic.Int64
	b.ResetTimer()
	t0, cpu0 := time.Now(), cpuNow()
	stop := work(c, &done)
	if !poll.Wait(10*time.Minute, func() bool { return done.Load() == int64(b.N*n) }) {
		b.Fatalf("%d of %d tasks done in 10 minutes", done.Load(), b.N*n)
	}
	elapsed, cpu := time.Since(t0), cpuNow()-cpu0
	b.StopTimer()
	stop()
	_ = sub.Close(context.Background())
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "tasks/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/task")
}

func BenchmarkPipeline(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			benchRun(b, n, func(c *azservicebus.Client, done *atomic.Int64) func() {
				p, err := pipeline.New(c, workQueue, &pipeline.Options{Store: pipeline.NewBrokerStore(c, failedQueue), MaxConcurrentJobs: benchJobs})
				if err != nil {
					b.Fatal(err)
				}
				for _, typ := range purchaseTypes {
					_ = p.Handle(typ, func(context.Context, *pipeline.Task) error { done.Add(1); return nil })
				}
				errc := make(chan error, 1)
				go func() { errc <- p.Run(context.Background()) }()
				return func() { _ = p.Close(context.Background()); <-errc }
			})
		})
	}
}

func BenchmarkHandWrittenSDK(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			benchRun(b, n, func(c *azservicebus.Client, done *atomic.Int64) func() {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for range benchJobs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						handWrittenWorker(ctx, c, done)
					}()
				}
				return func() { cancel(); wg.Wait() }
			})
		})
	}
}

// handWrittenWorker accepts a session, receives its tasks one at a time,
// runs and completes each, and releases the session after the last.
func handWrittenWorker(ctx context.Context, c *azservicebus.Client, done *atomic.Int64) {
	for ctx.Err() == nil {
		r, err := c.AcceptNextSessionForQueue(ctx, workQueue, nil)
		if err != nil {
			continue
		}
		for ctx.Err() == nil {
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil || len(msgs) == 0 {
				break
			}
			m := msgs[0]
			done.Add(1) // the task's work
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				break
			}
			if last, _ := m.ApplicationProperties[pipeline.PropLast].(bool); last {
				break
			}
		}
		_ = r.Close(context.Background())
	}
}
