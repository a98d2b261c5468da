package admin

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/busbar-io/busbar/store"
)

// Metrics is Busbar's Prometheus registry and the instruments the layers
// feed. It implements broker.Observer (per-entity message events); the AMQP
// layer calls ConnectionOpened/Closed and LinkAttached/Detached; the store
// reports commits with ObserveCommit; CollectEntities and CollectStore add
// collectors read at scrape time. All methods are safe for concurrent use
// and cheap enough for hot paths; the feeding methods do nothing on a nil
// *Metrics, so a layer may hold one unconditionally.
type Metrics struct {
	reg *prometheus.Registry

	connections      prometheus.Gauge
	connectionsTotal prometheus.Counter
	links            *prometheus.GaugeVec
	senderLinks      prometheus.Gauge // links' gauges of the two roles
	receiverLinks    prometheus.Gauge

	messagesIn  *prometheus.CounterVec
	messagesOut *prometheus.CounterVec
	// inByEntity and outByEntity cache the counters of messagesIn and
	// messagesOut by entity path: resolving a label value costs allocations
	// and a hash, and these two are counted for every message.
	inByEntity   sync.Map // string → prometheus.Counter
	outByEntity  sync.Map // string → prometheus.Counter
	deadLettered *prometheus.CounterVec
	lockExpired  *prometheus.CounterVec

	commitLatency prometheus.Histogram
	walSync       prometheus.Histogram
	commitOps     prometheus.Histogram

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec

	mu         sync.Mutex
	collecting map[string]bool
}

// NewMetrics returns a Metrics with its own registry, which also holds the
// Go runtime and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), collecting: map[string]bool{}}
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "busbar_connections",
		Help: "AMQP connections open now."})
	m.connectionsTotal = prometheus.NewCounter(prometheus.CounterOpts{Name: "busbar_connections_opened_total",
		Help: "AMQP connections opened since start."})
	m.links = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "busbar_links",
		Help: "AMQP links attached now, by role (sender, receiver)."}, []string{"role"})
	m.senderLinks, m.receiverLinks = m.links.WithLabelValues("sender"), m.links.WithLabelValues("receiver")
	m.messagesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_messages_in_total",
		Help: "Messages accepted by an entity (after duplicate detection and fan-out)."}, []string{"entity"})
	m.messagesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_messages_out_total",
		Help: "Messages delivered to receivers of an entity."}, []string{"entity"})
	m.deadLettered = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_messages_dead_lettered_total",
		Help: "Messages moved to an entity's dead-letter subqueue, by dead-letter reason."}, []string{"entity", "reason"})
	m.lockExpired = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_lock_expirations_total",
		Help: "Message and session locks of an entity that expired before settlement."}, []string{"entity"})
	m.commitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "busbar_store_commit_seconds",
		Help:    "Latency of store commits (one group commit, fsync included).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.walSync = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "busbar_store_wal_sync_seconds",
		Help:    "Duration of the embedded store's write-ahead-log fsyncs: the disk's part of a commit's latency.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	m.commitOps = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "busbar_store_commit_batch_ops",
		Help:    "Operations per store commit (group-commit batch size).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14)})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busbar_admin_requests_total",
		Help: "Management API requests, by operation, method and HTTP status."}, []string{"operation", "method", "code"})
	m.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "busbar_admin_request_seconds",
		Help: "Latency of management API requests, by operation.", Buckets: prometheus.DefBuckets}, []string{"operation"})
	m.reg.MustRegister(m.connections, m.connectionsTotal, m.links, m.messagesIn, m.messagesOut, m.deadLettered,
		m.lockExpired, m.commitLatency, m.walSync, m.commitOps, m.requests, m.requestDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry, for other layers to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ConnectionOpened counts an AMQP connection that opened.
func (m *Metrics) ConnectionOpened() {
	if m == nil {
		return
	}
	m.connections.Inc()
	m.connectionsTotal.Inc()
}

// ConnectionClosed counts an AMQP connection that closed.
func (m *Metrics) ConnectionClosed() {
	if m == nil {
		return
	}
	m.connections.Dec()
}

// LinkAttached counts an AMQP link attached in role "sender" or "receiver".
func (m *Metrics) LinkAttached(role string) {
	if m == nil {
		return
	}
	m.link(role).Inc()
}

// LinkDetached counts an AMQP link detached in role "sender" or "receiver".
func (m *Metrics) LinkDetached(role string) {
	if m == nil {
		return
	}
	m.link(role).Dec()
}

// link returns the links gauge of role. The two roles' gauges are looked up
// once: a session receiver attaches and detaches a link per session, and
// the label lookup allocated each time.
func (m *Metrics) link(role string) prometheus.Gauge {
	switch role {
	case "sender":
		return m.senderLinks
	case "receiver":
		return m.receiverLinks
	}
	return m.links.WithLabelValues(role)
}

// MessagesIn implements broker.Observer.
func (m *Metrics) MessagesIn(entity string, n int) {
	if m == nil {
		return
	}
	entityCounter(&m.inByEntity, m.messagesIn, entity).Add(float64(n))
}

// MessagesOut implements broker.Observer.
func (m *Metrics) MessagesOut(entity string, n int) {
	if m == nil {
		return
	}
	entityCounter(&m.outByEntity, m.messagesOut, entity).Add(float64(n))
}

// entityCounter returns vec's counter for entity, from cache when it has
// been resolved before.
func entityCounter(cache *sync.Map, vec *prometheus.CounterVec, entity string) prometheus.Counter {
	if c, ok := cache.Load(entity); ok {
		return c.(prometheus.Counter)
	}
	c := vec.WithLabelValues(entity)
	cache.Store(entity, c)
	return c
}

// DeadLettered implements broker.Observer.
func (m *Metrics) DeadLettered(entity, reason string) {
	if m == nil {
		return
	}
	m.deadLettered.WithLabelValues(entity, reason).Inc()
}

// LockExpired implements broker.Observer.
func (m *Metrics) LockExpired(entity string) {
	if m == nil {
		return
	}
	m.lockExpired.WithLabelValues(entity).Inc()
}

// ObserveCommit records one store commit: its latency and its number of
// operations.
func (m *Metrics) ObserveCommit(latency time.Duration, ops int) {
	if m == nil {
		return
	}
	m.commitLatency.Observe(latency.Seconds())
	m.commitOps.Observe(float64(ops))
}

// ObserveWALSync records the duration of one fsync of the embedded store's
// write-ahead log.
func (m *Metrics) ObserveWALSync(d time.Duration) {
	if m == nil {
		return
	}
	m.walSync.Observe(d.Seconds())
}

func (m *Metrics) observeRequest(operation, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(operation, method, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(operation).Observe(d.Seconds())
}

// CollectEntities registers a collector that reads every entity's runtime
// state from b at scrape time. It may be called once; later calls are
// ignored.
func (m *Metrics) CollectEntities(b Backend) {
	if m.once("entities") {
		m.reg.MustRegister(&entityCollector{b: b})
	}
}

// CollectStore registers a collector that reads the store's cumulative
// counters at scrape time (stats is usually store.Store.Stats). It may be
// called once; later calls are ignored.
func (m *Metrics) CollectStore(stats func() store.Stats) {
	if m.once("store") {
		m.reg.MustRegister(&storeCollector{stats: stats})
	}
}

func (m *Metrics) once(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.collecting[name] {
		return false
	}
	m.collecting[name] = true
	return true
}
