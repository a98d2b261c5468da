package admin

import (
	"errors"
	"net/http"
	"strings"

	"github.com/busbar-io/busbar/broker"
)

func (c *call) writeQueueEntry(w *writer, q *broker.QueueInfo, inFeed bool) {
	startEntry(w, c.entry(q.Name, q.Name, q.Runtime), inFeed)
	p := q.Properties
	p.MaxSizeInMegabytes = c.h.shownSizeMB(p.MaxSizeInMegabytes, p.EnablePartitioning)
	writeQueue(w, c.host(), p, q.Runtime)
	endEntry(w)
}

func (c *call) writeTopicEntry(w *writer, t *broker.TopicInfo, inFeed bool) error {
	var fc filterCounts
	if c.version() >= "2024-05" {
		var err error
		if fc, err = c.filterCounts(t.Name); err != nil {
			return err
		}
	}
	startEntry(w, c.entry(t.Name, t.Name, t.Runtime), inFeed)
	p := t.Properties
	p.MaxSizeInMegabytes = c.h.shownSizeMB(p.MaxSizeInMegabytes, p.EnablePartitioning)
	writeTopic(w, p, t.Runtime, fc)
	endEntry(w)
	return nil
}

// filterCounts counts the filters of a topic's subscriptions.
func (c *call) filterCounts(topic string) (filterCounts, error) {
	fc := filterCounts{present: true}
	subs, err := c.b().ListSubscriptions(c.ctx(), topic, 0, 0)
	if err != nil {
		return fc, err
	}
	for _, s := range subs {
		rules, err := c.b().ListRules(c.ctx(), topic, s.Name, 0, 0)
		if errors.Is(err, broker.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fc, err
		}
		for _, r := range rules {
			if isSQLKind(r.Filter.Kind) {
				fc.sql++
			} else {
				fc.correlation++
			}
		}
	}
	return fc, nil
}

func (c *call) writeSubscriptionEntry(w *writer, s *broker.SubscriptionInfo, inFeed bool) {
	startEntry(w, c.entry(s.Topic+"/Subscriptions/"+s.Name, s.Name, s.Runtime), inFeed)
	writeSubscription(w, c.host(), s.Properties, s.Runtime)
	endEntry(w)
}

func (c *call) writeRuleEntry(w *writer, rp broker.RuleProperties, inFeed bool) {
	path := c.rt.subPath() + "/Rules/" + rp.Name
	startEntry(w, atomEntry{self: c.url(path, nil), title: rp.Name, published: rp.CreatedAt, updated: rp.CreatedAt,
		author: c.h.o.NamespaceName}, inFeed)
	writeRule(w, rp)
	endEntry(w)
}

// getEntity serves GET /{name}: the queue or the topic of that name.
func (c *call) getEntity() error {
	var w writer
	q, err := c.b().GetQueue(c.ctx(), c.rt.entity)
	if err == nil {
		c.writeQueueEntry(&w, q, false)
		return c.respond("entry", &w)
	}
	if !errors.Is(err, broker.ErrNotFound) {
		return err
	}
	t, err := c.b().GetTopic(c.ctx(), c.rt.entity)
	if errors.Is(err, broker.ErrNotFound) {
		return withStatus(http.StatusNotFound, "the messaging entity %q could not be found", c.rt.entity)
	}
	if err != nil {
		return err
	}
	if err := c.writeTopicEntry(&w, t, false); err != nil {
		return err
	}
	return c.respond("entry", &w)
}

// putEntity serves PUT /{name}: create (no If-Match) or update a queue or a
// topic, as the description in the body says.
func (c *call) putEntity() error {
	rd, kind, err := c.readDescription()
	if err != nil {
		return err
	}
	switch kind {
	case "QueueDescription":
		return c.putQueue(rd)
	case "TopicDescription":
		return c.putTopic(rd)
	}
	return badRequestf("PUT /%s needs a QueueDescription or a TopicDescription, not %s", c.rt.entity, truncate(kind, 60))
}

func (c *call) putQueue(rd *reader) error {
	name, b := c.rt.entity, c.b()
	return put(c, rd, putOps[broker.QueueProperties]{
		kind: "queue", name: name,
		get: func() (broker.QueueProperties, error) {
			q, err := b.GetQueue(c.ctx(), name)
			if err != nil {
				return broker.QueueProperties{}, err
			}
			return q.Properties, nil
		},
		decode: decodeQueue,
		adjust: func(p *broker.QueueProperties) {
			p.MaxSizeInMegabytes = c.h.storedSizeMB(p.MaxSizeInMegabytes, p.EnablePartitioning)
		},
		update:  func(p broker.QueueProperties) error { return b.UpdateQueue(c.ctx(), name, p) },
		create:  func(p broker.QueueProperties) error { return b.CreateQueue(c.ctx(), name, p) },
		respond: c.getEntity,
	})
}

func (c *call) putTopic(rd *reader) error {
	name, b := c.rt.entity, c.b()
	return put(c, rd, putOps[broker.TopicProperties]{
		kind: "topic", name: name,
		get: func() (broker.TopicProperties, error) {
			t, err := b.GetTopic(c.ctx(), name)
			if err != nil {
				return broker.TopicProperties{}, err
			}
			return t.Properties, nil
		},
		decode: decodeTopic,
		adjust: func(p *broker.TopicProperties) {
			p.MaxSizeInMegabytes = c.h.storedSizeMB(p.MaxSizeInMegabytes, p.EnablePartitioning)
		},
		update:  func(p broker.TopicProperties) error { return b.UpdateTopic(c.ctx(), name, p) },
		create:  func(p broker.TopicProperties) error { return b.CreateTopic(c.ctx(), name, p) },
		respond: c.getEntity,
	})
}

// putOps are what a PUT of one kind of entity calls: the properties now
// (for an update), the body's decoder over them, an adjustment before the
// write, the broker's update and create, and the response.
type putOps[P any] struct {
	kind, name     string
	get            func() (P, error)
	decode         func(*reader, P) (P, fieldSet, error)
	adjust         func(*P) // may be nil
	update, create func(P) error
	respond        func() error
}

// put creates (no If-Match) or updates an entity from the description in
// rd; a created one answers 201.
func put[P any](c *call, rd *reader, o putOps[P]) error {
	var cur P
	if c.isUpdate() {
		p, err := o.get()
		if err != nil {
			return notFoundAs(err, o.kind, o.name)
		}
		cur = p
	}
	p, _, err := o.decode(rd, cur)
	if err == nil {
		err = closeEntry(rd)
	}
	if err != nil {
		return err
	}
	if o.adjust != nil {
		o.adjust(&p)
	}
	if c.isUpdate() {
		err = o.update(p)
	} else if err = o.create(p); err == nil {
		c.status = http.StatusCreated
	}
	if err != nil {
		return err
	}
	return o.respond()
}

// notFoundAs words a broker "not found" for an update (404).
func notFoundAs(err error, kind, name string) error {
	if errors.Is(err, broker.ErrNotFound) {
		return withStatus(http.StatusNotFound, "the %s %q does not exist, so it cannot be updated (send the PUT without If-Match to create it)", kind, name)
	}
	return err
}

// deleteEntity serves DELETE /{name}: the queue or the topic of that name.
func (c *call) deleteEntity() error {
	name := c.rt.entity
	err := c.b().DeleteQueue(c.ctx(), name)
	if errors.Is(err, broker.ErrNotFound) {
		err = c.b().DeleteTopic(c.ctx(), name)
	}
	if errors.Is(err, broker.ErrNotFound) {
		return withStatus(http.StatusNotFound, "the messaging entity %q could not be found", name)
	}
	return err
}

func (c *call) listQueues() error {
	return feed(c, "Queues", "$Resources/Queues",
		func(skip, top int) ([]*broker.QueueInfo, error) { return c.b().ListQueues(c.ctx(), skip, top) },
		func(w *writer, q *broker.QueueInfo) error { c.writeQueueEntry(w, q, true); return nil })
}

func (c *call) listTopics() error {
	return feed(c, "Topics", "$Resources/Topics",
		func(skip, top int) ([]*broker.TopicInfo, error) { return c.b().ListTopics(c.ctx(), skip, top) },
		func(w *writer, t *broker.TopicInfo) error { return c.writeTopicEntry(w, t, true) })
}

func (c *call) listSubscriptions() error {
	return feed(c, "Subscriptions", c.rt.entity+"/Subscriptions",
		func(skip, top int) ([]*broker.SubscriptionInfo, error) {
			return c.b().ListSubscriptions(c.ctx(), c.rt.entity, skip, top)
		},
		func(w *writer, s *broker.SubscriptionInfo) error { c.writeSubscriptionEntry(w, s, true); return nil })
}

func (c *call) getSubscription() error {
	s, err := c.b().GetSubscription(c.ctx(), c.rt.entity, c.rt.sub)
	if err != nil {
		return err
	}
	var w writer
	c.writeSubscriptionEntry(&w, s, false)
	return c.respond("entry", &w)
}

func (c *call) putSubscription() error {
	rd, kind, err := c.readDescription()
	if err != nil {
		return err
	}
	if kind != "SubscriptionDescription" {
		return badRequestf("PUT /%s needs a SubscriptionDescription, not %s", c.rt.subPath(), truncate(kind, 60))
	}
	t, s, b := c.rt.entity, c.rt.sub, c.b()
	return put(c, rd, putOps[broker.SubscriptionProperties]{
		kind: "subscription", name: c.rt.subPath(),
		get: func() (broker.SubscriptionProperties, error) {
			sub, err := b.GetSubscription(c.ctx(), t, s)
			if err != nil {
				return broker.SubscriptionProperties{}, err
			}
			return sub.Properties, nil
		},
		decode: decodeSubscription,
		update: func(p broker.SubscriptionProperties) error {
			p.DefaultRule = nil // a DefaultRuleDescription applies at creation only, as in Service Bus
			return b.UpdateSubscription(c.ctx(), t, s, p)
		},
		create:  func(p broker.SubscriptionProperties) error { return b.CreateSubscription(c.ctx(), t, s, p) },
		respond: c.getSubscription,
	})
}

func (c *call) listRules() error {
	return feed(c, "Rules", c.rt.subPath()+"/Rules",
		func(skip, top int) ([]broker.RuleProperties, error) {
			return c.b().ListRules(c.ctx(), c.rt.entity, c.rt.sub, skip, top)
		},
		func(w *writer, r broker.RuleProperties) error { c.writeRuleEntry(w, r, true); return nil })
}

func (c *call) getRule() error {
	rp, err := getRule(c.ctx(), c.b(), c.rt.entity, c.rt.sub, c.rt.rule)
	if err != nil {
		return err
	}
	var w writer
	c.writeRuleEntry(&w, rp, false)
	return c.respond("entry", &w)
}

// putRule creates or updates a rule. The name comes from the URL, or from
// the body's Name when the URL has none; the two must agree.
func (c *call) putRule() error {
	rd, kind, err := c.readDescription()
	if err != nil {
		return err
	}
	if kind != "RuleDescription" {
		return badRequestf("PUT of a rule needs a RuleDescription, not %s", truncate(kind, 60))
	}
	rp, err := decodeRule(rd, "RuleDescription")
	if err == nil {
		err = closeEntry(rd)
	}
	if err != nil {
		return err
	}
	switch {
	case c.rt.rule == "" && rp.Name == "":
		rp.Name = broker.DefaultRuleName
	case c.rt.rule == "":
	case rp.Name != "" && !strings.EqualFold(rp.Name, c.rt.rule):
		return badRequestf("property Name %q does not match the rule name %q in the URL", truncate(rp.Name, 60), c.rt.rule)
	default:
		rp.Name = c.rt.rule
	}
	t, s := c.rt.entity, c.rt.sub
	if c.isUpdate() {
		if err := c.b().UpdateRule(c.ctx(), t, s, rp); err != nil {
			return notFoundAs(err, "rule", rp.Name)
		}
	} else {
		if err := c.b().AddRule(c.ctx(), t, s, rp); err != nil {
			return err
		}
		c.status = http.StatusCreated
	}
	got, err := getRule(c.ctx(), c.b(), t, s, rp.Name)
	if err != nil {
		return err
	}
	var w writer
	c.writeRuleEntry(&w, got, false)
	return c.respond("entry", &w)
}
