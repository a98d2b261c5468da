package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// entity is a queue, topic or subscription in memory.
type entity struct {
	b      *Broker
	id     uint64
	kind   entityKind
	name   string  // as given: queue/topic name, or the subscription's own name
	parent *entity // subscription → topic

	p        atomic.Pointer[props]
	mu       sync.Mutex // guards created, updated, subs, rules
	created  time.Time
	updated  time.Time
	accessed atomic.Int64 // unix nanoseconds
	subs     map[string]*entity
	rules    []*rule // subscription rules, sorted by folded name
	deleted  atomic.Bool
	dormant  atomic.Bool // owned by another node of a cluster (cluster.go)
	idle     deadline

	q   *qstate     // queue, subscription
	seq *seqCounter // queue, topic (shared by its subscriptions)
	dd  *dedupeWindow
}

func (e *entity) props() *props { return e.p.Load() }

// counter is the sequence counter that numbers e's messages: its own, or
// its topic's for a subscription.
func (e *entity) counter() *seqCounter {
	if e.kind == kindSubscription {
		return e.parent.seq
	}
	return e.seq
}

// path returns the entity's address as the SDKs write it.
func (e *entity) path() string {
	if e.kind == kindSubscription {
		return e.parent.name + "/Subscriptions/" + e.name
	}
	return e.name
}

func (e *entity) touch(now time.Time) { e.accessed.Store(now.UnixNano()) }

// msgIdx is the in-memory index entry of one message: where it is, its
// deadlines and its lock. Its body and headers live in the store.
//
// A message placed active is inline: its message record follows its index
// record in one value, under its message key in subqueue home (one store
// entry to write and one to delete, not two and two). The first rewrite
// (abandon, defer, dead-letter, lock expiry) splits them: the message
// record goes to its body key, in the commit that rewrites or moves the
// index record, and split is set under the queue's lock once that commit
// is durable. inline and home never change after the entry is made, so
// readRecord reads them without the lock.
type msgIdx struct {
	seq        uint64
	bodyRef    uint64
	enqueued   int64
	expires    int64
	scheduled  int64
	size       int32 // bytes of the body (at most 100 MiB)
	deliveries uint32
	sub        Subqueue
	state      MessageState
	pending    bool      // a store commit changing this message is in flight
	once       bool      // its records were written once, by this process (deleteMessageKeys)
	inline     bool      // placed with its message record in its index record's value (below)
	home       Subqueue  // the subqueue it was placed in, when inline
	split      bool      // an inline message's records were split by a committed rewrite
	hidx       int32     // position in an availability heap, -1 when not available
	sess       *session  // its session, for a session entity
	lk         *msgLock  // nil when not locked
	dl         *deadline // scheduled activation or TTL expiry
	// body is the cached message (headers, properties, body), nil when
	// it must be read from the store (cache.go). Atomic: the cache evicts
	// without this entry's queue lock.
	body atomic.Pointer[Message]
}

// msgLock is the lock of a locked message. It lives apart from msgIdx, which
// every message of a backlog has, because few messages are locked at once:
// keeping it out makes each index entry 48 bytes smaller.
type msgLock struct {
	until      int64 // Unix nanoseconds
	token      LockToken
	owner      *Consumer
	prev, next *msgIdx // queue lock list (non-session) or owner's list (session)
}

// lockedUntil is when m's lock expires; 0 when m is not locked.
func (m *msgIdx) lockedUntil() int64 {
	if m.lk == nil {
		return 0
	}
	return m.lk.until
}

// owner is the consumer m is locked to, if any (nil also for a lock taken
// by ReceiveDeferred).
func (m *msgIdx) owner() *Consumer {
	if m.lk == nil {
		return nil
	}
	return m.lk.owner
}

func (m *msgIdx) meta() msgMeta {
	mm := msgMeta{sub: m.sub, state: m.state, deliveries: m.deliveries, enqueued: m.enqueued, expires: m.expires,
		scheduled: m.scheduled, bodyRef: m.bodyRef, size: int64(m.size)}
	if m.sess != nil {
		mm.sessionID = m.sess.id
	}
	return mm
}

// seqHeap orders available messages by sequence number.
type seqHeap []*msgIdx

func (h *seqHeap) push(m *msgIdx) {
	m.hidx = int32(len(*h))
	if *h == nil {
		*h = make(seqHeap, 0, 4) // a session's heap: skip growing through 1 and 2
	}
	*h = append(*h, m)
	h.up(int(m.hidx))
}

func (h *seqHeap) peek() *msgIdx {
	if len(*h) == 0 {
		return nil
	}
	return (*h)[0]
}

func (h *seqHeap) remove(m *msgIdx) {
	i := int(m.hidx)
	s := *h
	if i < 0 || i >= len(s) || s[i] != m {
		return
	}
	last := len(s) - 1
	h.swap(i, last)
	s[last] = nil
	*h = s[:last]
	m.hidx = -1
	if i < last {
		if !h.down(i) {
			h.up(i)
		}
	}
	if cap(*h) > 4096 && len(*h) < cap(*h)/8 {
		*h = append(make(seqHeap, 0, 2*len(*h)), *h...) // release a drained backlog
	}
}

func (h seqHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = int32(i)
	h[j].hidx = int32(j)
}

func (h seqHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if h[i].seq <= h[j].seq {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h seqHeap) down(i int) bool {
	i0, n := i, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].seq < h[l].seq {
			j = r
		}
		if h[i].seq <= h[j].seq {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// session is one session of a session-enabled queue or subscription. It
// exists while it has messages, state or a lock.
type session struct {
	id           string
	avail        seqHeap
	count        int // messages of the session in the main subqueue
	hasState     bool
	stateUpdated int64
	owner        *Consumer
	lockedUntil  int64
	lprev, lnext *session // queue's session-lock list
	inReady      bool
	// SetSessionState calls in flight: the session is kept while there
	// are any, so that the state one commits is indexed even when the
	// session is released meanwhile. They take turns (stateTurn holds
	// the one committing), so that states are stored, and indexed, in
	// the order their lock checks passed.
	stateWrites int
	stateTurn   chan struct{}
	// ahead holds message bodies read ahead for the session's owner: a
	// delivery that had to read its body from the store read the
	// session's next available messages with it (readAhead), and their
	// deliveries take them from here. Dropped when the session is
	// released; an entry leaves when its message is delivered.
	ahead map[*msgIdx]*Message
}

// seqCounter hands out sequence numbers. A number must never be reused,
// even after a crash, once a message carrying it may have been acknowledged
// (and perhaps completed and deleted since). So a batch that stores a
// message numbered beyond the durable high-water mark carries a new mark
// itself: the mark is written with the message, atomically, and no
// operation ever waits for a commit of its own just to reserve numbers —
// nor holds a lock across one.
//
// Marks are keys, not a value: each is key2(kCounter, eid, mark) with an
// empty value, and the batch deletes the marks below its own. Batches that
// carry marks may commit in any order; the largest mark always survives,
// because only a batch with a larger mark deletes it. Recovery takes the
// largest mark (and the largest stored sequence number) as the floor.
type seqCounter struct {
	mu       sync.Mutex
	eid      uint64
	next     uint64 // next number to hand out
	reserved uint64 // durable high-water mark: numbers ≤ reserved may have been used
}

const seqBlock = 1 << 16

// take returns n consecutive sequence numbers. When they pass the durable
// mark it returns the mark the caller's batch must write (markOps), and
// nothing otherwise (0).
func (c *seqCounter) take(n int) (first, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = c.next
	c.next += uint64(n)
	if last := c.next - 1; last > c.reserved {
		mark = last + seqBlock
	}
	return first, mark
}

// markOps adds to bt the writes of mark: the new mark, and the deletion of
// every smaller one.
func (c *seqCounter) markOps(bt *batchBuf, mark uint64) {
	bt.DeleteRange(key2(kCounter, c.eid, 0), key2(kCounter, c.eid, mark))
	bt.Set(key2(kCounter, c.eid, mark), nil)
}

// marked records that a batch carrying mark is durable.
func (c *seqCounter) marked(mark uint64) {
	c.mu.Lock()
	c.reserved = max(c.reserved, mark)
	c.mu.Unlock()
}

// seqMark is a mark a txn writes and, once committed, reports.
type seqMark struct {
	c    *seqCounter
	mark uint64
}

// dedupeWindow remembers message ids sent within the duplicate-detection
// window of an entity.
type dedupeWindow struct {
	mu   sync.Mutex
	seen map[string]int64 // message id → enqueued unix nanoseconds
	fifo []dedupeEntry
	head int
	// flight holds the ids in seen whose send is still committing: the
	// channel is that txn's outcome (txn.outcome), closed once the send is
	// durable or has failed and forgotten the id.
	flight map[string]chan struct{}
}

type dedupeEntry struct {
	id string
	at int64
}

// expire forgets ids older than cutoff and returns them.
func (d *dedupeWindow) expire(cutoff int64, max int) []string {
	var out []string
	for d.head < len(d.fifo) && len(out) < max {
		e := d.fifo[d.head]
		if e.at > cutoff {
			break
		}
		if at, ok := d.seen[e.id]; ok && at == e.at {
			delete(d.seen, e.id)
			out = append(out, e.id)
		}
		d.fifo[d.head] = dedupeEntry{}
		d.head++
	}
	if d.head > 1024 && d.head*2 > len(d.fifo) {
		d.fifo = append([]dedupeEntry(nil), d.fifo[d.head:]...)
		d.head = 0
	}
	return out
}

func (d *dedupeWindow) add(id string, at int64) {
	d.seen[id] = at
	d.fifo = append(d.fifo, dedupeEntry{id, at})
}
