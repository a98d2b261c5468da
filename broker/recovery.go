package broker

import (
	"context"
	"encoding/binary"
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
	if err := b.recoverRules(ctx); err != nil {
		return err
	}
	if err := b.st.Scan(ctx, []byte{kCounter}, []byte{kCounter + 1}, func(k, v []byte) error {
		if len(k) != 9 && len(k) != 17 {
			return fmt.Errorf("%w: counter key %x", errCorrupt, k)
		}
		e := b.byID[binary.BigEndian.Uint64(k[1:9])]
		if e == nil || e.seq == nil {
			return nil
		}
		var n uint64
		if len(k) == 17 { // a mark (index.go)
			n = binary.BigEndian.Uint64(k[9:])
		} else { // a counter value, as written before marks
			var err error
			if n, err = decodeUint(v); err != nil {
				return err
			}
		}
		if n > e.seq.reserved {
			e.seq.reserved, e.seq.next = n, n+1
		}
		return nil
	}); err != nil {
		return err
	}
	if err := b.recoverMessages(ctx); err != nil {
		return err
	}
	if err := b.recoverDedupe(ctx, now.UnixNano()); err != nil {
		return err
	}
	if err := b.recoverSessions(ctx); err != nil {
		return err
	}
	for _, e := range b.byID {
		b.armIdle(e)
	}
	return nil
}

func (b *Broker) recoverRules(ctx context.Context) error {
	return b.st.Scan(ctx, []byte{kRule}, []byte{kRule + 1}, func(k, v []byte) error {
		if len(k) < 9 {
			return nil
		}
		s := b.byID[binary.BigEndian.Uint64(k[1:9])]
		if s == nil || s.kind != kindSubscription {
			return nil
		}
		rp, err := decodeRule(v)
		if err != nil {
			return fmt.Errorf("rule record %x: %w", k, err)
		}
		r, err := compileRule(*rp, b.newID)
		if err != nil {
			return fmt.Errorf("stored rule %q of %q: %w", rp.Name, s.path(), err)
		}
		s.rules = append(s.rules, r)
		sortRules(s.rules)
		return nil
	})
}

func (b *Broker) recoverMessages(ctx context.Context) error {
	var cur *entity
	n := 0
	return b.st.Scan(ctx, []byte{kMessage}, []byte{kMessage + 1}, func(k, v []byte) error {
		if len(k) != 18 {
			return fmt.Errorf("%w: message key %x", errCorrupt, k)
		}
		if n++; n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		eid, seq := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[10:])
		if cur == nil || cur.id != eid {
			cur = b.byID[eid]
		}
		if cur == nil || cur.q == nil {
			return nil
		}
		mm, err := decodeMeta(v)
		if err == nil && byte(mm.sub) != k[9] {
			err = fmt.Errorf("%w: subqueue %d in a key of subqueue %d", errCorrupt, mm.sub, k[9])
		}
		if err != nil {
			return fmt.Errorf("message %d of %q: %w", seq, cur.path(), err)
		}
		q := cur.q
		m := &msgIdx{seq: seq, bodyRef: mm.bodyRef, enqueued: mm.enqueued, expires: mm.expires, scheduled: mm.scheduled,
			size: mm.size, deliveries: mm.deliveries, sub: mm.sub, state: mm.state, hidx: -1}
		if seq >= cur.seq.next {
			cur.seq.next = seq + 1
			if cur.seq.reserved < seq {
				cur.seq.reserved = seq
			}
		}
		q.mu.Lock()
		if m.sub == SubqueueMain && cur.props().RequiresSession {
			m.sess = q.session(mm.sessionID, true)
		}
		q.insert(m)
		q.mu.Unlock()
		return nil
	})
}

func (b *Broker) recoverDedupe(ctx context.Context, now int64) error {
	var stale batchBuf
	err := b.st.Scan(ctx, []byte{kDedupe}, []byte{kDedupe + 1}, func(k, v []byte) error {
		if len(k) < 9 {
			return nil
		}
		e := b.byID[binary.BigEndian.Uint64(k[1:9])]
		at, err := decodeUint(v)
		if err != nil {
			return err
		}
		if e == nil || e.dd == nil || now-int64(at) >= int64(e.props().DupWindow) {
			stale.Delete(append([]byte(nil), k...))
			return nil
		}
		e.dd.add(string(k[9:]), int64(at))
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range b.byID {
		if e.dd != nil {
			sortDedupe(e.dd)
		}
	}
	if stale.Len() > 0 {
		return b.commit(ctx, &stale.Batch)
	}
	return nil
}

func sortDedupe(d *dedupeWindow) {
	f := d.fifo[d.head:]
	sort.Slice(f, func(i, j int) bool { return f[i].at < f[j].at })
}

func (b *Broker) recoverSessions(ctx context.Context) error {
	return b.st.Scan(ctx, []byte{kSession}, []byte{kSession + 1}, func(k, v []byte) error {
		if len(k) < 9 || len(v) < 8 {
			return nil
		}
		e := b.byID[binary.BigEndian.Uint64(k[1:9])]
		if e == nil || e.q == nil {
			return nil
		}
		s := e.q.session(string(k[9:]), true)
		s.hasState = true
		s.stateUpdated = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}
