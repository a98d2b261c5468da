package schedule

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the scheduler's Prometheus collectors. They carry no
// schedule label: a host may run hundreds of thousands of schedules.
type metrics struct {
	firings  *prometheus.CounterVec // by trigger
	lateness prometheus.Histogram
	misfires *prometheus.CounterVec // missed firings not sent, by policy
	overlaps *prometheus.CounterVec // by policy: skipped or queued
	stale    prometheus.Counter
	changes  *prometheus.CounterVec // by operation
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		firings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_schedule_firings_total",
			Help: "Firings sent, by trigger (schedule, misfire, queued, manual)."}, []string{"trigger"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "busbar_schedule_lateness_seconds",
			Help:    "How long after its due time a host handled a firing, by the host's clock.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}}),
		misfires: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_schedule_misfires_total",
			Help: "Firings that came due while no host ran and were not sent, by misfire policy."}, []string{"policy"}),
		overlaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_schedule_overlaps_total",
			Help: "Firings that came due while an earlier one still ran, by what happened (skipped, queued)."}, []string{"outcome"}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "busbar_schedule_stale_ticks_total",
			Help: "Wake-up messages discarded because the schedule had changed since they were scheduled."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_schedule_changes_total",
			Help: "Schedule operations that changed a schedule, by operation."}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.firings, err = register(reg, m.firings); err != nil {
		return nil, err
	}
	if m.lateness, err = register(reg, m.lateness); err != nil {
		return nil, err
	}
	if m.misfires, err = register(reg, m.misfires); err != nil {
		return nil, err
	}
	if m.overlaps, err = register(reg, m.overlaps); err != nil {
		return nil, err
	}
	if m.stale, err = register(reg, m.stale); err != nil {
		return nil, err
	}
	if m.changes, err = register(reg, m.changes); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered in its
// place (two schedulers in one process share their metrics).
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}
