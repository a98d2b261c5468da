package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// recover rebuilds the namespace from the store.
func (b *Broker) recover(ctx context.Context) error {
	now := b.now()
	if v, err := b.st.Get(ctx, []byte{kNamespace}); err == nil {
		n, err := decodeUint(v)
		if err != nil {
			return fmt.Errorf("namespace record: %w", err)
		}
		b.nextID = n
	}
	var recs []*entityRecord
	err := b.st.Scan(ctx, []byte{kEntity}, []byte{kEntity + 1}, func(k, v []byte) error {
		r, err := decodeEntity(v)
		if err != nil {
			return fmt.Errorf("entity record %x: %w", k, err)
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return err
	}
	for pass := 0; pass < 2; pass++ {
		for _, r := range recs {
			if (r.kind == kindSubscription) != (pass == 1) {
				continue
			}
			var parent *entity
			if r.kind == kindSubscription {
				parent = b.byID[r.parent]
				if parent == nil || parent.kind != kindTopic {
					b.log.Warn("skipping subscription of a missing topic", "subscription", r.name, "topic", r.parent)
					continue
				}
			}
			e := b.materialize(r, parent)
			e.touch(now)
			b.byID[e.id] = e
			if parent != nil {
				parent.subs[fold(e.name)] = e
			} else {
				b.byName[fold(e.name)] = e
			}
			if e.id >= b.nextID {
				b.nextID = e.id + 1
			}
		}
	}
	if b.opts.Dormant {
		// Rules are shared metadata, listed and changed on any node: a
		// dormant subscription knows its own, or AddRule would take a
		// stored rule's name for a new one.
		if err := b.readAllRules(ctx); err != nil {
			return err
		}
		for _, e := range b.byID {
			b.armIdle(e)
		}
		return nil // entities are loaded one by one (Load)
	}
	// As Load does, hold the deadlines that come due while the entities
	// are read until every one is (the wheel already runs).
	for _, e := range b.byID {
		e.dormant.Store(true)
	}
	for _, e := range b.byID {
		if err := b.loadEntity(ctx, e, now.UnixNano()); err != nil {
			return err
		}
	}
	for _, e := range b.byID {
		if e.q != nil {
			if c := e.counter(); c != nil {
				e.q.startCount(c.next)
			}
		}
	}
	var stale batchBuf
	for _, e := range b.byID {
		if e.dd != nil {
			sortDedupe(e.dd)
			for _, old := range e.dd.expire(now.UnixNano()-int64(e.props().DupWindow), 1<<30) {
				stale.Delete(keyS(kDedupe, e.id, old))
			}
		}
		b.armIdle(e)
	}
	if stale.Len() > 0 {
		if err := b.commit(ctx, &stale.Batch); err != nil {
			return err
		}
	}
	for _, e := range b.byID {
		e.dormant.Store(false)
	}
	for _, e := range b.byID {
		if e.q != nil {
			e.q.runHeld(b.now().UnixNano())
		}
	}
	return nil
}

// loadEntity rebuilds one entity's in-memory state from its own key ranges
// — its rules, sequence marks, messages, duplicate-detection ids and
// session states — without reading any other entity's records: what a
// node taking over one entity of a shared store needs. Duplicate ids past
// the window are dropped by the caller.
func (b *Broker) loadEntity(ctx context.Context, e *entity, now int64) error {
	scan := func(kind byte, fn func(k, v []byte) error) error {
		start, end := prefixRange(kind, e.id)
		return b.st.Scan(ctx, start, end, fn)
	}
	if e.kind == kindSubscription {
		if err := b.refreshRulesOf(ctx, e); err != nil {
			return err
		}
	}
	if e.seq != nil {
		if err := scan(kCounter, func(k, v []byte) error { return loadMark(e, k, v) }); err != nil {
			return err
		}
	}
	if e.q == nil {
		return nil
	}
	n, active := 0, 0
	load := func(k, v []byte) error {
		if n++; n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if e.q.paged(SubqueueMain) && len(k) == 18 && Subqueue(k[9]) == SubqueueMain {
			// The window is full: the rest of the main subqueue stays
			// on disk, counted in the background (pager.go).
			if active == e.q.pg.window {
				e.q.pg.from = binary.BigEndian.Uint64(k[10:])
				return errStopScan
			}
			if mm, err := decodeMeta(v); err == nil && mm.state == StateActive {
				active++
			}
		}
		return b.loadMessage(e, k, v)
	}
	start, end := prefixRange(kMessage, e.id)
	if err := b.st.Scan(ctx, start, end, load); errors.Is(err, errStopScan) {
		err = b.st.Scan(ctx, msgKey(e.id, SubqueueMain+1, 0), end, load)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if e.dd != nil {
		if err := scan(kDedupe, func(k, v []byte) error {
			at, err := decodeUint(v)
			if err != nil {
				return fmt.Errorf("duplicate-detection record of %q: %w", e.path(), err)
			}
			e.dd.add(string(k[9:]), int64(at))
			return nil
		}); err != nil {
			return err
		}
	}
	return scan(kSession, func(k, v []byte) error {
		if len(v) < 8 {
			return fmt.Errorf("%w: session state record of %q of %d bytes", errCorrupt, e.path(), len(v))
		}
		s := e.q.session(string(k[9:]), true)
		s.hasState = true
		s.stateUpdated = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}

// readAllRules reads the rules of every subscription, with one scan.
func (b *Broker) readAllRules(ctx context.Context) error {
	rules := map[*entity][]*rule{}
	err := b.st.Scan(ctx, []byte{kRule}, []byte{kRule + 1}, func(k, v []byte) error {
		if len(k) < 9 {
			return fmt.Errorf("%w: rule key %x", errCorrupt, k)
		}
		s := b.byID[binary.BigEndian.Uint64(k[1:9])]
		if s == nil || s.kind != kindSubscription {
			return nil // a subscription of a missing topic, skipped above
		}
		r, err := b.loadRule(s, k, v)
		if err != nil {
			return err
		}
		rules[s] = append(rules[s], r)
		return nil
	})
	if err != nil {
		return err
	}
	for s, rs := range rules {
		s.setRules(rs)
	}
	return nil
}

// loadRule decodes and compiles a stored rule of subscription s.
func (b *Broker) loadRule(s *entity, k, v []byte) (*rule, error) {
	rp, err := decodeRule(v)
	if err != nil {
		return nil, fmt.Errorf("rule record %x: %w", k, err)
	}
	r, err := compileRule(*rp, b.newID)
	if err != nil {
		return nil, fmt.Errorf("stored rule %q of %q: %w", rp.Name, s.path(), err)
	}
	return r, nil
}

// loadMark raises e's sequence floor to a stored mark (index.go) or, in
// data written before marks, to the stored counter value.
func loadMark(e *entity, k, v []byte) error {
	var n uint64
	switch len(k) {
	case 17:
		n = binary.BigEndian.Uint64(k[9:])
	case 9:
		var err error
		if n, err = decodeUint(v); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: counter key %x", errCorrupt, k)
	}
	if n > e.seq.reserved {
		e.seq.reserved, e.seq.next = n, n+1
	}
	return nil
}

func (b *Broker) loadMessage(e *entity, k, v []byte) error {
	if len(k) != 18 {
		return fmt.Errorf("%w: message key %x", errCorrupt, k)
	}
	seq := binary.BigEndian.Uint64(k[10:])
	mm, err := decodeMeta(v)
	if err == nil && byte(mm.sub) != k[9] {
		err = fmt.Errorf("%w: subqueue %d in a key of subqueue %d", errCorrupt, mm.sub, k[9])
	}
	if err != nil {
		return fmt.Errorf("message %d of %q: %w", seq, e.path(), err)
	}
	q := e.q
	m := indexOf(seq, &mm)
	// A topic's scheduled messages are numbered by the topic's counter; a
	// subscription's by its topic's, which the topic's marks cover.
	if c := e.seq; c != nil && seq >= c.next {
		c.next = seq + 1
		c.reserved = max(c.reserved, seq)
	}
	q.mu.Lock()
	if m.sub == SubqueueMain && e.props().RequiresSession {
		m.sess = q.session(mm.sessionID, true)
	}
	q.insert(m)
	q.mu.Unlock()
	return nil
}

func sortDedupe(d *dedupeWindow) {
	f := d.fifo[d.head:]
	sort.Slice(f, func(i, j int) bool { return f[i].at < f[j].at })
}
