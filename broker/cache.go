package broker

import (
	"sync"
)

// msgCache keeps recently written or read messages (headers, properties and
// body) so that delivery right after a send needs no store read. It is
// bounded by bytes.
//
// A cached message hangs off its index entry (msgIdx.body), so that a
// delivery finds it without a lookup: a map keyed by entity and body
// reference, as this was before, cost a random access into a table of tens
// of thousands of entries for every put, get and drop (about 6% of the
// broker's CPU on the session benchmark). The cache itself keeps only the
// byte count and the insertion order. msgIdx.body is atomic so that the
// cache evicts without the entry's queue lock, which it does not hold
// (it may hold another queue's).
//
// When full, the cache keeps what it has and leaves the new message on
// disk, unless its oldest entries are stale. A queue delivers its oldest
// messages first: evicting in insertion order, as this did before, evicted
// every message of a backlog larger than the cache just before its
// delivery, and each delivery then read the store (measured 2026-11-27:
// the session benchmark with twice the sends in flight spent 22% of the
// broker's CPU in those reads, 31 µs per message instead of 15). An entry
// is stale once the cache has taken staleAfter times its population in
// puts since the entry was cached (a backlog nobody consumes, deferred
// messages): those are evicted in insertion order as before, so that they
// do not keep the cache from the traffic that moves.
type msgCache struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	live  int          // entries with a cached message
	puts  uint64       // put calls, ever: the cache's clock for staleness
	fifo  []cacheEntry // insertion order; may hold stale entries (dropped, or put twice)
	head  int
}

// cacheEntry is an entry of the insertion order: m, cached at put number at.
type cacheEntry struct {
	m  *msgIdx
	at uint64
}

// staleAfter: an entry cached staleAfter × live puts ago is stale.
const staleAfter = 2

func newMsgCache(limit int64) *msgCache { return &msgCache{limit: limit} }

func cost(m *Message) int64 { return int64(len(m.Body)) + 256 }

// get returns m's cached message, or nil.
func (c *msgCache) get(m *msgIdx) *Message { return m.body.Load() }

// put caches msg as m's message, if there is room for it.
func (c *msgCache) put(m *msgIdx, msg *Message) {
	sz := cost(msg)
	if sz > c.limit/4 {
		c.drop(m)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.puts++
	need := func() int64 {
		if old := m.body.Load(); old != nil {
			return sz - cost(old)
		}
		return sz
	}
	for c.bytes+need() > c.limit && c.head < len(c.fifo) {
		e := c.fifo[c.head]
		if e.m.body.Load() != nil && c.puts-e.at <= staleAfter*uint64(c.live) {
			break // recent: keep it
		}
		c.fifo[c.head] = cacheEntry{}
		c.head++
		c.evictLocked(e.m) // nothing for an entry dropped already
	}
	if c.bytes+need() > c.limit {
		c.evictLocked(m) // an older version of m is no longer m's message
		return
	}
	if old := m.body.Swap(msg); old != nil {
		c.bytes -= cost(old) // m is in the insertion order already
	} else {
		c.live++
		c.fifo = append(c.fifo, cacheEntry{m, c.puts})
	}
	c.bytes += sz
	if c.head > 1024 && c.head > len(c.fifo)/2 || len(c.fifo)-c.head > 2*c.live+1024 {
		// Evicted entries in front (a cache that stays full), or dropped
		// ones behind: keep only live ones, once each, in order, so that
		// the insertion order stays near the cache's population.
		kept := make([]cacheEntry, 0, c.live)
		seen := make(map[*msgIdx]bool, c.live)
		for _, e := range c.fifo[c.head:] {
			if e.m.body.Load() != nil && !seen[e.m] {
				seen[e.m] = true
				kept = append(kept, e)
			}
		}
		c.fifo, c.head = kept, 0
	}
}

// drop forgets m's cached message.
func (c *msgCache) drop(m *msgIdx) {
	if m.body.Load() == nil {
		return
	}
	c.mu.Lock()
	c.evictLocked(m)
	c.mu.Unlock()
}

func (c *msgCache) evictLocked(m *msgIdx) {
	if old := m.body.Swap(nil); old != nil {
		c.bytes -= cost(old)
		c.live--
	}
}
