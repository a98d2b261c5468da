package servicebus

import (
	"context"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/broker"
)

// Descriptors of the rule encodings in enumerate-rules responses, as the
// JS SDK checks them (@azure/core-amqp Constants.descriptorCodes).
const (
	descRuleDescription   uint64 = 0x13700000004
	descEmptyRuleAction   uint64 = 0x13700000005
	descSQLRuleAction     uint64 = 0x13700000006
	descSQLFilter         uint64 = 0x1370000006
	descTrueFilter        uint64 = 0x1370000007
	descFalseFilter       uint64 = 0x1370000008
	descCorrelationFilter uint64 = 0x1370000009
)

// ruleEntity splits the management link's entity into topic and
// subscription; rule operations need a subscription.
func (l *mgmtLink) ruleEntity() (topic, sub string, err error) {
	p, err := broker.ParsePath(l.addr.Entity)
	if err != nil || p.Subscription == "" || l.addr.SubQueue != SubQueueNone {
		return "", "", badRequest("rule operations need a subscription's $management node, not %q", l.addr.Path())
	}
	return p.Entity, p.Subscription, nil
}

func (l *mgmtLink) addRule(ctx context.Context, req *request) (int32, any, error) {
	topic, sub, err := l.ruleEntity()
	if err != nil {
		return 0, nil, err
	}
	name, err := req.body.str("rule-name")
	if err != nil {
		return 0, nil, err
	}
	desc, err := req.body.submap("rule-description")
	if err != nil {
		return 0, nil, err
	}
	if desc == nil {
		return 0, nil, badRequest("the request lacks 'rule-description'")
	}
	rule, err := ruleFromDescription(name, desc)
	if err != nil {
		return 0, nil, err
	}
	return 200, nil, l.c.h.b.AddRule(ctx, topic, sub, rule)
}

// ruleFromDescription reads a rule-description map: a sql-filter or
// correlation-filter, and an optional sql-rule-action.
func ruleFromDescription(name string, desc fieldMap) (broker.RuleProperties, error) {
	r := broker.RuleProperties{Name: name}
	sqlf, err := desc.submap("sql-filter")
	if err != nil {
		return r, err
	}
	corr, err := desc.submap("correlation-filter")
	if err != nil {
		return r, err
	}
	switch {
	case sqlf != nil:
		r.Filter.Kind = broker.FilterSQL
		if r.Filter.SQL, err = sqlf.str("expression"); err != nil {
			return r, err
		}
		if r.Filter.Parameters, err = sqlf.properties("parameters"); err != nil {
			return r, err
		}
	case corr != nil:
		r.Filter.Kind = broker.FilterCorrelation
		c := &r.Filter.Correlation
		for key, dst := range map[string]*string{
			"correlation-id": &c.CorrelationID, "message-id": &c.MessageID, "to": &c.To,
			"reply-to": &c.ReplyTo, "label": &c.Subject, "session-id": &c.SessionID,
			"reply-to-session-id": &c.ReplyToSessionID, "content-type": &c.ContentType,
		} {
			if *dst, err = corr.optStr(key); err != nil {
				return r, err
			}
		}
		if c.Properties, err = corr.properties("properties"); err != nil {
			return r, err
		}
	default:
		r.Filter.Kind = broker.FilterTrue
	}
	act, err := desc.submap("sql-rule-action")
	if err != nil {
		return r, err
	}
	if act != nil {
		if r.Action, err = act.str("expression"); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (l *mgmtLink) removeRule(ctx context.Context, req *request) (int32, any, error) {
	topic, sub, err := l.ruleEntity()
	if err != nil {
		return 0, nil, err
	}
	name, err := req.body.str("rule-name")
	if err != nil {
		return 0, nil, err
	}
	return 200, nil, l.c.h.b.RemoveRule(ctx, topic, sub, name)
}

func (l *mgmtLink) enumerateRules(ctx context.Context, req *request) (int32, any, error) {
	topic, sub, err := l.ruleEntity()
	if err != nil {
		return 0, nil, err
	}
	top, err := req.body.int("top", 0)
	if err != nil {
		return 0, nil, err
	}
	skip, err := req.body.int("skip", 0)
	if err != nil {
		return 0, nil, err
	}
	if skip < 0 || top < 0 {
		return 0, nil, badRequest("'skip' and 'top' must not be negative")
	}
	rules, err := l.c.h.b.ListRules(ctx, topic, sub, int(skip), int(top))
	if err != nil {
		return 0, nil, err
	}
	if len(rules) == 0 {
		return 204, nil, nil
	}
	list := make(encoding.List, len(rules))
	for i, r := range rules {
		list[i] = entries("rule-description", describeRule(r))
	}
	return 200, entries("rules", list), nil
}

// describeRule encodes a rule as the described list [filter, action, name].
func describeRule(r broker.RuleProperties) *encoding.Described {
	var filter *encoding.Described
	switch r.Filter.Kind {
	case broker.FilterSQL:
		filter = &encoding.Described{Descriptor: descSQLFilter, Value: encoding.List{r.Filter.SQL}}
	case broker.FilterFalse:
		filter = &encoding.Described{Descriptor: descFalseFilter, Value: encoding.List{}}
	case broker.FilterCorrelation:
		c := r.Filter.Correlation
		var props any
		if len(c.Properties) > 0 {
			m := make(encoding.Map, 0, len(c.Properties))
			for k, v := range c.Properties {
				m = append(m, encoding.Pair{Key: k, Value: amqpValue(v)})
			}
			props = m
		}
		filter = &encoding.Described{Descriptor: descCorrelationFilter, Value: encoding.List{
			optString(c.CorrelationID), optString(c.MessageID), optString(c.To), optString(c.ReplyTo),
			optString(c.Subject), optString(c.SessionID), optString(c.ReplyToSessionID), optString(c.ContentType), props,
		}}
	default:
		filter = &encoding.Described{Descriptor: descTrueFilter, Value: encoding.List{}}
	}
	action := &encoding.Described{Descriptor: descEmptyRuleAction, Value: encoding.List{}}
	if r.Action != "" {
		action = &encoding.Described{Descriptor: descSQLRuleAction, Value: encoding.List{r.Action}}
	}
	return &encoding.Described{Descriptor: descRuleDescription, Value: encoding.List{filter, action, r.Name}}
}

// optString is s, or null when empty.
func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
