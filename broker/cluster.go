package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/busbar-io/busbar/store"
)

// What a node of a cluster (package cluster) needs from its broker: every
// node knows every entity by name (management works anywhere), but only the
// entity's owner has it loaded. The others keep it dormant (Options.Dormant):
// its records unread, its data operations refused with ErrNotOwned. A queue
// or topic moves with its subscriptions, as one unit named by the top
// entity's id.

// Tops returns the ids of every queue and topic, ascending.
func (b *Broker) Tops() []uint64 {
	b.mu.RLock()
	ids := make([]uint64, 0, len(b.byName))
	for _, e := range b.byName {
		ids = append(ids, e.id)
	}
	b.mu.RUnlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// TopOf returns the id of the queue or topic that entity id is or belongs
// to (a subscription's topic).
func (b *Broker) TopOf(id uint64) (uint64, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.byID[id]
	if e == nil {
		return 0, false
	}
	if e.parent != nil {
		return e.parent.id, true
	}
	return e.id, true
}

// KeyClass says what a store key holds, for a cluster's fencing.
type KeyClass uint8

// Key classes.
const (
	// KeyOther is outside the broker's layout.
	KeyOther KeyClass = iota
	// KeyShared is namespace metadata any node may write: the entity id
	// counter, entity records and rules. Nodes re-read it on change
	// (Refresh).
	KeyShared
	// KeyEntityData belongs to one entity's data (messages, bodies,
	// sequence marks, duplicate ids, session states): only its owner
	// writes it.
	KeyEntityData
)

// ClassifyKey returns the class of a store key and, for an entity's key,
// the entity's id.
func ClassifyKey(k []byte) (KeyClass, uint64) {
	if len(k) == 0 {
		return KeyOther, 0
	}
	switch k[0] {
	case kNamespace:
		return KeyShared, 0
	case kEntity, kRule:
		if len(k) < 9 {
			return KeyOther, 0
		}
		return KeyShared, binary.BigEndian.Uint64(k[1:9])
	case kCounter, kMessage, kBody, kDedupe, kSession:
		if len(k) < 9 {
			return KeyOther, 0
		}
		return KeyEntityData, binary.BigEndian.Uint64(k[1:9])
	}
	return KeyOther, 0
}

// IsEntityRecord reports whether k is the record of an entity (its
// deletion takes the entity's data with it).
func IsEntityRecord(k []byte) bool { return len(k) == 9 && k[0] == kEntity }

// IDCounterKey is the key of the namespace's entity id counter, and
// EncodeCounter its value: a cluster compares-and-swaps it so that two
// nodes never give one id to two entities.
var IDCounterKey = []byte{kNamespace}

// EncodeCounter encodes an id counter value.
func EncodeCounter(v uint64) []byte { return encodeUint(v) }

// DecodeCounter decodes an id counter value.
func DecodeCounter(v []byte) (uint64, error) { return decodeUint(v) }

// SharedPrefixes are the key prefixes of shared metadata: a shared store
// announces changes under them to every node.
func SharedPrefixes() [][]byte { return [][]byte{{kNamespace}, {kEntity}, {kRule}} }

// Loaded reports whether the queue or topic top is loaded (not dormant).
func (b *Broker) Loaded(top uint64) bool {
	b.mu.RLock()
	e := b.byID[top]
	b.mu.RUnlock()
	return e != nil && !e.dormant.Load()
}

// Load rebuilds the queue or topic top, and its subscriptions, from the
// store and starts serving them: what a node does when it becomes their
// owner. It reads only their own key ranges. A missing or loaded entity is
// left as it is. Nothing writes to the entity while it loads: a scheduled
// activation or TTL expiry that comes due meanwhile waits for the load to
// end, because a store's Scan may see commits made while it runs (a message
// moved to a later key would be read twice).
func (b *Broker) Load(ctx context.Context, top uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	b.mu.RLock()
	e := b.byID[top]
	b.mu.RUnlock()
	if e == nil || !e.dormant.Load() {
		return nil
	}
	ents := []*entity{e}
	e.mu.Lock()
	for _, s := range e.subs {
		ents = append(ents, s)
	}
	e.mu.Unlock()
	now := b.now()
	for _, x := range ents {
		if err := b.loadEntity(ctx, x, now.UnixNano()); err != nil {
			b.unloadLocked(top, err)
			return fmt.Errorf("loading %q: %w", x.path(), err)
		}
	}
	var stale batchBuf
	for _, x := range ents {
		if x.q != nil {
			if c := x.counter(); c != nil {
				x.q.startCount(c.next)
			}
		}
		if x.dd != nil {
			sortDedupe(x.dd)
			for _, old := range x.dd.expire(now.UnixNano()-int64(x.props().DupWindow), 1<<30) {
				stale.Delete(keyS(kDedupe, x.id, old))
			}
		}
	}
	if stale.Len() > 0 {
		if err := b.commit(ctx, &stale.Batch); err != nil {
			b.unloadLocked(top, err)
			return err
		}
	}
	for _, x := range ents {
		x.touch(now)
		x.dormant.Store(false)
		b.armIdle(x)
		if x.q != nil {
			x.q.runHeld(b.now().UnixNano())
			x.q.redispatch()
		}
	}
	return nil
}

// Unload makes the queue or topic top, and its subscriptions, dormant:
// their in-memory state is dropped, their consumers and session waiters
// are closed with ErrNotOwned (clients retry, and reach the new owner),
// and their data operations are refused from now on. Operations decided
// before may still commit; a cluster's fencing decides whether they apply.
func (b *Broker) Unload(top uint64) {
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	b.unloadLocked(top, nil)
}

func (b *Broker) unloadLocked(top uint64, cause error) {
	b.mu.Lock()
	e := b.byID[top]
	if e == nil || e.parent != nil {
		b.mu.Unlock()
		return
	}
	fresh := b.materializeDormant(e, nil)
	var old, subs []*entity
	old = append(old, e)
	e.mu.Lock()
	for k, s := range e.subs {
		fs := b.materializeDormant(s, fresh)
		fresh.subs[k] = fs
		b.byID[s.id] = fs
		old = append(old, s)
		subs = append(subs, fs)
	}
	e.mu.Unlock()
	b.byName[fold(e.name)] = fresh
	b.byID[e.id] = fresh
	b.mu.Unlock()
	msg := "moved to another node of the cluster"
	if cause != nil {
		msg = "could not be loaded: " + cause.Error()
	}
	for i := len(old) - 1; i >= 0; i-- {
		x := old[i]
		b.wheel.remove(&x.idle)
		b.dropEntityWith(x, errorf(ErrNotOwned, "%q %s", x.path(), msg))
	}
	for _, x := range append([]*entity{fresh}, subs...) {
		b.armIdle(x)
	}
}

// materializeDormant returns a dormant copy of e's definition (its
// properties and, for a subscription, its rules) under parent.
func (b *Broker) materializeDormant(e *entity, parent *entity) *entity {
	e.mu.Lock()
	rec := &entityRecord{id: e.id, kind: e.kind, name: e.name, created: e.created, updated: e.updated, p: *e.props()}
	rules := e.rules
	e.mu.Unlock()
	if parent != nil {
		rec.parent = parent.id
	}
	x := b.materialize(rec, parent)
	x.dormant.Store(true)
	x.rules = rules
	x.accessed.Store(e.accessed.Load())
	return x
}

// Refresh re-reads shared metadata another node (or this one) changed:
// key is a key of class KeyShared. A new entity appears (dormant when
// Options.Dormant), a changed one takes its new properties, a deleted one
// disappears (its consumers are closed) and a subscription's rules are
// re-read if it is loaded.
func (b *Broker) Refresh(ctx context.Context, key []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	return b.refreshLocked(ctx, key)
}

// refreshLocked is Refresh; entityMu is held.
func (b *Broker) refreshLocked(ctx context.Context, key []byte) error {
	switch {
	case len(key) == 1 && key[0] == kNamespace:
		v, err := b.st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		n, err := decodeUint(v)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.nextID = max(b.nextID, n)
		b.mu.Unlock()
		return nil
	case IsEntityRecord(key):
		return b.refreshEntity(ctx, binary.BigEndian.Uint64(key[1:]))
	case len(key) >= 9 && key[0] == kRule:
		return b.refreshRules(ctx, binary.BigEndian.Uint64(key[1:9]))
	}
	return nil
}

func (b *Broker) refreshEntity(ctx context.Context, id uint64) error {
	v, err := b.st.Get(ctx, key1(kEntity, id))
	if errors.Is(err, store.ErrNotFound) {
		return b.applyEntity(ctx, id, nil)
	}
	if err != nil {
		return err
	}
	rec, err := decodeEntity(v)
	if err != nil {
		return fmt.Errorf("entity record %d: %w", id, err)
	}
	return b.applyEntity(ctx, id, rec)
}

// applyEntity brings entity id in memory to its stored record rec (nil:
// deleted); entityMu is held.
func (b *Broker) applyEntity(ctx context.Context, id uint64, rec *entityRecord) error {
	b.mu.RLock()
	e := b.byID[id]
	b.mu.RUnlock()
	if rec == nil {
		if e != nil {
			b.forget(e)
		}
		return nil
	}
	if e != nil {
		p := rec.p
		e.mu.Lock()
		e.updated = rec.updated
		e.mu.Unlock()
		e.p.Store(&p)
		b.armIdle(e)
		if e.q != nil && !e.dormant.Load() {
			e.q.redispatch()
		}
		return nil
	}
	var parent *entity
	if rec.kind == kindSubscription {
		b.mu.RLock()
		parent = b.byID[rec.parent]
		b.mu.RUnlock()
		if parent == nil {
			return nil // the topic went first
		}
	}
	x := b.materialize(rec, parent)
	x.touch(b.now())
	if parent != nil {
		// A new subscription's records are its rules alone.
		if err := b.refreshRulesOf(ctx, x); err != nil {
			return err
		}
	}
	b.mu.Lock()
	if rec.kind == kindSubscription {
		parent.mu.Lock()
		parent.subs[fold(rec.name)] = x
		parent.mu.Unlock()
	} else {
		b.byName[fold(rec.name)] = x
	}
	b.byID[id] = x
	b.nextID = max(b.nextID, id+1)
	b.mu.Unlock()
	b.armIdle(x)
	return nil
}

// forget removes a deleted entity from memory.
func (b *Broker) forget(e *entity) {
	b.mu.Lock()
	var subs []*entity
	if e.parent != nil {
		e.parent.mu.Lock()
		if e.parent.subs[fold(e.name)] == e {
			delete(e.parent.subs, fold(e.name))
		}
		e.parent.mu.Unlock()
	} else {
		if b.byName[fold(e.name)] == e {
			delete(b.byName, fold(e.name))
		}
		e.mu.Lock()
		for _, s := range e.subs {
			subs = append(subs, s)
			delete(b.byID, s.id)
		}
		e.mu.Unlock()
	}
	delete(b.byID, e.id)
	b.mu.Unlock()
	for _, s := range subs {
		b.dropEntity(s)
	}
	b.dropEntity(e)
}

func (b *Broker) refreshRules(ctx context.Context, id uint64) error {
	b.mu.RLock()
	s := b.byID[id]
	b.mu.RUnlock()
	if s == nil || s.kind != kindSubscription {
		return nil
	}
	return b.refreshRulesOf(ctx, s)
}

// refreshRulesOf re-reads a subscription's rules. It reads them all before
// it replaces the list, under s.mu: ListRules and an Unload's dormant copy
// read the list meanwhile, and a read that fails part way must leave the
// rules as they were (AddRule would take a missing one for a new name).
func (b *Broker) refreshRulesOf(ctx context.Context, s *entity) error {
	var rules []*rule
	start, end := prefixRange(kRule, s.id)
	if err := b.st.Scan(ctx, start, end, func(k, v []byte) error {
		r, err := b.loadRule(s, k, v)
		if err != nil {
			return err
		}
		rules = append(rules, r)
		return nil
	}); err != nil {
		return err
	}
	s.setRules(rules)
	return nil
}

// setRules replaces the subscription's rules with rules, sorted.
func (s *entity) setRules(rules []*rule) {
	sortRules(rules)
	s.mu.Lock()
	s.rules = rules
	s.mu.Unlock()
}

// Resync re-reads all shared metadata from the store: the entity id
// counter, every entity record (a new entity appears, a changed one takes
// its properties, a deleted one disappears) and every subscription's
// rules. A cluster node calls it when its notifications of other nodes'
// changes may have missed some (store.Store.Watch's nil key), or when a
// Refresh failed.
func (b *Broker) Resync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.entityMu.Lock()
	defer b.entityMu.Unlock()
	if err := b.refreshLocked(ctx, IDCounterKey); err != nil {
		return err
	}
	var tops, subs []*entityRecord
	err := b.st.Scan(ctx, []byte{kEntity}, []byte{kEntity + 1}, func(k, v []byte) error {
		if !IsEntityRecord(k) {
			return nil
		}
		r, err := decodeEntity(v)
		if err != nil {
			return fmt.Errorf("entity record %x: %w", k, err)
		}
		if r.kind == kindSubscription {
			subs = append(subs, r)
		} else {
			tops = append(tops, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	stored := make(map[uint64]bool, len(tops)+len(subs))
	// Queues and topics first: a new subscription is added to its topic.
	for _, r := range append(tops, subs...) {
		stored[r.id] = true
		if err := b.applyEntity(ctx, r.id, r); err != nil {
			return err
		}
	}
	var gone []uint64
	b.mu.RLock()
	for id := range b.byID {
		if !stored[id] {
			gone = append(gone, id)
		}
	}
	b.mu.RUnlock()
	for _, id := range gone {
		// (A subscription may have gone with its topic already.)
		if err := b.applyEntity(ctx, id, nil); err != nil {
			return err
		}
	}
	for _, r := range subs {
		if err := b.refreshRules(ctx, r.id); err != nil {
			return err
		}
	}
	return nil
}

// ReadTops returns the id of every queue and topic recorded in st, by
// folded name, reading only the entity records: for tools that locate an
// entity's owner without running a broker.
func ReadTops(ctx context.Context, st store.Store) (map[string]uint64, error) {
	m := map[string]uint64{}
	err := st.Scan(ctx, []byte{kEntity}, []byte{kEntity + 1}, func(k, v []byte) error {
		r, err := decodeEntity(v)
		if err != nil {
			return fmt.Errorf("entity record %x: %w", k, err)
		}
		if r.kind != kindSubscription {
			m[fold(r.name)] = r.id
		}
		return nil
	})
	return m, err
}

// FoldName is how entity names compare (case-insensitively).
func FoldName(name string) string { return fold(name) }

// Dormant reports whether the queue or topic named name is known but
// served by another node of the cluster (not loaded here), and its id.
func (b *Broker) Dormant(name string) (id uint64, dormant bool) {
	e, err := b.lookupEntity(name)
	if err != nil {
		return 0, false
	}
	return e.id, e.dormant.Load()
}
