package broker

import "testing"

// cacheOf returns a cache with room for n messages of cachedMsg's size.
func cacheOf(n int) *msgCache { return newMsgCache(int64(n) * cost(cachedMsg())) }

func cachedMsg() *Message { return &Message{Body: make([]byte, 744)} } // cost 1000

// cached counts the entries of ms that hold a cached message.
func cached(ms []*msgIdx) int {
	n := 0
	for _, m := range ms {
		if m.body.Load() != nil {
			n++
		}
	}
	return n
}

// putAll puts a message of cachedMsg's size for each of ms.
func putAll(c *msgCache, ms []*msgIdx) {
	for _, m := range ms {
		c.put(m, cachedMsg())
	}
}

func newEntries(n int) []*msgIdx {
	ms := make([]*msgIdx, n)
	for i := range ms {
		ms[i] = &msgIdx{seq: uint64(i + 1)}
	}
	return ms
}

// A backlog larger than the cache keeps its oldest messages cached (the
// next to be delivered) and leaves the newest on disk; what is delivered
// and dropped makes room for what comes next.
func TestCacheKeepsItsOldestWhenFull(t *testing.T) {
	c := cacheOf(10)
	ms := newEntries(15)
	putAll(c, ms)
	if n := cached(ms[:10]); n != 10 {
		t.Fatalf("%d of the 10 oldest messages cached, want all", n)
	}
	if n := cached(ms[10:]); n != 0 {
		t.Fatalf("%d of the 5 newest messages cached over the limit, want none", n)
	}
	if c.bytes != c.limit || c.live != 10 {
		t.Fatalf("bytes %d (limit %d), live %d; want the limit and 10", c.bytes, c.limit, c.live)
	}
	for _, m := range ms[:3] {
		c.drop(m)
	}
	more := newEntries(4)
	putAll(c, more)
	if n := cached(more); n != 3 {
		t.Fatalf("%d of 4 new messages cached after 3 were dropped, want 3", n)
	}
	if n := cached(ms[3:10]); n != 7 {
		t.Fatalf("%d of the 7 remaining old messages cached, want all", n)
	}
}

// Entries that stay while the cache takes staleAfter times its population
// in puts (a backlog nobody consumes) are evicted in insertion order, so
// that the traffic that moves is cached again.
func TestCacheEvictsStaleEntries(t *testing.T) {
	c := cacheOf(10)
	idle := newEntries(10)
	putAll(c, idle)
	// Traffic on another queue: each message is put, refused (full), and
	// dropped once delivered, until the oldest idle entry was cached more
	// than staleAfter × 10 puts ago.
	moving := newEntries(staleAfter*10 - len(idle) + 1)
	for _, m := range moving {
		c.put(m, cachedMsg())
		if m.body.Load() != nil {
			t.Fatalf("message %d cached while the idle entries are recent", m.seq)
		}
		c.drop(m)
	}
	next := newEntries(3)
	putAll(c, next)
	if n := cached(next); n != 3 {
		t.Fatalf("%d of 3 messages cached once the idle entries went stale, want 3", n)
	}
	if n := cached(idle); n != 7 {
		t.Fatalf("%d idle entries still cached, want 7 (the 3 oldest evicted)", n)
	}
	if idle[0].body.Load() != nil || idle[3].body.Load() == nil {
		t.Fatal("stale entries were not evicted oldest first")
	}
}

// A message put again (changed) when there is no room for the new version
// loses its old version too: the old one is no longer its content.
func TestCacheDropsAnOldVersionItCannotReplace(t *testing.T) {
	c := cacheOf(8)
	ms := newEntries(8)
	putAll(c, ms)
	bigger := &Message{Body: make([]byte, 1744)}
	c.put(ms[7], bigger)
	if got := ms[7].body.Load(); got != nil {
		t.Fatalf("message cached as %d bytes after a bigger version did not fit, want none", len(got.Body))
	}
	if want := 7 * cost(cachedMsg()); c.bytes != want || c.live != 7 {
		t.Fatalf("bytes %d, live %d; want %d and 7", c.bytes, c.live, want)
	}
	smaller := &Message{Body: make([]byte, 10)}
	c.put(ms[0], smaller)
	if want := 6*cost(cachedMsg()) + cost(smaller); ms[0].body.Load() != smaller || c.bytes != want {
		t.Fatalf("a smaller version replacing a cached one: bytes %d, want %d", c.bytes, want)
	}
}

// A cache that stays full, its entries going stale one after another, keeps
// its insertion order near its population instead of growing it with every
// put.
func TestCacheInsertionOrderStaysBounded(t *testing.T) {
	c := cacheOf(10)
	for range 200 {
		putAll(c, newEntries(100)) // nothing dropped: entries go stale and are evicted
	}
	if c.live != 10 {
		t.Fatalf("live %d, want 10", c.live)
	}
	if n := len(c.fifo); n > 2*1024+2*c.live {
		t.Fatalf("insertion order of %d entries (head %d) for 10 live ones after 20,000 puts", n, c.head)
	}
}
