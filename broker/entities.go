package broker

import (
	"context"
	"errors"
	"sort"
	"time"
)

// QueueInfo describes a queue.
type QueueInfo struct {
	Name       string
	Properties QueueProperties
	Runtime    RuntimeInfo
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name       string
	Properties TopicProperties
	Runtime    RuntimeInfo
}

// SubscriptionInfo describes a subscription.
type SubscriptionInfo struct {
	Topic      string
	Name       string
	Properties SubscriptionProperties
	Runtime    RuntimeInfo
}

// CreateQueue creates a queue. Names are case-insensitive and share one
// space with topics.
func (b *Broker) CreateQueue(ctx context.Context, name string, p QueueProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateEntityName("queue", name); err != nil {
		return err
	}
	pp := fromQueue(p)
	return b.created(ctx, b.createTop(ctx, kindQueue, name, pp))
}

// CreateTopic creates a topic.
func (b *Broker) CreateTopic(ctx context.Context, name string, p TopicProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validateEntityName("topic", name); err != nil {
		return err
	}
	return b.created(ctx, b.createTop(ctx, kindTopic, name, fromTopic(p)))
}

// created calls Options.Created after a successful creation.
func (b *Broker) created(ctx context.Context, err error) error {
	if err == nil && b.opts.Created != nil {
		b.opts.Created(ctx)
	}
	return err
}

func (b *Broker) createTop(ctx context.Context, k entityKind, name string, pp props) error {
	if err := pp.normalize(k, b.opts.MaxMessageSizeInKilobytes); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	if err := b.checkForward(&pp, name); err != nil {
		return err
	}
	b.mu.RLock()
	exists, count, closed := b.byName[fold(name)] != nil, len(b.byName), b.closed
	b.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if exists {
		return errorf(ErrAlreadyExists, "a queue or topic named %q exists", name)
	}
	if count >= b.opts.MaxEntities {
		return errorf(ErrQuotaExceeded, "the namespace holds %d queues and topics, the limit", count)
	}
	now := b.now()
	rec := &entityRecord{id: b.nextID, kind: k, name: name, created: now, updated: now, p: pp}
	var bt batchBuf
	bt.Set(key1(kEntity, rec.id), encodeEntity(rec))
	bt.Set([]byte{kNamespace}, encodeUint(rec.id+1))
	if err := b.commit(ctx, &bt.Batch); err != nil {
		return err
	}
	b.nextID++
	e := b.materialize(rec, nil)
	e.touch(now)
	b.mu.Lock()
	b.byName[fold(name)] = e
	b.byID[e.id] = e
	b.mu.Unlock()
	b.armIdle(e)
	return nil
}

// checkForward verifies forwarding destinations exist (Service Bus requires
// it) and are not the entity itself. entityMu is held.
func (b *Broker) checkForward(pp *props, self string) error {
	for _, f := range []string{pp.ForwardTo, pp.ForwardDLTo} {
		if f == "" {
			continue
		}
		if fold(f) == fold(self) {
			return errorf(ErrInvalidArgument, "an entity cannot forward to itself (%q)", f)
		}
		b.mu.RLock()
		ok := b.byName[fold(f)] != nil
		b.mu.RUnlock()
		if !ok {
			return errorf(ErrNotFound, "forwarding destination %q does not exist", f)
		}
	}
	return nil
}

// materialize builds the in-memory entity for a record.
func (b *Broker) materialize(rec *entityRecord, parent *entity) *entity {
	e := &entity{b: b, id: rec.id, kind: rec.kind, name: rec.name, parent: parent, created: rec.created, updated: rec.updated}
	e.dormant.Store(b.opts.Dormant)
	if parent != nil {
		e.dormant.Store(parent.dormant.Load()) // a subscription moves with its topic
	}
	e.idle = deadline{index: -1, kind: dlIdle, ent: e}
	p := rec.p
	e.p.Store(&p)
	switch rec.kind {
	case kindQueue:
		e.q = newQState(b, e)
		e.q.initPager(b.opts.PageWindow)
		e.seq = &seqCounter{eid: e.id, next: 1}
		e.dd = &dedupeWindow{seen: map[string]int64{}}
	case kindTopic:
		// A topic's own qstate holds only its scheduled messages, which
		// fan out to the subscriptions when they become active.
		e.q = newQState(b, e)
		e.subs = map[string]*entity{}
		e.seq = &seqCounter{eid: e.id, next: 1}
		e.dd = &dedupeWindow{seen: map[string]int64{}}
	case kindSubscription:
		e.q = newQState(b, e)
		e.q.initPager(b.opts.PageWindow)
		e.seq = parent.seq
	}
	return e
}

// armIdle arms the auto-delete-on-idle deadline of e.
func (b *Broker) armIdle(e *entity) {
	p := e.props()
	if p.AutoDeleteOnIdle >= InfiniteTTL {
		b.wheel.remove(&e.idle)
		return
	}
	b.wheel.set(&e.idle, e.accessed.Load()+int64(p.AutoDeleteOnIdle))
}

func (b *Broker) onIdleDeadline(e *entity, now int64) {
	p := e.props()
	if p.AutoDeleteOnIdle >= InfiniteTTL {
		return
	}
	if e.dormant.Load() {
		// A dormant entity's owner, not this node, sees its use.
		b.wheel.set(&e.idle, now+int64(p.AutoDeleteOnIdle))
		return
	}
	if due := e.accessed.Load() + int64(p.AutoDeleteOnIdle); due > now {
		b.wheel.set(&e.idle, due)
		return
	}
	// The deletion runs on a goroutine of its own: it waits for entityMu,
	// which management calls hold across their commits, and the wheel's
	// one goroutine must not wait behind them while lock expiries,
	// activations and TTLs of every queue come due.
	b.spawn(func() { b.deleteIdle(e, p.AutoDeleteOnIdle) })
}

// idleRetry is how long a failed auto-delete-on-idle waits to try again.
const idleRetry = time.Minute

// deleteIdle deletes e, idle for idle, unless it was used, deleted or
// replaced by an entity of its name meanwhile.
func (b *Broker) deleteIdle(e *entity, idle time.Duration) {
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	topic, name := e.name, ""
	if e.kind == kindSubscription {
		topic, name = e.parent.name, e.name
	}
	if cur, err := b.entityOf(e.kind, topic, name); err != nil || cur != e {
		return
	}
	if e.accessed.Load()+int64(idle) > b.now().UnixNano() {
		b.armIdle(e)
		return
	}
	var err error
	if e.kind == kindSubscription {
		err = b.deleteSubLocked(context.Background(), e)
	} else {
		err = b.deleteTopEntityLocked(context.Background(), e)
	}
	switch {
	case errors.Is(err, ErrClosed):
	case err != nil:
		b.log.Warn("auto-delete-on-idle failed; trying again", "entity", e.path(), "in", idleRetry, "err", err)
		b.wheel.set(&e.idle, b.now().Add(idleRetry).UnixNano())
	default:
		b.log.Info("deleted idle entity", "entity", e.path(), "autoDeleteOnIdle", idle)
	}
}

// UpdateQueue replaces a queue's properties. RequiresSession and
// RequiresDuplicateDetection cannot change, as in Service Bus.
func (b *Broker) UpdateQueue(ctx context.Context, name string, p QueueProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.update(ctx, kindQueue, name, "", fromQueue(p))
}

// UpdateTopic replaces a topic's properties (RequiresDuplicateDetection is fixed).
func (b *Broker) UpdateTopic(ctx context.Context, name string, p TopicProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.update(ctx, kindTopic, name, "", fromTopic(p))
}

// UpdateSubscription replaces a subscription's properties (RequiresSession
// is fixed; DefaultRule is ignored).
func (b *Broker) UpdateSubscription(ctx context.Context, topic, name string, p SubscriptionProperties) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.update(ctx, kindSubscription, topic, name, fromSubscription(p))
}

func (b *Broker) update(ctx context.Context, k entityKind, name, sub string, pp props) error {
	if err := pp.normalize(k, b.opts.MaxMessageSizeInKilobytes); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	e, err := b.entityOf(k, name, sub)
	if err != nil {
		return err
	}
	old := e.props()
	if old.RequiresSession != pp.RequiresSession {
		return errorf(ErrInvalidArgument, "The value for the RequiresSession property of an existing %s cannot be changed (%q)", titleKind(e.kind), e.path())
	}
	if old.EnablePartitioning != pp.EnablePartitioning {
		return errorf(ErrInvalidArgument, "Partitioning cannot be changed for %s. (%q)", titleKind(e.kind), e.path())
	}
	if old.DupDetection != pp.DupDetection {
		return errorf(ErrInvalidArgument, "The value for the RequiresDuplicateDetection property of an existing %s cannot be changed (%q)", titleKind(e.kind), e.path())
	}
	self := e.name
	if e.kind == kindSubscription {
		self = "" // never a forwarding target, as CreateSubscription has it
	}
	if err := b.checkForward(&pp, self); err != nil {
		return err
	}
	now := b.now()
	e.mu.Lock()
	rec := &entityRecord{id: e.id, kind: e.kind, name: e.name, created: e.created, updated: now, p: pp}
	if e.parent != nil {
		rec.parent = e.parent.id
	}
	e.mu.Unlock()
	var bt batchBuf
	bt.Set(key1(kEntity, e.id), encodeEntity(rec))
	if err := b.commit(ctx, &bt.Batch); err != nil {
		return err
	}
	e.mu.Lock()
	e.updated = now
	e.mu.Unlock()
	e.p.Store(&pp)
	e.touch(now)
	b.armIdle(e)
	if e.q != nil {
		e.q.redispatch()
	}
	return nil
}

// entityOf finds a queue, topic or subscription of the given kind.
func (b *Broker) entityOf(k entityKind, name, sub string) (*entity, error) {
	e, err := b.lookupEntity(name)
	if err != nil {
		return nil, err
	}
	want := k
	if k == kindSubscription {
		want = kindTopic
	}
	if e.kind != want {
		return nil, errorf(ErrNotFound, "%q is a %s, not a %s", name, e.kind, want)
	}
	if k != kindSubscription {
		return e, nil
	}
	e.mu.Lock()
	s := e.subs[fold(sub)]
	e.mu.Unlock()
	if s == nil {
		return nil, errorf(ErrNotFound, "topic %q has no subscription %q", name, sub)
	}
	return s, nil
}

// DeleteQueue deletes a queue and every message in it.
func (b *Broker) DeleteQueue(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	return b.deleteTopLocked(ctx, kindQueue, name)
}

// DeleteTopic deletes a topic, its subscriptions and their messages.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	return b.deleteTopLocked(ctx, kindTopic, name)
}

func (b *Broker) deleteTopLocked(ctx context.Context, k entityKind, name string) error {
	e, err := b.entityOf(k, name, "")
	if err != nil {
		return err
	}
	return b.deleteTopEntityLocked(ctx, e)
}

// deleteTopEntityLocked deletes queue or topic e and its subscriptions;
// entityMu is held.
func (b *Broker) deleteTopEntityLocked(ctx context.Context, e *entity) error {
	var bt batchBuf
	deleteEntityKeys(&bt, e.id)
	e.mu.Lock()
	subs := make([]*entity, 0, len(e.subs))
	for _, s := range e.subs {
		subs = append(subs, s)
		deleteEntityKeys(&bt, s.id)
	}
	e.mu.Unlock()
	all := append([]*entity{e}, subs...)
	for _, x := range all {
		x.q.stopWrites()
	}
	for _, x := range all {
		x.q.waitWrites()
	}
	if err := b.commit(ctx, &bt.Batch); err != nil {
		for _, x := range all {
			x.q.resumeWrites()
		}
		return err
	}
	b.mu.Lock()
	delete(b.byName, fold(e.name))
	delete(b.byID, e.id)
	for _, s := range subs {
		delete(b.byID, s.id)
	}
	b.mu.Unlock()
	for _, s := range subs {
		b.dropEntity(s)
	}
	b.dropEntity(e)
	return nil
}

func deleteEntityKeys(bt *batchBuf, id uint64) {
	bt.Delete(key1(kEntity, id))
	for _, k := range []byte{kCounter, kRule, kMessage, kBody, kDedupe, kSession} {
		s, e := prefixRange(k, id)
		bt.DeleteRange(s, e)
	}
}

// dropEntity releases the memory and deadlines of a deleted entity and
// closes its consumers.
func (b *Broker) dropEntity(e *entity) {
	b.dropEntityWith(e, errorf(ErrNotFound, "%s %q was deleted", e.kind, e.path()))
}

// dropEntityWith is dropEntity telling consumers and waiters gone.
func (b *Broker) dropEntityWith(e *entity, gone error) {
	e.deleted.Store(true)
	b.wheel.remove(&e.idle)
	q := e.q
	if q == nil {
		return
	}
	q.mu.Lock()
	for _, m := range q.msgs {
		q.clearDeadline(m)
		b.cache.drop(m)
	}
	b.wheel.remove(&q.lockDL)
	b.wheel.remove(&q.sessDL)
	var lost []*Consumer
	for _, cs := range q.consumers {
		lost = append(lost, cs...)
	}
	for _, s := range q.sessions {
		if s.owner != nil {
			lost = append(lost, s.owner)
		}
	}
	waiters := q.waiters
	q.waiters = nil
	q.msgs = map[uint64]*msgIdx{}
	q.sessions = map[string]*session{}
	q.locks = map[LockToken]*msgIdx{}
	q.avail = [3]seqHeap{}
	q.ready = nil
	q.consumers = [3][]*Consumer{}
	q.lockHead, q.lockTail, q.sessHead, q.sessTail = nil, nil, nil, nil
	for _, c := range lost {
		c.closed = true
	}
	q.mu.Unlock()
	for _, w := range waiters {
		b.wheel.remove(&w.dl)
		w.done(nil, gone)
	}
	for _, c := range lost {
		c.notifyLost(gone)
	}
}

// GetQueue returns a queue's properties and runtime information.
func (b *Broker) GetQueue(ctx context.Context, name string) (*QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := b.entityOf(kindQueue, name, "")
	if err != nil {
		return nil, err
	}
	return &QueueInfo{Name: e.name, Properties: e.props().queue(), Runtime: e.runtime()}, nil
}

// GetTopic returns a topic's properties and runtime information.
func (b *Broker) GetTopic(ctx context.Context, name string) (*TopicInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := b.entityOf(kindTopic, name, "")
	if err != nil {
		return nil, err
	}
	return &TopicInfo{Name: e.name, Properties: e.props().topic(), Runtime: e.runtime()}, nil
}

// GetSubscription returns a subscription's properties and runtime information.
func (b *Broker) GetSubscription(ctx context.Context, topic, name string) (*SubscriptionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, err := b.entityOf(kindSubscription, topic, name)
	if err != nil {
		return nil, err
	}
	return &SubscriptionInfo{Topic: e.parent.name, Name: e.name, Properties: e.props().subscription(), Runtime: e.runtime()}, nil
}

func (e *entity) runtime() RuntimeInfo {
	e.mu.Lock()
	ri := RuntimeInfo{Name: e.name, CreatedAt: e.created, UpdatedAt: e.updated}
	subs := make([]*entity, 0, len(e.subs))
	for _, s := range e.subs {
		subs = append(subs, s)
	}
	e.mu.Unlock()
	ri.AccessedAt = accessedAt(e.kind, e.accessed.Load(), ri.CreatedAt, ri.UpdatedAt)
	if e.q != nil {
		e.q.counts(&ri)
	}
	for _, s := range subs {
		s.q.counts(&ri)
	}
	ri.SubscriptionCount = int64(len(subs))
	return ri
}

// ListQueues lists queues in name order; skip and top page (top ≤ 0: all).
func (b *Broker) ListQueues(ctx context.Context, skip, top int) ([]*QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*QueueInfo
	for _, e := range b.listTop(kindQueue, skip, top) {
		out = append(out, &QueueInfo{Name: e.name, Properties: e.props().queue(), Runtime: e.runtime()})
	}
	return out, nil
}

// ListTopics lists topics in name order; skip and top page (top ≤ 0: all).
func (b *Broker) ListTopics(ctx context.Context, skip, top int) ([]*TopicInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*TopicInfo
	for _, e := range b.listTop(kindTopic, skip, top) {
		out = append(out, &TopicInfo{Name: e.name, Properties: e.props().topic(), Runtime: e.runtime()})
	}
	return out, nil
}

func (b *Broker) listTop(k entityKind, skip, top int) []*entity {
	b.mu.RLock()
	var es []*entity
	for _, e := range b.byName {
		if e.kind == k {
			es = append(es, e)
		}
	}
	b.mu.RUnlock()
	sort.Slice(es, func(i, j int) bool { return fold(es[i].name) < fold(es[j].name) })
	return page(es, skip, top)
}

func page[T any](s []T, skip, top int) []T {
	if skip < 0 {
		skip = 0
	}
	if skip >= len(s) {
		return nil
	}
	s = s[skip:]
	if top > 0 && top < len(s) {
		s = s[:top]
	}
	return s
}

// ListSubscriptions lists a topic's subscriptions in name order.
func (b *Broker) ListSubscriptions(ctx context.Context, topic string, skip, top int) ([]*SubscriptionInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, err := b.entityOf(kindTopic, topic, "")
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	subs := make([]*entity, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return fold(subs[i].name) < fold(subs[j].name) })
	var out []*SubscriptionInfo
	for _, s := range page(subs, skip, top) {
		out = append(out, &SubscriptionInfo{Topic: t.name, Name: s.name, Properties: s.props().subscription(), Runtime: s.runtime()})
	}
	return out, nil
}
