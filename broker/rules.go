package broker

import (
	"context"
	"errors"
	"slices"
	"sort"

	"github.com/busbar-io/busbar/broker/filter"
)

// rule is a compiled subscription rule.
type rule struct {
	p      RuleProperties
	filter filter.Filter
	action *filter.Action
}

const maxExpressionLength = 1024

// compileRule validates and compiles a rule. newID backs the SQL newid()
// function, so that it draws on the broker's one source of randomness.
func compileRule(p RuleProperties, newID func() [16]byte) (*rule, error) {
	if err := validateChildName("rule", p.Name); err != nil {
		return nil, err
	}
	r := &rule{p: p}
	switch p.Filter.Kind {
	case FilterTrue:
		r.filter = filter.TrueFilter{}
	case FilterFalse:
		r.filter = filter.FalseFilter{}
	case FilterSQL:
		if len(p.Filter.SQL) > maxExpressionLength {
			return nil, errorf(ErrInvalidArgument, "rule %q: SQL filter is %d characters, more than %d", p.Name, len(p.Filter.SQL), maxExpressionLength)
		}
		f, err := filter.ParseSQL(p.Filter.SQL)
		if err != nil {
			return nil, errorf(ErrInvalidArgument, "rule %q: SQL filter %q: %v", p.Name, p.Filter.SQL, err)
		}
		if err := checkValues(p.Filter.Parameters); err != nil {
			return nil, errorf(ErrInvalidArgument, "rule %q: parameters: %v", p.Name, err)
		}
		r.filter = f.WithParameters(p.Filter.Parameters).WithNewID(newID)
	case FilterCorrelation:
		c := p.Filter.Correlation
		if err := checkValues(c.Properties); err != nil {
			return nil, errorf(ErrInvalidArgument, "rule %q: correlation properties: %v", p.Name, err)
		}
		r.filter = &filter.CorrelationFilter{CorrelationID: c.CorrelationID, MessageID: c.MessageID, To: c.To,
			ReplyTo: c.ReplyTo, Subject: c.Subject, SessionID: c.SessionID, ReplyToSessionID: c.ReplyToSessionID,
			ContentType: c.ContentType, Properties: c.Properties}
	default:
		return nil, errorf(ErrInvalidArgument, "rule %q: unknown filter kind %d", p.Name, p.Filter.Kind)
	}
	if p.Action != "" {
		if len(p.Action) > maxExpressionLength {
			return nil, errorf(ErrInvalidArgument, "rule %q: action is %d characters, more than %d", p.Name, len(p.Action), maxExpressionLength)
		}
		a, err := filter.ParseAction(p.Action)
		if err != nil {
			return nil, errorf(ErrInvalidArgument, "rule %q: action %q: %v", p.Name, p.Action, err)
		}
		if err := checkValues(p.ActionParameters); err != nil {
			return nil, errorf(ErrInvalidArgument, "rule %q: action parameters: %v", p.Name, err)
		}
		r.action = a.WithParameters(p.ActionParameters).WithNewID(newID)
	}
	return r, nil
}

// CreateSubscription creates a subscription of a topic with the $Default
// TrueFilter rule, or p.DefaultRule when given.
func (b *Broker) CreateSubscription(ctx context.Context, topic, name string, p SubscriptionProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateChildName("subscription", name); err != nil {
		return err
	}
	pp := fromSubscription(p)
	if err := pp.normalize(kindSubscription, b.opts.MaxMessageSizeInKilobytes); err != nil {
		return err
	}
	rp := RuleProperties{Name: DefaultRuleName}
	if p.DefaultRule != nil {
		rp = *p.DefaultRule
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	t, err := b.entityOf(kindTopic, topic, "")
	if err != nil {
		return err
	}
	if err := b.checkForward(&pp, ""); err != nil {
		return err
	}
	t.mu.Lock()
	exists, n := t.subs[fold(name)] != nil, len(t.subs)
	t.mu.Unlock()
	if exists {
		return errorf(ErrAlreadyExists, "topic %q has a subscription %q", topic, name)
	}
	if n >= 2000 {
		return errorf(ErrQuotaExceeded, "topic %q has 2000 subscriptions, the limit", topic)
	}
	now := b.now()
	rp.CreatedAt = now
	r, err := compileRule(rp, b.newID)
	if err != nil {
		return err
	}
	rrec, err := encodeRule(&rp)
	if err != nil {
		return errorf(ErrInvalidArgument, "rule %q: %v", rp.Name, err)
	}
	rec := &entityRecord{id: b.nextID, parent: t.id, kind: kindSubscription, name: name, created: now, updated: now, p: pp}
	var bt batchBuf
	bt.Set(key1(kEntity, rec.id), encodeEntity(rec))
	bt.Set([]byte{kNamespace}, encodeUint(rec.id+1))
	bt.Set(keyS(kRule, rec.id, fold(rp.Name)), rrec)
	if err := b.commit(ctx, &bt.Batch); err != nil {
		return err
	}
	b.nextID++
	s := b.materialize(rec, t)
	s.rules = []*rule{r}
	s.touch(now)
	t.mu.Lock()
	t.subs[fold(name)] = s
	t.mu.Unlock()
	b.mu.Lock()
	b.byID[s.id] = s
	b.mu.Unlock()
	b.armIdle(s)
	return nil
}

// DeleteSubscription deletes a subscription and its messages.
func (b *Broker) DeleteSubscription(ctx context.Context, topic, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	s, err := b.entityOf(kindSubscription, topic, name)
	if err != nil {
		return err
	}
	return b.deleteSubLocked(ctx, s)
}

// deleteSubLocked deletes subscription s; entityMu is held.
func (b *Broker) deleteSubLocked(ctx context.Context, s *entity) error {
	var bt batchBuf
	deleteEntityKeys(&bt, s.id)
	s.q.stopWrites()
	s.q.waitWrites()
	if err := b.commit(ctx, &bt.Batch); err != nil {
		s.q.resumeWrites()
		return err
	}
	t := s.parent
	t.mu.Lock()
	delete(t.subs, fold(s.name))
	t.mu.Unlock()
	b.mu.Lock()
	delete(b.byID, s.id)
	b.mu.Unlock()
	b.dropEntity(s)
	return nil
}

// AddRule adds a rule to a subscription.
func (b *Broker) AddRule(ctx context.Context, topic, sub string, p RuleProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.putRule(ctx, topic, sub, p, false)
}

// UpdateRule replaces a subscription's rule of the same name (filter and
// action) in one durable step: every message sees either the old rule or
// the new one. The rule keeps its creation time.
func (b *Broker) UpdateRule(ctx context.Context, topic, sub string, p RuleProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.putRule(ctx, topic, sub, p, true)
}

// putRule adds a rule (replace false: the name must be new) or replaces one
// (replace true: the name must exist).
func (b *Broker) putRule(ctx context.Context, topic, sub string, p RuleProperties, replace bool) error {
	r, err := compileRule(p, b.newID)
	if err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	s, err := b.entityOf(kindSubscription, topic, sub)
	if err != nil {
		return err
	}
	// Rule changes are serialized by entityMu, so s.rules cannot change
	// until this returns; s.mu (which fan-out takes) is held only to read
	// and to swap the list, never across the commit.
	s.mu.Lock()
	cur := s.rules
	s.mu.Unlock()
	at := ruleIndex(cur, p.Name)
	switch {
	case at >= 0 && !replace:
		return errorf(ErrAlreadyExists, "subscription %q has a rule %q", s.path(), p.Name)
	case at < 0 && replace:
		return errorf(ErrNotFound, "subscription %q has no rule %q", s.path(), p.Name)
	}
	r.p.CreatedAt = b.now()
	if at >= 0 {
		r.p.CreatedAt = cur[at].p.CreatedAt
	}
	rec, err := encodeRule(&r.p)
	if err != nil {
		return errorf(ErrInvalidArgument, "rule %q: %v", p.Name, err)
	}
	var bt batchBuf
	bt.Set(keyS(kRule, s.id, fold(p.Name)), rec)
	if err := b.commit(ctx, &bt.Batch); err != nil {
		return err
	}
	rules := append([]*rule(nil), cur...)
	if at >= 0 {
		rules[at] = r
	} else {
		rules = append(rules, r)
		sortRules(rules)
	}
	s.mu.Lock()
	s.rules = rules
	s.mu.Unlock()
	return nil
}

func sortRules(rs []*rule) {
	sort.Slice(rs, func(i, j int) bool { return fold(rs[i].p.Name) < fold(rs[j].p.Name) })
}

// RemoveRule removes a rule from a subscription.
func (b *Broker) RemoveRule(ctx context.Context, topic, sub, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	s, err := b.entityOf(kindSubscription, topic, sub)
	if err != nil {
		return err
	}
	s.mu.Lock()
	cur := s.rules // stable: rule changes hold entityMu
	s.mu.Unlock()
	i := ruleIndex(cur, name)
	if i < 0 {
		return errorf(ErrNotFound, "subscription %q has no rule %q", s.path(), name)
	}
	var bt batchBuf
	bt.Delete(keyS(kRule, s.id, fold(name)))
	if err := b.commit(ctx, &bt.Batch); err != nil {
		return err
	}
	s.mu.Lock()
	s.rules = slices.Delete(slices.Clone(cur), i, i+1)
	s.mu.Unlock()
	return nil
}

// ruleIndex returns the index of the rule named name (case-insensitively),
// or -1.
func ruleIndex(rules []*rule, name string) int {
	return slices.IndexFunc(rules, func(r *rule) bool { return fold(r.p.Name) == fold(name) })
}

// ListRules lists a subscription's rules in name order.
func (b *Broker) ListRules(ctx context.Context, topic, sub string, skip, top int) ([]RuleProperties, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := b.entityOf(kindSubscription, topic, sub)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	rules := s.rules
	s.mu.Unlock()
	var out []RuleProperties
	for _, r := range page(rules, skip, top) {
		out = append(out, r.p)
	}
	return out, nil
}

// PropRuleName is the application property Service Bus sets on the copy a
// rule with an action produces: the name of that rule.
const PropRuleName = "RuleName"

// matchRules evaluates a subscription's rules against m and returns the
// subscription's copies, as Service Bus makes them (topic-filters.md): the
// matching rules without an action together yield one copy, m itself; each
// matching rule with an action yields a copy of its own, changed by the
// action and carrying the rule's name in the RuleName property. No copy
// means no match. A filter or action error is returned instead.
func (s *entity) matchRules(m *Message) ([]*Message, error) {
	s.mu.Lock()
	rules := s.rules
	s.mu.Unlock()
	view := filterView{m}
	var plain bool
	var acted []*Message
	for _, r := range rules {
		ok, err := r.filter.Match(view)
		if err != nil {
			return nil, ruleError(r, err)
		}
		if !ok {
			continue
		}
		if r.action == nil {
			plain = true
			continue
		}
		c := m.clone()
		cv := filterView{c}
		if err := r.action.Apply(cv); err != nil {
			return nil, ruleError(r, err)
		}
		cv.SetUserProperty(PropRuleName, r.p.Name)
		acted = append(acted, c)
	}
	if plain {
		return append([]*Message{m}, acted...), nil
	}
	return acted, nil
}

func ruleError(r *rule, err error) error {
	var ee *filter.EvalError
	if errors.As(err, &ee) {
		return errorf(ErrInvalidArgument, "rule %q: %v", r.p.Name, ee)
	}
	return errorf(ErrInvalidArgument, "rule %q: %v", r.p.Name, err)
}
