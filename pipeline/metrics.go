package pipeline

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a pipeline's counters since it was created. After a crash a
// task may be counted twice (see the package documentation).
type Metrics struct {
	JobsSubmitted    atomic.Int64 // jobs sent by Submit or Resubmit
	JobsCompleted    atomic.Int64 // jobs whose last task was handled without the job failing
	JobsFailed       atomic.Int64 // jobs failed under the Stop policy
	JobsResubmitted  atomic.Int64 // failed jobs resubmitted
	TasksStarted     atomic.Int64 // handler calls
	TasksSucceeded   atomic.Int64 // handler calls that returned nil
	TasksRetried     atomic.Int64 // failed attempts that will be retried
	TasksFailed      atomic.Int64 // tasks set aside after failing
	TasksSkipped     atomic.Int64 // tasks set aside unexecuted (Stop policy)
	TasksRedelivered atomic.Int64 // redelivered tasks recognised as done and not run again
	StatesSwept      atomic.Int64 // orphaned job states cleared by Sweep
}

// Collector returns a Prometheus collector of the pipeline's counters,
// labelled with its queue, to register wherever the application exposes
// metrics.
func (p *Pipeline) Collector() prometheus.Collector {
	return &collector{p: p, desc: prometheus.NewDesc("busbar_pipeline_events_total",
		"Pipeline jobs and tasks by event.", []string{"queue", "event"}, nil)}
}

type collector struct {
	p    *Pipeline
	desc *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.p.metrics
	for _, e := range []struct {
		name string
		v    *atomic.Int64
	}{
		{"job_submitted", &m.JobsSubmitted}, {"job_completed", &m.JobsCompleted}, {"job_failed", &m.JobsFailed},
		{"job_resubmitted", &m.JobsResubmitted}, {"task_started", &m.TasksStarted}, {"task_succeeded", &m.TasksSucceeded},
		{"task_retried", &m.TasksRetried}, {"task_failed", &m.TasksFailed}, {"task_skipped", &m.TasksSkipped},
		{"task_redelivered", &m.TasksRedelivered}, {"state_swept", &m.StatesSwept},
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(e.v.Load()), c.p.queue, e.name)
	}
}
