package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
)

// DefaultPageWindow is how many available messages a queue or
// subscription without sessions keeps in memory when no PageWindow is set.
const DefaultPageWindow = 50000

// pageCountChunk is how many records one step of the startup count reads.
const pageCountChunk = 16384

// pager keeps the backlog of a queue or subscription without sessions on
// disk beyond a window of available messages, so that memory does not grow
// with the backlog and a restart does not read it all.
//
// Messages of the main subqueue that are active and were published while
// the window was full are "cold": their records are in the store but they
// are not in q.msgs. They are counted in q.n and q.size like every other
// message (and in pg.cold), so counts and quotas see them. Every cold
// message has a sequence number ≥ pg.from (0: there are none). When a
// consumer drains the available messages to half the window, a page-in
// reads the next records from pg.from in key (sequence) order and indexes
// them. Once paging started, every newly published or activated message
// goes cold until the page-ins catch up, so sequence order holds.
//
// A restart loads the window and leaves the rest cold; the cold records
// are then counted by a background scan (pg.counting): until it ends the
// counts are low, and deferred and scheduled messages among those records
// are indexed as the scan reaches them (CancelScheduled and ReceiveDeferred
// read a missing one directly). Records with sequence numbers in
// [countPos, countEnd) are not counted yet.
//
// TTL expiry of a cold message happens when it is paged in, as Service Bus
// expires messages when a receiver reaches them. Dead-letter subqueues and
// session-enabled entities are not paged.
type pager struct {
	// mu serializes page-ins and count steps: they read the store outside
	// q.mu and then apply under it. It is taken before q.mu, never under.
	mu sync.Mutex

	// The rest is guarded by q.mu.
	window   int    // available messages kept in memory; 0: no paging
	from     uint64 // every cold message has seq ≥ from; 0: none is cold
	low      uint64 // smallest seq turned cold while a page-in scans (0: none)
	scanning bool   // a page-in or count step is reading the store
	// gone holds the messages removed from the index while a scan ran: a
	// record the scan read may belong to one of them.
	gone    map[uint64]struct{}
	running bool  // a page-in goroutine is started
	cold    int64 // cold messages (counted in q.n and q.size)
	// unpub holds the sequence numbers of main-subqueue messages decided
	// but not yet published (or aborted): a page-in that reads one of
	// their records leaves it to the publication.
	unpub map[uint64]struct{}

	counting           bool
	countPos, countEnd uint64

	pagedIn int64 // messages indexed by page-ins, ever (tests)
}

func (q *qstate) initPager(window int) {
	if window > 0 && !q.sessionful() {
		q.pg.window = window
		q.pg.unpub = map[uint64]struct{}{}
	}
}

// paged reports whether a message of subqueue sub may be cold.
func (q *qstate) paged(sub Subqueue) bool { return q.pg.window > 0 && sub == SubqueueMain }

// decided records that a send decided message seq of subqueue sub; q.mu is
// held.
func (q *qstate) decided(sub Subqueue, seq uint64) {
	if q.paged(sub) {
		q.pg.unpub[seq] = struct{}{}
	}
}

// undecided forgets a decided message (published or aborted); q.mu is held.
func (q *qstate) undecided(sub Subqueue, seq uint64) {
	if q.paged(sub) {
		delete(q.pg.unpub, seq)
	}
}

// wantsCold reports whether the active message m, about to become
// available, must stay on disk instead; q.mu is held.
func (q *qstate) wantsCold(m *msgIdx) bool {
	return q.paged(m.sub) && m.state == StateActive &&
		(q.pg.from != 0 || len(q.avail[SubqueueMain]) >= q.pg.window)
}

// addCold counts a committed message that is not indexed; q.mu is held.
func (q *qstate) addCold(m *msgIdx) {
	q.n[SubqueueMain][StateActive]++
	q.size += int64(m.size)
	q.markCold(m.seq)
}

// evictCold takes an active, unlocked, unavailable message out of the
// index, keeping it counted, as cold; q.mu is held.
func (q *qstate) evictCold(m *msgIdx) {
	delete(q.msgs, m.seq)
	q.b.cache.drop(m) // a page-in makes a new index entry
	q.markCold(m.seq)
}

func (q *qstate) markCold(seq uint64) {
	pg := &q.pg
	pg.cold++
	if pg.from == 0 || seq < pg.from {
		pg.from = seq
	}
	if pg.scanning && (pg.low == 0 || seq < pg.low) {
		pg.low = seq
	}
}

// maybePage starts a page-in when the available messages ran low and some
// are cold; q.mu is held.
func (q *qstate) maybePage() {
	pg := &q.pg
	if pg.running || !q.wantsPage() {
		return
	}
	pg.running = true
	if !q.b.spawn(q.pageInLoop) {
		pg.running = false
	}
}

// pageInLoop pages in until the window is full or nothing is cold. Whether
// to go on is decided again under the lock that ends the loop: a dispatch
// that found the loop still running started none, so a page-in wanted
// since pageIn answered (receivers drained the window, a message went
// cold) must be this loop's, or none would run until the next dispatch.
func (q *qstate) pageInLoop() {
	ctx := context.Background()
	for {
		err := q.pageIn(ctx, 0)
		if err != nil && !errors.Is(err, ErrClosed) {
			q.b.log.Error("paging in messages", "entity", q.ent.path(), "err", err)
		}
		q.mu.Lock()
		if err != nil || !q.wantsPage() {
			q.pg.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
	}
}

// wantsPage reports whether a page-in is due: some messages are cold and
// the available ones ran down to half the window; q.mu is held.
func (q *qstate) wantsPage() bool {
	pg := &q.pg
	return pg.from != 0 && len(q.avail[SubqueueMain]) <= pg.window/2 && !q.ent.deleted.Load()
}

// pageRec is a message record read by a page-in or a count step.
type pageRec struct {
	seq uint64
	mm  msgMeta
	msg *Message // an inline message's record, decoded (page-ins only)
}

// scanMain reads up to max main-subqueue records of q from sequence number
// from (exclusive of end; end 0: to the last), outside q.mu. With bodies,
// it also decodes the message records of inline messages, which the scan
// has read anyway: a page-in caches them for the deliveries that follow.
func (q *qstate) scanMain(ctx context.Context, from, end uint64, max int, bodies bool) (recs []pageRec, exhausted bool, err error) {
	id := q.ent.id
	stop := msgKey(id, SubqueueMain+1, 0)
	if end != 0 {
		stop = msgKey(id, SubqueueMain, end)
	}
	err = q.b.st.Scan(ctx, msgKey(id, SubqueueMain, from), stop, func(k, v []byte) error {
		if len(recs) == max {
			return errStopScan
		}
		mm, rec, err := decodeMetaRecord(v)
		if err != nil {
			return err
		}
		r := pageRec{seq: binary.BigEndian.Uint64(k[10:]), mm: mm}
		if bodies && rec != nil {
			if r.msg, err = decodeMessage(bytes.Clone(rec)); err != nil {
				return err
			}
		}
		recs = append(recs, r)
		return nil
	})
	if errors.Is(err, errStopScan) {
		return recs, false, nil
	}
	return recs, err == nil, err
}

// pageIn reads the next cold records and indexes them: up to want (0: as
// many as fill the window).
func (q *qstate) pageIn(ctx context.Context, want int) error {
	pg := &q.pg
	pg.mu.Lock()
	defer pg.mu.Unlock()
	q.mu.Lock()
	from := pg.from
	if want == 0 {
		want = pg.window - len(q.avail[SubqueueMain])
	}
	if from == 0 || want <= 0 || q.ent.deleted.Load() {
		q.mu.Unlock()
		return nil
	}
	pg.low = 0
	q.beginScan()
	q.mu.Unlock()

	recs, exhausted, err := q.scanMain(ctx, from, 0, want, true)

	w := &work{q: q}
	q.mu.Lock()
	gone := q.endScan()
	if err != nil {
		q.mu.Unlock()
		return err
	}
	if q.ent.deleted.Load() {
		q.mu.Unlock()
		return nil
	}
	for _, r := range recs {
		if q.msgs[r.seq] != nil {
			continue
		}
		if _, ok := pg.unpub[r.seq]; ok {
			continue
		}
		if _, ok := gone[r.seq]; ok {
			continue
		}
		if r.mm.state == StateActive && !q.uncounted(r.seq) {
			// Counted as cold: insert counts it again.
			q.n[SubqueueMain][StateActive]--
			q.size -= r.mm.size
			pg.cold--
		}
		m := indexOf(r.seq, &r.mm)
		q.insert(m)
		if r.msg != nil {
			q.b.cache.put(m, r.msg)
		}
		pg.pagedIn++
	}
	next := uint64(0)
	if !exhausted {
		next = recs[len(recs)-1].seq + 1
	}
	if pg.low != 0 && (next == 0 || pg.low < next) {
		next = pg.low
	}
	pg.from = next
	if next == 0 && pg.cold != 0 && !pg.counting {
		q.b.log.Error("paging: no cold record left but some counted", "entity", q.ent.path(), "cold", pg.cold)
	}
	q.dispatch(w)
	q.mu.Unlock()
	q.b.finish(w)
	return nil
}

// beginScan notes that a scan of the store starts; q.mu is held.
func (q *qstate) beginScan() {
	q.pg.scanning = true
	if q.pg.gone == nil {
		q.pg.gone = map[uint64]struct{}{}
	}
}

// endScan ends a scan and returns the messages removed meanwhile; q.mu is
// held.
func (q *qstate) endScan() map[uint64]struct{} {
	g := q.pg.gone
	q.pg.scanning, q.pg.gone = false, nil
	return g
}

// removed notes that message seq left the index; q.mu is held.
func (q *qstate) removed(seq uint64) {
	if q.pg.scanning {
		q.pg.gone[seq] = struct{}{}
	}
}

// uncounted reports whether a record is one the startup count has not
// reached yet (neither in q.n nor in pg.cold); q.mu is held.
func (q *qstate) uncounted(seq uint64) bool {
	return q.pg.counting && seq >= q.pg.countPos && seq < q.pg.countEnd
}

// indexOf makes the index entry of a stored message (a session message's
// session is the caller's to set).
func indexOf(seq uint64, mm *msgMeta) *msgIdx {
	return &msgIdx{seq: seq, bodyRef: mm.bodyRef, enqueued: mm.enqueued, expires: mm.expires, scheduled: mm.scheduled,
		size: int32(mm.size), deliveries: mm.deliveries, sub: mm.sub, state: mm.state, hidx: -1, inline: mm.inline, home: mm.sub}
}

// startCount begins the background count of the records a restart left
// cold: those with sequence numbers in [from, end).
func (q *qstate) startCount(end uint64) {
	pg := &q.pg
	if pg.from == 0 {
		return
	}
	pg.counting, pg.countPos, pg.countEnd = true, pg.from, end
	if !q.b.spawn(q.countLoop) {
		pg.counting = false
	}
}

func (q *qstate) countLoop() {
	ctx := context.Background()
	for {
		done, err := q.countStep(ctx)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				q.b.log.Error("counting stored messages", "entity", q.ent.path(), "err", err)
			}
			return
		}
		if done {
			return
		}
	}
}

// countStep counts the next chunk of records left cold by a restart:
// active ones stay cold, deferred and scheduled ones are indexed.
func (q *qstate) countStep(ctx context.Context) (bool, error) {
	pg := &q.pg
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if q.b.isClosed() {
		return false, ErrClosed
	}
	q.mu.Lock()
	pos, end := pg.countPos, pg.countEnd
	q.beginScan()
	q.mu.Unlock()
	recs, exhausted, err := q.scanMain(ctx, pos, end, pageCountChunk, false)
	w := &work{q: q}
	q.mu.Lock()
	gone := q.endScan()
	if err != nil {
		q.mu.Unlock()
		return false, err
	}
	for _, r := range recs {
		if _, ok := gone[r.seq]; ok || q.msgs[r.seq] != nil {
			continue
		}
		if r.mm.state == StateActive {
			q.n[SubqueueMain][StateActive]++
			q.size += r.mm.size
			pg.cold++
			continue
		}
		q.insert(indexOf(r.seq, &r.mm))
	}
	if exhausted {
		pg.countPos, pg.counting = end, false
	} else {
		pg.countPos = recs[len(recs)-1].seq + 1
	}
	q.dispatch(w)
	q.mu.Unlock()
	q.b.finish(w)
	return exhausted, nil
}

// fetchUncounted indexes the records of seqs the startup count has not
// reached yet, so that operations by sequence number (CancelScheduled,
// ReceiveDeferred) find them right after a restart.
func (q *qstate) fetchUncounted(ctx context.Context, seqs []int64) error {
	pg := &q.pg
	q.mu.Lock()
	counting := pg.counting
	q.mu.Unlock()
	if !counting {
		return nil
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	for _, s := range seqs {
		seq := uint64(s)
		q.mu.Lock()
		skip := s <= 0 || !q.uncounted(seq) || q.msgs[seq] != nil
		q.mu.Unlock()
		if skip {
			continue
		}
		v, err := q.b.st.Get(ctx, msgKey(q.ent.id, SubqueueMain, seq))
		if err != nil {
			continue // not stored: the operation reports it
		}
		mm, err := decodeMeta(v)
		if err != nil {
			return err
		}
		if mm.state == StateActive {
			continue // paged in, or counted, in order
		}
		w := &work{q: q}
		q.mu.Lock()
		if q.uncounted(seq) && q.msgs[seq] == nil {
			q.insert(indexOf(seq, &mm))
		}
		q.dispatch(w)
		q.mu.Unlock()
		q.b.finish(w)
	}
	return nil
}

// spawn runs fn on a goroutine of the broker's, unless the broker is
// closed; Close waits for them.
func (b *Broker) spawn(fn func()) bool {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	if b.bgClosed {
		return false
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		fn()
	}()
	return true
}

func (b *Broker) isClosed() bool {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	return b.bgClosed
}
