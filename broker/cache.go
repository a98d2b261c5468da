package broker

import (
	"sync"
)

// msgCache keeps recently written or read messages (headers, properties and
// body) so that delivery right after a send needs no store read. It is
// bounded by bytes and evicts in insertion order.
//
// A cached message hangs off its index entry (msgIdx.body), so that a
// delivery finds it without a lookup: a map keyed by entity and body
// reference, as this was before, cost a random access into a table of tens
// of thousands of entries for every put, get and drop (about 6% of the
// broker's CPU on the session benchmark). The cache itself keeps only the
// byte count and the insertion order. msgIdx.body is atomic so that the
// cache evicts without the entry's queue lock, which it does not hold
// (it may hold another queue's).
type msgCache struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	live  int       // entries with a cached message
	fifo  []*msgIdx // insertion order; may hold stale entries (dropped, or put twice)
	head  int
}

func newMsgCache(limit int64) *msgCache { return &msgCache{limit: limit} }

func cost(m *Message) int64 { return int64(len(m.Body)) + 256 }

// get returns m's cached message, or nil.
func (c *msgCache) get(m *msgIdx) *Message { return m.body.Load() }

// put caches msg as m's message.
func (c *msgCache) put(m *msgIdx, msg *Message) {
	sz := cost(msg)
	if sz > c.limit/4 {
		c.drop(m)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := m.body.Swap(msg); old != nil {
		c.bytes -= cost(old) // m is in the FIFO already
	} else {
		c.live++
		c.fifo = append(c.fifo, m)
	}
	c.bytes += sz
	for c.bytes > c.limit && c.head < len(c.fifo) {
		e := c.fifo[c.head]
		c.fifo[c.head] = nil
		c.head++
		c.evictLocked(e)
	}
	if n := len(c.fifo) - c.head; n > 2*c.live+1024 {
		// Dropped entries leave stale ones behind: keep only live ones,
		// once each, in order.
		kept := make([]*msgIdx, 0, c.live)
		seen := make(map[*msgIdx]bool, c.live)
		for _, e := range c.fifo[c.head:] {
			if e.body.Load() != nil && !seen[e] {
				seen[e] = true
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
