// Package cluster runs one Busbar node of a cluster over a shared store
// (store/postgres): it owns which node serves which entity.
//
// Every queue or topic (with its subscriptions) is owned by one node at a
// time through a lease record in the shared store: the owner's node id and
// an epoch. Every commit that writes an entity's data carries the condition
// that its lease still holds the value this node acquired (store's
// Batch.Require), checked by the store atomically with the commit: a node
// that lost a lease — paused, cut off, declared dead — can never write that
// entity again, whatever it believes.
//
// Liveness: each node bumps a heartbeat record every LeaseTime/5. A node
// whose heartbeat has not changed for LeaseTime, as observed on the
// observer's own clock, is dead; its leases are taken by the nodes the
// placement now names. A node that could not renew its heartbeat for
// LeaseTime·4/5 stops serving by itself (it unloads its entities), before
// any other node may declare it dead. No clocks are compared across nodes.
//
// Placement: rendezvous hashing of the entity's id over the live nodes
// spreads entities evenly; when a node joins, each owner hands it the
// entities it now places there (unload, then pass the lease with a higher
// epoch); when a node stops (Stop, on SIGTERM) it hands all of its leases
// over before it exits. The new owner rebuilds an entity from its records
// (broker.Load) after it holds the lease, so it sees every commit the old
// owner made while it held it.
//
// Shared metadata (entities, rules, the id counter) is written by any node;
// the store announces changes to every node, whose broker re-reads them
// (broker.Refresh). Entity ids are allocated by compare-and-swap on the id
// counter, so two nodes never give one id to two entities.
package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store"
)

// DefaultLeaseTime is Options.LeaseTime's default.
const DefaultLeaseTime = 5 * time.Second

// Options configure a Node. The zero value works.
type Options struct {
	// NodeID names the node; default a random id. Two running nodes must
	// not share one.
	NodeID string
	// Address is what the node advertises to others with its heartbeat:
	// the host:port of its AMQP listener, which the other nodes dial to
	// forward links for the entities it serves.
	Address string
	// LeaseTime is how long a node whose heartbeat stopped keeps its
	// entities before others take them over (default DefaultLeaseTime).
	LeaseTime time.Duration
	// Clock measures time; default the real clock.
	Clock clock.Clock
	// Logger receives ownership changes; nil discards.
	Logger *slog.Logger
}

// Key layout of the cluster's own records, beside the broker's (which uses
// capital letters): '~' sorts after all of them.
var (
	prefix     = []byte("~c")
	nodePrefix = []byte("~cn")
	leasePre   = []byte("~cl")
)

// Prefixes are the key prefixes whose changes a shared store must announce
// to every node: the cluster's records and the broker's shared metadata.
func Prefixes() [][]byte { return append(broker.SharedPrefixes(), leasePre) }

func leaseKey(top uint64) []byte { return binary.BigEndian.AppendUint64(bytes.Clone(leasePre), top) }

// lease is a lease record: the owner ("" when released) and the epoch,
// raised by every change of hands.
type lease struct {
	epoch uint64
	owner string
	raw   []byte // as stored; nil: absent
}

func encodeLease(epoch uint64, owner string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, epoch), owner...)
}

func decodeLease(v []byte) (lease, error) {
	if len(v) < 8 {
		return lease{}, fmt.Errorf("cluster: lease record of %d bytes", len(v))
	}
	return lease{epoch: binary.BigEndian.Uint64(v), owner: string(v[8:]), raw: v}, nil
}

// Node states in the heartbeat record.
const (
	stateLive    = 0
	stateLeaving = 1
)

// heartbeat: counter (8 bytes), state (1 byte), address.
func encodeHeartbeat(n uint64, state byte, addr string) []byte {
	return append(append(binary.BigEndian.AppendUint64(nil, n), state), addr...)
}

// peer is what this node has observed of another node's heartbeat.
type peer struct {
	value   []byte
	since   time.Time // when value was first seen
	state   byte
	address string
}

// Node is one running node. Create it with New, open the broker on
// Node.Store with broker.Options.Dormant, then Start it.
type Node struct {
	st    store.Store
	opts  Options
	clk   clock.Clock
	log   *slog.Logger
	b     *broker.Broker
	hbKey []byte

	mu      sync.RWMutex
	held    map[uint64][]byte // leases this node holds and serves: top → lease record
	loading map[uint64]bool   // held, and still being loaded: not served yet
	healthy bool              // heartbeat renewed within LeaseTime·4/5
	leaving bool

	loopMu  sync.Mutex // one reconcile at a time
	peers   map[string]*peer
	hbCount uint64
	lastOK  time.Time
	paused  bool // test hook: heartbeat and reconcile stopped

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	stopWatch func()
	started   bool
	// resync asks the loop to re-read all shared metadata: the store's
	// notifications may have missed changes, or re-reading one failed.
	resync atomic.Bool
}

// New returns a node over st, the shared store. Give Node.Store to
// broker.Open.
func New(st store.Store, opts Options) (*Node, error) {
	if opts.LeaseTime == 0 {
		opts.LeaseTime = DefaultLeaseTime
	}
	if opts.LeaseTime < 100*time.Millisecond {
		return nil, fmt.Errorf("cluster: LeaseTime %v is below 100ms", opts.LeaseTime)
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	if opts.NodeID == "" {
		opts.NodeID = hex.EncodeToString(r[:6])
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Node{st: st, opts: opts, clk: opts.Clock, log: opts.Logger.With("node", opts.NodeID),
		hbKey: append(bytes.Clone(nodePrefix), opts.NodeID...), held: map[uint64][]byte{}, loading: map[uint64]bool{}, peers: map[string]*peer{},
		// A restarted node's first heartbeat differs from its last one.
		hbCount: binary.BigEndian.Uint64(r[:]) >> 1,
		wake:    make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.opts.NodeID }

// Store returns the fenced store the node's broker must use.
func (n *Node) Store() store.Store { return fenced{n} }

// Start serves: it takes this node's share of the entities (before it
// returns, so a single node serves at once) and keeps ownership current
// until Stop.
func (n *Node) Start(ctx context.Context, b *broker.Broker) error {
	n.b = b
	n.stopWatch = n.st.Watch(leasePre, func([]byte) { n.poke() })
	stopShared := make([]func(), 0, 3)
	for _, p := range broker.SharedPrefixes() {
		stopShared = append(stopShared, n.st.Watch(p, func(k []byte) {
			if k == nil {
				n.resync.Store(true) // changes may have been missed
			} else if err := b.Refresh(context.Background(), k); err != nil {
				n.log.Warn("re-reading shared metadata; all of it will be", "key", fmt.Sprintf("%q", k), "err", err)
				n.resync.Store(true)
			}
			n.poke()
		}))
	}
	stopCluster := n.stopWatch
	n.stopWatch = func() {
		stopCluster()
		for _, s := range stopShared {
			s()
		}
	}
	if err := n.reconcile(ctx, true); err != nil {
		n.stopWatch()
		return err
	}
	n.started = true
	go n.loop()
	return nil
}

// Sync brings ownership up to date now (after entities were created, say)
// instead of at the next tick.
func (n *Node) Sync(ctx context.Context) error {
	if n.b == nil {
		return nil // not started
	}
	return n.reconcile(ctx, false)
}

func (n *Node) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Node) loop() {
	defer close(n.done)
	tick := make(chan struct{}, 1)
	every := n.opts.LeaseTime / 5
	t := n.clk.AfterFunc(every, func() {
		select {
		case tick <- struct{}{}:
		default:
		}
	})
	defer t.Stop()
	for {
		beat := false
		select {
		case <-n.stop:
			return
		case <-tick:
			t.Reset(every)
			beat = true
		case <-n.wake:
		}
		if err := n.reconcile(context.Background(), beat); err != nil {
			n.log.Warn("cluster reconcile", "err", err)
		}
	}
}

// Owned returns the ids of the queues and topics this node serves: their
// leases are held and they are loaded.
func (n *Node) Owned() []uint64 { return n.heldIDs(false) }

// heldIDs returns the ids of the leases this node holds, with those still
// being loaded when loading is true.
func (n *Node) heldIDs(loading bool) []uint64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	ids := make([]uint64, 0, len(n.held))
	for id := range n.held {
		if loading || !n.loading[id] {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Healthy reports whether the node renewed its heartbeat recently enough to
// serve.
func (n *Node) Healthy() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.healthy
}

// reconcile renews the heartbeat (beat), observes the others, and takes,
// hands over or drops leases so that ownership follows the placement.
func (n *Node) reconcile(ctx context.Context, beat bool) error {
	n.loopMu.Lock()
	defer n.loopMu.Unlock()
	if n.paused {
		return nil
	}
	if beat {
		n.heartbeat(ctx)
	}
	if n.resync.Swap(false) {
		if err := n.b.Resync(ctx); err != nil {
			n.resync.Store(true) // again at the next beat
			n.log.Warn("re-reading all shared metadata", "err", err)
		}
	}
	now := n.clk.Now()
	if !n.lastOK.IsZero() && now.Sub(n.lastOK) > n.opts.LeaseTime*4/5 {
		n.expire()
	}
	leases, err := n.observe(ctx, now)
	if err != nil {
		return err
	}
	n.mu.RLock()
	healthy, leaving := n.healthy, n.leaving
	n.mu.RUnlock()
	if !healthy {
		return nil
	}
	targets := n.targets(now)
	tops := n.b.Tops()
	for _, top := range tops {
		l, hasLease := leases[top]
		n.mu.RLock()
		mine, held := n.held[top]
		n.mu.RUnlock()
		if held && (!hasLease || !bytes.Equal(l.raw, mine)) {
			// Taken over while this node was thought dead, or deleted.
			n.drop(top, "lease lost")
			held = false
		}
		want := place(top, targets)
		switch {
		case held && want != n.opts.NodeID && want != "":
			n.handOver(ctx, top, l, want)
		case held:
		case leaving:
		case hasLease && l.owner == n.opts.NodeID:
			n.acquire(ctx, top, l) // handed to this node, or a previous run's
		case want == n.opts.NodeID && (!hasLease || l.owner == "" || !n.alive(l.owner, now)):
			n.acquire(ctx, top, l)
		}
	}
	// Leases of entities that no longer exist.
	n.mu.RLock()
	var gone []uint64
	for top := range n.held {
		i := sort.Search(len(tops), func(i int) bool { return tops[i] >= top })
		if i == len(tops) || tops[i] != top {
			gone = append(gone, top)
		}
	}
	n.mu.RUnlock()
	for _, top := range gone {
		n.drop(top, "entity deleted")
	}
	return nil
}

// heartbeat bumps this node's record; success starting at t means no other
// node declares this one dead before t+LeaseTime.
func (n *Node) heartbeat(ctx context.Context) {
	start := n.clk.Now()
	state := byte(stateLive)
	n.mu.RLock()
	if n.leaving {
		state = stateLeaving
	}
	n.mu.RUnlock()
	var bt store.Batch
	bt.Set(n.hbKey, encodeHeartbeat(n.hbCount+1, state, n.opts.Address))
	cctx, cancel := context.WithTimeout(ctx, n.opts.LeaseTime/2)
	err := n.st.Commit(cctx, &bt)
	cancel()
	if err != nil {
		n.log.Warn("heartbeat failed", "err", err)
		return
	}
	n.hbCount++
	n.lastOK = start
	n.mu.Lock()
	if !n.healthy {
		n.log.Info("node serving")
	}
	n.healthy = true
	n.mu.Unlock()
}

// expire stops serving every entity: the heartbeat is too old for this
// node to be sure no other node has taken them.
func (n *Node) expire() {
	n.mu.Lock()
	was := n.healthy
	n.healthy = false
	tops := make([]uint64, 0, len(n.held))
	for top := range n.held {
		tops = append(tops, top)
	}
	n.mu.Unlock()
	if was {
		n.log.Warn("heartbeat not renewed within the lease time: this node stops serving", "entities", len(tops))
	}
	for _, top := range tops {
		n.drop(top, "heartbeat expired")
	}
}

// observe reads every heartbeat and lease, updating what this node has
// seen of the others.
func (n *Node) observe(ctx context.Context, now time.Time) (map[uint64]lease, error) {
	leases := map[uint64]lease{}
	seen := map[string]bool{}
	end := append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	err := n.st.Scan(ctx, prefix, end, func(k, v []byte) error {
		switch {
		case bytes.HasPrefix(k, nodePrefix):
			id := string(k[len(nodePrefix):])
			seen[id] = true
			p := n.peers[id]
			if p == nil || !bytes.Equal(p.value, v) {
				p = &peer{value: bytes.Clone(v), since: now}
				if len(v) >= 9 {
					p.state, p.address = v[8], string(v[9:])
				}
				n.peers[id] = p
			}
		case bytes.HasPrefix(k, leasePre) && len(k) == len(leasePre)+8:
			l, err := decodeLease(bytes.Clone(v))
			if err != nil {
				return err
			}
			leases[binary.BigEndian.Uint64(k[len(leasePre):])] = l
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id := range n.peers {
		if !seen[id] {
			delete(n.peers, id)
		}
	}
	return leases, nil
}

// alive reports whether node id has renewed its heartbeat within the lease
// time, as this node observed it.
func (n *Node) alive(id string, now time.Time) bool {
	if id == n.opts.NodeID {
		return true
	}
	p := n.peers[id]
	return p != nil && now.Sub(p.since) < n.opts.LeaseTime
}

// targets are the live nodes that take entities, sorted.
func (n *Node) targets(now time.Time) []string {
	var ts []string
	for id, p := range n.peers {
		if p.state == stateLive && n.alive(id, now) {
			ts = append(ts, id)
		}
	}
	sort.Strings(ts)
	return ts
}

// Place returns the node of nodes that the placement gives the queue or
// topic top to (when all of them are live and none is leaving).
func Place(top uint64, nodes []string) string { return place(top, nodes) }

// place returns the node that should own top: the highest rendezvous hash.
func place(top uint64, nodes []string) string {
	best, bestH := "", uint64(0)
	for _, id := range nodes {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		_ = binary.Write(h, binary.BigEndian, top)
		s := mix(h.Sum64())
		if best == "" || s > bestH {
			best, bestH = id, s
		}
	}
	return best
}

// mix is a finalizer (splitmix64) that spreads FNV's output evenly.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// acquire takes top's lease from l (the record read; raw nil: absent)
// with a higher epoch, then loads the entity.
func (n *Node) acquire(ctx context.Context, top uint64, l lease) {
	rec := encodeLease(l.epoch+1, n.opts.NodeID)
	var bt store.Batch
	bt.Require(leaseKey(top), l.raw)
	bt.Set(leaseKey(top), rec)
	if err := n.st.Commit(ctx, &bt); err != nil {
		if !errors.Is(err, store.ErrConditionFailed) {
			n.log.Warn("taking a lease", "entity", top, "err", err)
		}
		return
	}
	start := n.clk.Now()
	n.mu.Lock()
	n.held[top] = rec
	n.loading[top] = true
	n.mu.Unlock()
	err := n.b.Load(ctx, top)
	n.mu.Lock()
	delete(n.loading, top)
	if err != nil {
		delete(n.held, top)
	}
	n.mu.Unlock()
	if err != nil {
		n.log.Error("loading an entity taken over", "entity", top, "err", err)
		return
	}
	n.log.Info("entity taken", "entity", top, "epoch", l.epoch+1, "from", l.owner, "load", n.clk.Now().Sub(start))
}

// handOver stops serving top and passes its lease to node to.
func (n *Node) handOver(ctx context.Context, top uint64, l lease, to string) {
	n.drop(top, "handed over")
	var bt store.Batch
	bt.Require(leaseKey(top), l.raw)
	bt.Set(leaseKey(top), encodeLease(l.epoch+1, to))
	if err := n.st.Commit(ctx, &bt); err != nil {
		n.log.Warn("handing a lease over", "entity", top, "to", to, "err", err)
		return
	}
	n.log.Info("entity handed over", "entity", top, "to", to, "epoch", l.epoch+1)
}

// drop stops serving top; its lease record is left as it is.
func (n *Node) drop(top uint64, why string) {
	n.mu.Lock()
	_, held := n.held[top]
	delete(n.held, top)
	n.mu.Unlock()
	if held {
		n.b.Unload(top)
		n.log.Info("entity dropped", "entity", top, "why", why)
	}
}

// Stop hands every lease this node holds to the nodes the placement names
// without it (or releases it when no other node is live), removes the
// node's heartbeat and stops. Call it before closing the broker.
func (n *Node) Stop(ctx context.Context) error {
	if !n.started {
		return nil
	}
	n.mu.Lock()
	n.leaving = true
	n.mu.Unlock()
	close(n.stop)
	<-n.done
	n.stopWatch()
	n.loopMu.Lock()
	defer n.loopMu.Unlock()
	n.heartbeat(ctx) // announce leaving: no one places entities here now
	now := n.clk.Now()
	leases, err := n.observe(ctx, now)
	if err != nil {
		return err
	}
	var others []string
	for _, id := range n.targets(now) {
		if id != n.opts.NodeID {
			others = append(others, id)
		}
	}
	for _, top := range n.heldIDs(true) {
		l, ok := leases[top]
		if !ok {
			n.drop(top, "entity deleted")
			continue
		}
		n.handOver(ctx, top, l, place(top, others))
	}
	var bt store.Batch
	bt.Delete(n.hbKey)
	return n.st.Commit(ctx, &bt)
}

// Pause stops the node's heartbeat and ownership changes, as if its
// process were stopped, while its broker keeps running: for tests of what
// a node that lost its leases can still do.
func (n *Node) Pause() {
	n.loopMu.Lock()
	n.paused = true
	n.loopMu.Unlock()
}

// Resume undoes Pause.
func (n *Node) Resume() {
	n.loopMu.Lock()
	n.paused = false
	n.loopMu.Unlock()
	n.poke()
}

// fenced is the store the broker writes through: every batch that writes
// an entity's data requires that entity's lease to hold what this node
// acquired, and a batch that gives out an entity id requires the counter
// to hold the value before it.
type fenced struct{ n *Node }

func (f fenced) Commit(ctx context.Context, b *store.Batch) error {
	if err := f.n.fence(b); err != nil {
		return err
	}
	err := f.n.st.Commit(ctx, b)
	if !errors.Is(err, store.ErrConditionFailed) {
		return err
	}
	for _, c := range b.Conds {
		if bytes.Equal(c.Key, broker.IDCounterKey) {
			// Another node gave out the next id first: take its counter
			// (once the caller, which holds the broker's management lock,
			// has returned), so that its retry succeeds.
			go func() {
				if rerr := f.n.b.Refresh(context.Background(), broker.IDCounterKey); rerr != nil {
					f.n.log.Warn("re-reading the entity id counter", "err", rerr)
				}
			}()
			return fmt.Errorf("%w: another node created an entity at the same time; retry (%w)", broker.ErrNotOwned, err)
		}
	}
	f.n.poke() // perhaps a lease was lost: find out now
	return fmt.Errorf("%w (%w)", broker.ErrNotOwned, err)
}

func (f fenced) Get(ctx context.Context, key []byte) ([]byte, error) { return f.n.st.Get(ctx, key) }

func (f fenced) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	return f.n.st.GetMany(ctx, keys)
}

func (f fenced) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte) error) error {
	return f.n.st.Scan(ctx, start, end, fn)
}

func (f fenced) Watch(p []byte, fn func(key []byte)) (stop func()) { return f.n.st.Watch(p, fn) }
func (f fenced) Stats() store.Stats                                { return f.n.st.Stats() }

// Close does nothing: the node's owner closes the shared store.
func (f fenced) Close() error { return nil }

// fence adds b's ownership conditions, or refuses b when this node does
// not hold a lease it needs.
func (n *Node) fence(b *store.Batch) error {
	if b == nil {
		return nil
	}
	deleting := map[uint64]bool{}
	for _, op := range b.Ops {
		if op.Kind == store.OpDelete && broker.IsEntityRecord(op.Key) {
			deleting[binary.BigEndian.Uint64(op.Key[1:])] = true
		}
	}
	var tops []uint64
	var counter []byte
	for _, op := range b.Ops {
		class, id := broker.ClassifyKey(op.Key)
		switch {
		case class == broker.KeyShared && id == 0 && op.Kind == store.OpSet:
			counter = op.Joined()
		case class == broker.KeyEntityData && !deleting[id]:
			top, ok := n.b.TopOf(id)
			if !ok {
				return fmt.Errorf("%w: entity %d is unknown to this node", broker.ErrNotOwned, id)
			}
			if !containsID(tops, top) {
				tops = append(tops, top)
			}
		}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, top := range tops {
		rec, ok := n.held[top]
		if !ok || !n.healthy {
			return fmt.Errorf("%w: this node does not hold the lease of entity %d", broker.ErrNotOwned, top)
		}
		b.Require(leaseKey(top), rec)
	}
	for id := range deleting {
		if top, ok := n.b.TopOf(id); ok && top == id {
			b.Delete(leaseKey(id))
		}
	}
	if counter != nil {
		next, err := broker.DecodeCounter(counter)
		if err != nil {
			return err
		}
		var prev []byte // the first id (1) is given while the counter is absent
		if next > 2 {
			prev = broker.EncodeCounter(next - 1)
		}
		b.Require(broker.IDCounterKey, prev)
	}
	return nil
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// OwnerAddress returns the advertised address of the node holding the lease
// of the queue or topic top (an id of this node's broker): two point reads.
// It fails with broker.ErrNotOwned while the entity has no live owner other
// than this node.
func (n *Node) OwnerAddress(ctx context.Context, top uint64) (string, error) {
	v, err := n.st.Get(ctx, leaseKey(top))
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: entity %d has no owner yet", broker.ErrNotOwned, top)
	}
	if err != nil {
		return "", err
	}
	l, err := decodeLease(v)
	if err != nil {
		return "", err
	}
	if l.owner == "" || l.owner == n.opts.NodeID {
		return "", fmt.Errorf("%w: entity %d is between owners", broker.ErrNotOwned, top)
	}
	hb, err := n.st.Get(ctx, append(bytes.Clone(nodePrefix), l.owner...))
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(hb) <= 9) {
		return "", fmt.Errorf("%w: the owner of entity %d, %s, is gone", broker.ErrNotOwned, top, l.owner)
	}
	if err != nil {
		return "", err
	}
	return string(hb[9:]), nil
}

// Owner returns the id and advertised address of the node that holds the
// lease of the queue or topic named name, read from st (the shared
// store): what a client-side router or an operator needs. An entity
// between owners has none (found false).
func Owner(ctx context.Context, st store.Store, name string) (node, address string, found bool, err error) {
	node, _, err = LeaseOf(ctx, st, name)
	if err != nil || node == "" {
		return "", "", false, err
	}
	hb, err := st.Get(ctx, append(bytes.Clone(nodePrefix), node...))
	if errors.Is(err, store.ErrNotFound) {
		return node, "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	if len(hb) < 9 {
		return "", "", false, fmt.Errorf("cluster: heartbeat record of %d bytes", len(hb))
	}
	return node, string(hb[9:]), true, nil
}

// LeaseOf returns the holder and epoch of the lease of the queue or topic
// named name, read from st; node is empty when no node holds it. Every
// new lease of an entity has a higher epoch, so two reads with one epoch
// saw one unbroken lease.
func LeaseOf(ctx context.Context, st store.Store, name string) (node string, epoch uint64, err error) {
	tops, err := broker.ReadTops(ctx, st)
	if err != nil {
		return "", 0, err
	}
	top, ok := tops[broker.FoldName(name)]
	if !ok {
		return "", 0, fmt.Errorf("%w: no queue or topic named %q", broker.ErrNotFound, name)
	}
	v, err := st.Get(ctx, leaseKey(top))
	if errors.Is(err, store.ErrNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	l, err := decodeLease(v)
	if err != nil {
		return "", 0, err
	}
	return l.owner, l.epoch, nil
}
