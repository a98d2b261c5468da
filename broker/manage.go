package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"time"
)

// MaxPeek bounds Peek and PeekSession results per call.
const MaxPeek = 4096

var errStopScan = errors.New("stop")

// Peek returns up to max messages of a queue, subscription or dead-letter
// path with sequence number ≥ from, in order, without locking them: active,
// deferred and scheduled messages, with their State and persisted
// DeliveryCount.
func (b *Broker) Peek(ctx context.Context, path string, from int64, max int) ([]*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.peek(ctx, path, from, max, nil)
}

// PeekSession is Peek restricted to one session's messages.
func (b *Broker) PeekSession(ctx context.Context, path, sessionID string, from int64, max int) ([]*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.peek(ctx, path, from, max, &sessionID)
}

func (b *Broker) peek(ctx context.Context, path string, from int64, max int, session *string) ([]*Message, error) {
	e, p, err := b.resolve(path)
	if err != nil {
		return nil, err
	}
	if max <= 0 || max > MaxPeek {
		return nil, errorf(ErrInvalidArgument, "peek count %d is outside [1, %d]", max, MaxPeek)
	}
	if from < 0 {
		from = 0
	}
	e.touch(b.now())
	var out []*Message
	start := msgKey(e.id, p.Subqueue, uint64(from))
	end := msgKey(e.id, p.Subqueue+1, 0)
	err = b.st.Scan(ctx, start, end, func(k, v []byte) error {
		mm, rec, err := decodeMetaRecord(v)
		if err != nil {
			return err
		}
		if mm.sub != p.Subqueue || session != nil && mm.sessionID != *session {
			return nil
		}
		if rec != nil {
			rec = bytes.Clone(rec) // v is the scan's
		} else if rec, err = b.st.Get(ctx, key2(kBody, e.id, mm.bodyRef)); err != nil {
			return nil // removed since the scan began
		}
		m, err := decodeMessage(rec)
		if err != nil {
			return err
		}
		idx := &msgIdx{seq: binary.BigEndian.Uint64(k[10:]), enqueued: mm.enqueued, expires: mm.expires,
			scheduled: mm.scheduled, deliveries: mm.deliveries, state: mm.state}
		out = append(out, e.q.stamp(m, idx))
		if len(out) == max {
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return nil, err
	}
	return out, nil
}

// ReceiveDeferred receives deferred messages by sequence number from a
// queue, subscription or dead-letter path. In PeekLock mode they are locked
// (LockDuration) and settled by lock token like any other; in
// ReceiveAndDelete mode they are deleted durably before this returns. A
// sequence number that is not a deferred message of the path is
// ErrMessageNotFound and receives nothing.
func (b *Broker) ReceiveDeferred(ctx context.Context, path string, seqs []int64, mode ReceiveMode) ([]*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, p, err := b.resolve(path)
	if err != nil {
		return nil, err
	}
	if mode > ReceiveAndDelete {
		return nil, errorf(ErrInvalidArgument, "unknown receive mode %d", mode)
	}
	q := e.q
	if q.paged(p.Subqueue) {
		if err := q.fetchUncounted(ctx, seqs); err != nil {
			return nil, err
		}
	}
	e.touch(b.now())
	w := &work{q: q}
	// Find and reserve (pending) every message first, read them without
	// the lock, then lock or delete them all: all of them, or none.
	q.mu.Lock()
	ms := make([]*msgIdx, 0, len(seqs))
	release := func() {
		for _, m := range ms {
			m.pending = false
		}
	}
	for _, s := range seqs {
		m := q.msgs[uint64(s)]
		if m == nil || m.state != StateDeferred || m.sub != p.Subqueue || m.pending || m.lk != nil {
			release()
			q.mu.Unlock()
			return nil, errorf(ErrMessageNotFound, "no deferred message with sequence number %d in %q", s, path)
		}
		m.pending = true
		ms = append(ms, m)
	}
	q.mu.Unlock()
	fail := func(err error) ([]*Message, error) {
		q.mu.Lock()
		release()
		q.mu.Unlock()
		return nil, err
	}
	ls := make([]*lazyBody, len(ms))
	for i, m := range ms {
		ls[i] = &lazyBody{eid: e.id, m: m, split: m.split} // pending: nothing changes m meanwhile
	}
	bases, errs := b.loadBodies(ctx, ls)
	for _, err := range errs {
		if err != nil {
			return fail(err)
		}
	}
	// Receiving a deferred message is a delivery, as on Service Bus: in
	// peek-lock mode the new count is durable before the message is handed
	// out (receive-and-delete deletes it anyway).
	if mode == PeekLock {
		var bt batchBuf
		for _, m := range ms {
			if m.sub == SubqueueMain {
				// Only its index record: deferring the message rewrote it,
				// which split an inline message's records.
				mm := m.meta()
				mm.deliveries++
				m.wroteAgain()
				bt.Set(msgKey(e.id, m.sub, m.seq), encodeMeta(&mm))
			}
		}
		if err := b.commitWrites(ctx, q, &bt.Batch); err != nil {
			return fail(err)
		}
	}
	now := b.now()
	q.mu.Lock()
	release()
	for _, m := range ms {
		if q.msgs[m.seq] != m { // the entity was deleted or purged meanwhile
			q.mu.Unlock()
			return nil, errorf(ErrMessageNotFound, "deferred message %d of %q was removed", m.seq, path)
		}
	}
	out := make([]*Message, 0, len(ms))
	for i, m := range ms {
		msg := q.stamp(bases[i], m)
		if m.sub == SubqueueMain {
			n := m.deliveries + 1
			if mode == PeekLock {
				m.deliveries = n // as committed above
			}
			msg.DeliveryCount = n
		}
		if mode == PeekLock {
			until := now.UnixNano() + int64(e.props().LockDuration)
			q.lock(m, nil, until)
			msg.LockToken, msg.LockedUntil = m.lk.token, time.Unix(0, until).UTC()
		} else {
			m.pending = true
			deleteMessageKeys(&w.rdBt, e.id, m)
			if w.pc == nil {
				w.pc = &pendingCommit{}
			}
			w.rd = append(w.rd, rdItem{m: m})
		}
		out = append(out, msg)
	}
	q.mu.Unlock()
	if err := b.finish(w); err != nil {
		return nil, err
	}
	b.obs.MessagesOut(e.path(), len(out))
	return out, nil
}

// DeleteMessages deletes up to max unlocked messages (any state) of a
// queue, subscription or dead-letter path, oldest sequence numbers first,
// enqueued before `before` (zero: any time). It returns how many it deleted.
func (b *Broker) DeleteMessages(ctx context.Context, path string, max int, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	e, p, err := b.resolve(path)
	if err != nil {
		return 0, err
	}
	if max <= 0 || max > 4000 {
		return 0, errorf(ErrInvalidArgument, "delete count %d is outside [1, 4000]", max)
	}
	q := e.q
	e.touch(b.now())
	if q.paged(p.Subqueue) {
		// Bring cold messages in, so that the oldest are deleted first
		// and a purge reaches all of them.
		if err := q.pageIn(ctx, max); err != nil {
			return 0, err
		}
	}
	w := &work{q: q}
	q.mu.Lock()
	var cand []*msgIdx
	for _, m := range q.msgs {
		if m.sub == p.Subqueue && !m.pending && m.lk == nil && (before.IsZero() || m.enqueued < satNano(before)) {
			cand = append(cand, m)
		}
	}
	sort.Slice(cand, func(i, j int) bool { return cand[i].seq < cand[j].seq })
	cand = page(cand, 0, max)
	w.slabHint = len(cand)
	for _, m := range cand {
		q.unavailable(m)
		w.moves = append(w.moves, w.newMove(m, mvDelete, m.sub, m.state, m.deliveries))
	}
	q.mu.Unlock()
	if err := b.finish(w); err != nil {
		return 0, err
	}
	return len(cand), nil
}

// Purge deletes every unlocked message of a path enqueued before `before`
// (zero: any time), in batches, and returns how many it deleted.
func (b *Broker) Purge(ctx context.Context, path string, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := b.DeleteMessages(ctx, path, 4000, before)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}
