package broker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store"
)

// Options configure a Broker. The zero value works: the real clock,
// crypto/rand, slog.Default, no observer, 1 MiB message ceiling, 64 MiB cache.
type Options struct {
	Clock  clock.Clock
	Rand   io.Reader
	Logger *slog.Logger
	// Observer receives metric events; nil for none.
	Observer Observer
	// MaxMessageSizeInKilobytes is the namespace ceiling for
	// MaxMessageSizeInKilobytes of entities (default 1024, at most 102400).
	MaxMessageSizeInKilobytes int64
	// CacheBytes bounds the cache of message bodies (default 64 MiB).
	CacheBytes int64
	// MaxEntities bounds queues plus topics (default 10000).
	MaxEntities int
	// PageWindow is how many available messages a queue or subscription
	// without sessions keeps in memory; the rest of its backlog stays on
	// disk until receivers reach it (default DefaultPageWindow; negative:
	// keep every message in memory). See pager.go.
	PageWindow int
	// Dormant starts every entity dormant: known by name, its records not
	// loaded, its data operations refused with ErrNotOwned until Load. A
	// node of a cluster runs so and loads the entities it owns (cluster.go).
	Dormant bool
	// Created, when set, is called after this broker created a queue or
	// topic (a cluster node then takes it at once if it is to serve it).
	Created func(ctx context.Context)
}

// Observer receives events for metrics. Methods are called synchronously
// from broker goroutines and must not block or call the Broker.
type Observer interface {
	// MessagesIn counts messages accepted for an entity (after duplicate
	// detection and fan-out).
	MessagesIn(entity string, n int)
	// MessagesOut counts messages delivered to receivers.
	MessagesOut(entity string, n int)
	// DeadLettered counts messages moved to a dead-letter subqueue.
	DeadLettered(entity, reason string)
	// LockExpired counts message or session locks that expired.
	LockExpired(entity string)
}

// Broker is one namespace. It is safe for concurrent use.
type Broker struct {
	st    store.Store
	clk   clock.Clock
	log   *slog.Logger
	obs   Observer
	opts  Options
	wheel *wheel
	cache *msgCache

	rndMu  sync.Mutex
	rnd    *bufio.Reader
	rndTok LockToken // scratch for newToken, on rndMu: a local array read through io.Reader would escape to the heap

	mu       sync.RWMutex // guards byName, byID, nextID, closed
	byName   map[string]*entity
	byID     map[uint64]*entity
	nextID   uint64
	closed   bool
	entityMu sync.Mutex // serializes entity create/update/delete

	bgMu     sync.Mutex // guards bgClosed and additions to bg
	bgClosed bool
	bg       sync.WaitGroup // page-ins and startup counts (pager.go)
}

// Open opens the namespace kept in st, rebuilding the in-memory indexes.
// Locks held before a restart are gone: those messages are available again
// with the delivery count they had on disk.
func Open(ctx context.Context, st store.Store, opts Options) (*Broker, error) {
	if st == nil {
		return nil, errorf(ErrInvalidArgument, "nil store")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxMessageSizeInKilobytes == 0 {
		opts.MaxMessageSizeInKilobytes = DefaultMaxMessageSizeInKilobytes
	}
	if opts.MaxMessageSizeInKilobytes < 1 || opts.MaxMessageSizeInKilobytes > 100*1024 {
		return nil, errorf(ErrInvalidArgument, "MaxMessageSizeInKilobytes %d is outside [1, 102400]", opts.MaxMessageSizeInKilobytes)
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 64 << 20
	}
	if opts.MaxEntities == 0 {
		opts.MaxEntities = 10000
	}
	if opts.PageWindow == 0 {
		opts.PageWindow = DefaultPageWindow
	}
	b := &Broker{st: st, clk: opts.Clock, log: opts.Logger, obs: opts.Observer, opts: opts,
		rnd: bufio.NewReaderSize(opts.Rand, 4096), byName: map[string]*entity{}, byID: map[uint64]*entity{},
		cache: newMsgCache(opts.CacheBytes), nextID: 1}
	if b.obs == nil {
		b.obs = nopObserver{}
	}
	b.wheel = newWheel(b.clk, b.runDeadlines)
	if err := b.recover(ctx); err != nil {
		b.closeBackground()
		b.wheel.close()
		return nil, err
	}
	return b, nil
}

// Close stops the broker's timer and fails pending AcceptNextSession calls
// with ErrClosed. It does not close the store. Calls that look up an entity
// after Close return ErrClosed.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	var qs []*qstate
	for _, e := range b.byID {
		if e.q != nil {
			qs = append(qs, e.q)
		}
	}
	b.mu.Unlock()
	b.closeBackground()
	b.wheel.close()
	for _, q := range qs {
		q.mu.Lock()
		ws := q.waiters
		q.waiters = nil
		q.mu.Unlock()
		for _, w := range ws {
			w.done(nil, errorf(ErrClosed, "the broker is closing"))
		}
	}
	return nil
}

// closeBackground stops new background work and waits for what runs.
func (b *Broker) closeBackground() {
	b.bgMu.Lock()
	b.bgClosed = true
	b.bgMu.Unlock()
	b.bg.Wait()
}

func (b *Broker) now() time.Time { return b.clk.Now() }

func (b *Broker) commit(ctx context.Context, bt *store.Batch) error {
	if err := b.st.Commit(ctx, bt); err != nil {
		return fmt.Errorf("store commit: %w", err)
	}
	return nil
}

// batchBuf is a store.Batch built by the broker. Its hot keys are carved
// from shared chunks (one allocation for many keys): a store may keep the
// slices of a committed batch, and nothing writes to a carved key again.
type batchBuf struct {
	store.Batch
	arena []byte
}

// alloc returns n bytes of the arena.
func (bt *batchBuf) alloc(n int) []byte {
	if cap(bt.arena)-len(bt.arena) < n {
		bt.arena = make([]byte, 0, max(1024, n))
	}
	i := len(bt.arena)
	bt.arena = bt.arena[:i+n]
	return bt.arena[i : i+n : i+n]
}

// msgKey is msgKey, from the arena.
func (bt *batchBuf) msgKey(id uint64, sub Subqueue, seq uint64) []byte {
	return putMsgKey(bt.alloc(msgKeyLen), id, sub, seq)
}

// bodyKey is the key of message body ref, from the arena.
func (bt *batchBuf) bodyKey(id, ref uint64) []byte {
	return putKey2(bt.alloc(key2Len), kBody, id, ref)
}

func encodeUint(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: counter of %d bytes", errCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// newID returns a random version-4 UUID for the SQL newid() function, from
// the same source as lock tokens.
func (b *Broker) newID() [16]byte { return b.newToken() }

// newToken returns a random version-4 UUID. A failing random source is a
// fatal misconfiguration.
func (b *Broker) newToken() LockToken {
	b.rndMu.Lock()
	_, err := io.ReadFull(b.rnd, b.rndTok[:])
	t := b.rndTok
	b.rndMu.Unlock()
	if err != nil {
		panic(fmt.Sprintf("broker: random source failed: %v", err))
	}
	t[6] = t[6]&0x0f | 0x40
	t[8] = t[8]&0x3f | 0x80
	return t
}

// lookup finds a queue or topic by name, case-insensitively, for an
// operation on its messages: a dormant entity (owned by another node of a
// cluster) is refused with ErrNotOwned.
func (b *Broker) lookup(name string) (*entity, error) {
	e, err := b.lookupEntity(name)
	if err == nil && e.dormant.Load() {
		return nil, errorf(ErrNotOwned, "%q is served by another node of the cluster", e.name)
	}
	return e, err
}

// lookupEntity finds a queue or topic by name, dormant or not: for
// management.
func (b *Broker) lookupEntity(name string) (*entity, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	e := b.byName[fold(name)]
	if e == nil {
		return nil, errorf(ErrNotFound, "no queue or topic named %q", name)
	}
	return e, nil
}

// resolve finds the queue or subscription a path addresses.
func (b *Broker) resolve(path string) (*entity, Path, error) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, p, err
	}
	e, err := b.lookup(p.Entity)
	if err != nil {
		return nil, p, err
	}
	if p.Subscription == "" {
		if e.kind != kindQueue {
			return nil, p, errorf(ErrInvalidArgument, "%q is a topic; receive from one of its subscriptions", p.Entity)
		}
		return e, p, nil
	}
	if e.kind != kindTopic {
		return nil, p, errorf(ErrNotFound, "%q is not a topic", p.Entity)
	}
	e.mu.Lock()
	s := e.subs[fold(p.Subscription)]
	e.mu.Unlock()
	if s == nil {
		return nil, p, errorf(ErrNotFound, "topic %q has no subscription %q", p.Entity, p.Subscription)
	}
	return s, p, nil
}

// runDeadlines is called by the wheel with the deadlines that are due.
// Consecutive message deadlines of one queue are handled together, so that
// a burst of scheduled activations or expiries is one store commit.
func (b *Broker) runDeadlines(due []*deadline, now int64) {
	for i := 0; i < len(due); {
		d := due[i]
		if d.kind == dlMessage {
			j := i + 1
			for j < len(due) && due[j].kind == dlMessage && due[j].q == d.q {
				j++
			}
			d.q.onMessageDeadlines(due[i:j], now)
			i = j
			continue
		}
		b.runDeadline(d, now)
		i++
	}
}

func (b *Broker) runDeadline(d *deadline, now int64) {
	switch d.kind {
	case dlLocks:
		d.q.onLockDeadline(now)
	case dlSessLocks:
		d.q.onSessionLockDeadline(now)
	case dlWaiter:
		d.q.onWaiterDeadline(d.w)
	case dlIdle:
		b.onIdleDeadline(d.ent, now)
	}
}

type nopObserver struct{}

func (nopObserver) MessagesIn(string, int)      {}
func (nopObserver) MessagesOut(string, int)     {}
func (nopObserver) DeadLettered(string, string) {}
func (nopObserver) LockExpired(string)          {}
