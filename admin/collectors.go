package admin

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/store"
)

var (
	entityLabels = []string{"entity", "kind"}

	descActive = prometheus.NewDesc("busbar_entity_active_messages",
		"Active messages of a queue or subscription (for a topic, summed over its subscriptions).", entityLabels, nil)
	descDeadLetter = prometheus.NewDesc("busbar_entity_dead_letter_messages",
		"Messages in the dead-letter subqueue.", entityLabels, nil)
	descScheduled = prometheus.NewDesc("busbar_entity_scheduled_messages",
		"Scheduled messages not yet active.", entityLabels, nil)
	descDeferred = prometheus.NewDesc("busbar_entity_deferred_messages",
		"Deferred messages.", entityLabels, nil)
	descTransferDL = prometheus.NewDesc("busbar_entity_transfer_dead_letter_messages",
		"Messages in the transfer dead-letter subqueue.", entityLabels, nil)
	descTotal = prometheus.NewDesc("busbar_entity_messages",
		"All messages of the entity, in every subqueue and state.", entityLabels, nil)
	descSize = prometheus.NewDesc("busbar_entity_size_bytes",
		"Bytes of the entity's messages.", entityLabels, nil)
	descSubs = prometheus.NewDesc("busbar_topic_subscriptions",
		"Subscriptions of a topic.", []string{"entity"}, nil)

	descCommits = prometheus.NewDesc("busbar_store_commits_total", "Batches committed to the store.", nil, nil)
	descSyncs   = prometheus.NewDesc("busbar_store_fsyncs_total", "Fsyncs (group commits) of the store.", nil, nil)
	descOps     = prometheus.NewDesc("busbar_store_ops_total", "Operations committed to the store.", nil, nil)
	descBytes   = prometheus.NewDesc("busbar_store_written_bytes_total", "Bytes of keys and values committed.", nil, nil)
)

// entityCollector reads the runtime state of every entity at scrape time.
type entityCollector struct {
	b Backend
}

func (c *entityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descDeadLetter, descScheduled, descDeferred, descTransferDL,
		descTotal, descSize, descSubs} {
		ch <- d
	}
}

func (c *entityCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	emit := func(path, kind string, ri broker.RuntimeInfo) {
		for _, g := range []struct {
			d *prometheus.Desc
			v int64
		}{
			{descActive, ri.ActiveMessageCount}, {descDeadLetter, ri.DeadLetterMessageCount},
			{descScheduled, ri.ScheduledMessageCount}, {descDeferred, ri.DeferredMessageCount},
			{descTransferDL, ri.TransferDeadLetterMessageCount}, {descTotal, ri.TotalMessageCount},
			{descSize, ri.SizeInBytes},
		} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, float64(g.v), path, kind)
		}
	}
	if qs, err := c.b.ListQueues(ctx, 0, 0); err == nil {
		for _, q := range qs {
			emit(q.Name, "queue", q.Runtime)
		}
	}
	ts, err := c.b.ListTopics(ctx, 0, 0)
	if err != nil {
		return
	}
	for _, t := range ts {
		emit(t.Name, "topic", t.Runtime)
		ch <- prometheus.MustNewConstMetric(descSubs, prometheus.GaugeValue, float64(t.Runtime.SubscriptionCount), t.Name)
		subs, err := c.b.ListSubscriptions(ctx, t.Name, 0, 0)
		if err != nil {
			continue // deleted since it was listed
		}
		for _, s := range subs {
			emit(t.Name+"/Subscriptions/"+s.Name, "subscription", s.Runtime)
		}
	}
}

// storeCollector reports the store's cumulative counters.
type storeCollector struct {
	stats func() store.Stats
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCommits
	ch <- descSyncs
	ch <- descOps
	ch <- descBytes
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(descSyncs, prometheus.CounterValue, float64(s.Syncs))
	ch <- prometheus.MustNewConstMetric(descOps, prometheus.CounterValue, float64(s.Ops))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(s.BytesWritten))
}
