package broker

import (
	"sync"
)

// msgCache keeps recently written or read messages (headers, properties and
// body) so that delivery right after a send needs no store read. It is
// bounded by bytes and evicts in insertion order.
type msgCache struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	m     map[cacheKey]*Message
	fifo  []cacheKey
	head  int
}

type cacheKey struct{ eid, bodyRef uint64 }

func newMsgCache(limit int64) *msgCache {
	return &msgCache{limit: limit, m: map[cacheKey]*Message{}}
}

func cost(m *Message) int64 { return int64(len(m.Body)) + 256 }

func (c *msgCache) get(k cacheKey) *Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *msgCache) put(k cacheKey, m *Message) {
	sz := cost(m)
	if sz > c.limit/4 {
		c.drop(k)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		c.bytes -= cost(old)
	} else {
		c.fifo = append(c.fifo, k)
	}
	c.m[k] = m
	c.bytes += sz
	for c.bytes > c.limit && c.head < len(c.fifo) {
		ek := c.fifo[c.head]
		c.fifo[c.head] = cacheKey{}
		c.head++
		if old, ok := c.m[ek]; ok {
			c.bytes -= cost(old)
			delete(c.m, ek)
		}
	}
	if live := len(c.fifo) - c.head; live > 2*len(c.m)+1024 {
		// Dropped entries leave stale keys behind: keep only live ones.
		kept := make([]cacheKey, 0, len(c.m))
		seen := make(map[cacheKey]bool, len(c.m))
		for _, k := range c.fifo[c.head:] {
			if _, ok := c.m[k]; ok && !seen[k] {
				seen[k] = true
				kept = append(kept, k)
			}
		}
		c.fifo, c.head = kept, 0
	}
}

func (c *msgCache) drop(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		c.bytes -= cost(old)
		delete(c.m, k)
	}
}
