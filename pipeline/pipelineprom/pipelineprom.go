// Package pipelineprom exposes a pipeline's counters to Prometheus. It owns
// nothing but the collector: it reads pipeline.Metrics and touches neither
// the broker nor the pipeline's work.
package pipelineprom

import (
	"maps"
	"slices"

	"github.com/busbar-io/busbar/pipeline"
	"github.com/prometheus/client_golang/prometheus"
)

var desc = prometheus.NewDesc("busbar_pipeline_events_total",
	"Pipeline jobs and tasks by event.", []string{"queue", "event"}, nil)

// NewCollector returns a collector of p's counters as
// busbar_pipeline_events_total{queue, event}, to register wherever the
// application exposes metrics.
func NewCollector(p *pipeline.Pipeline) prometheus.Collector { return collector{p} }

type collector struct{ p *pipeline.Pipeline }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- desc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ev := c.p.Metrics().Events()
	for _, name := range slices.Sorted(maps.Keys(ev)) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(ev[name]), c.p.Queue(), name)
	}
}
