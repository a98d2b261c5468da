package broker

// A model-based test: seeded random sequences of broker operations run
// against a broker over memstore with a fake clock and, side by side,
// against a small reference model of where every message is.
//
// The namespace: a queue with duplicate detection, a short TTL and
// dead-lettering on expiry (mq); a session queue (ms); a topic (mt) with an
// unfiltered subscription and one filtered on Subject. The operations:
// send and schedule batches (some with an invalid message: the whole batch
// is refused), cancel scheduled messages, receive (peek-lock and
// receive-and-delete) with short-lived consumers, keep long-lived consumers
// with credit (they must get every message that becomes available), accept
// sessions by name or next (also waiting, with a timeout), set and read
// session state, renew session and message locks, complete / abandon /
// defer / dead-letter with one or several tokens (valid, expired, random,
// of another queue, repeated: a bad one means nothing changes), receive
// deferred messages, delete and purge, advance the clock (lock and session
// lock expiry, TTL, scheduled activation, acceptors timing out, run one
// deadline instant at a time), and restart (locks vanish, everything else
// survives). Now and then the store commit of a send, schedule, cancel,
// settlement, session state, receive of deferred messages, deletion of
// messages or entity update is made to fail (faultStore): the operation must return the failure and
// change nothing.
//
// After every step and every deadline instant the broker's observable
// state (Peek of every subqueue with state, delivery count, expiry,
// properties and sequence order; runtime counts of queues, subscriptions
// and the topic; the session list and states) must equal the model's, and
// checkInvariants must pass. The model learns sequence numbers from the
// broker and checks that every new one is above all seen before. A failure
// prints the seed and the last operations; it replays exactly.
//
// go test -run TestModel ./broker runs a short campaign (24 seeds × 120
// steps, about 2 s of CPU under -race); longer ones:
//
//	BUSBAR_MODEL_STEPS=2000 BUSBAR_MODEL_SEEDS=100 go test -timeout 60m -run 'TestModel$' ./broker
//	BUSBAR_MODEL_SEED=17 go test -run 'TestModel$' ./broker   # replay one seed
//
// The focused tests at the end of this file are the broker bugs the model
// found, kept as regression tests; the generator still produces their
// operations.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

var bg = context.Background()

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

func TestModel(t *testing.T) {
	seeds := envInt(t, "BUSBAR_MODEL_SEEDS", 24)
	steps := envInt(t, "BUSBAR_MODEL_STEPS", 120)
	first := 1
	if s := os.Getenv("BUSBAR_MODEL_SEED"); s != "" {
		first, seeds = envInt(t, "BUSBAR_MODEL_SEED", 1), 1
	}
	tally := map[string]int{}
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newModelRun(t, uint64(seed))
			r.replay = fmt.Sprintf("BUSBAR_MODEL_SEED=%d BUSBAR_MODEL_STEPS=%d", seed, steps)
			for r.step = 1; r.step <= steps; r.step++ {
				// Steps happen at distinct instants, so that locks taken by
				// different steps never expire at the same one.
				r.advance(r.jitter()/1000 + 1)
				r.randomOp()
				r.dispatch()
				r.verify()
			}
			for k, n := range r.tally {
				tally[k] += n
			}
		})
	}
	if testing.Verbose() {
		t.Logf("operations and model events over %d seeds × %d steps: %v", seeds, steps, tally)
	}
}

// mMsg is the model of one message.
type mMsg struct {
	id      string // the model's key: the body is id + ":" + padding
	n       int    // creation order
	msgID   string // MessageID: id, or an earlier message's (duplicate detection)
	body    string
	ent     *mEnt
	sub     Subqueue
	state   MessageState
	deliv   uint32
	seq     int64 // 0 until learned
	session string
	subject string
	rawTTL  time.Duration // the TimeToLive sent
	ttl     time.Duration // effective TTL (InfiniteTTL: none)
	expires int64         // 0: never
	sched   int64         // scheduled enqueue time (scheduled messages)
	k       string        // application property "k" ("" = absent)
	reason  string        // DeadLetterReason ("" = absent)
	dlFrom  string        // DeadLetterSource: where a forwarded dead letter was dead-lettered

	token       LockToken
	lockedUntil int64 // 0: unlocked
	sc          *mSC  // the session consumer holding the lock; nil for a plain lock
}

func (m *mMsg) locked() bool { return m.lockedUntil != 0 }

// available reports whether a receiver could get m now.
func (m *mMsg) available() bool { return m.state == StateActive && !m.locked() }

// mEnt is the model of one queue, subscription or topic (a topic holds
// only its scheduled messages).
type mEnt struct {
	name     string // its path
	kind     entityKind
	subs     []*mEnt // topic: its subscriptions
	subject  string  // subscription: receives only messages with this Subject ("" = all)
	fwdDL    *mEnt   // ForwardDeadLetteredMessagesTo
	status   EntityStatus
	sessions bool
	lockDur  time.Duration
	maxDeliv uint32
	defTTL   time.Duration
	dlOnExp  bool
	dupWin   time.Duration    // duplicate detection window; 0: off
	seen     map[string]int64 // duplicate detection: MessageID → when accepted
	msgs     map[string]*mMsg
	maxSeq   int64 // the highest sequence number seen
	baseSeq  int64 // maxSeq at the last verify: new messages must be above it
	sess     map[string]*mSess
}

func (e *mEnt) canReceive() bool { return e.status != StatusReceiveDisabled }
func (e *mEnt) canSend() bool    { return e.status != StatusSendDisabled }

// mSess is the model of one session of a session queue.
type mSess struct {
	id          string
	state       []byte
	owner       *mSC
	lockedUntil int64
}

// mSC is a session consumer.
type mSC struct {
	c      *Consumer
	sink   *sink
	ent    *mEnt
	s      *mSess
	credit int
}

// mLL is a long-lived non-session consumer, left with credit between
// steps: the broker must hand it every message that becomes available.
type mLL struct {
	c      *Consumer
	sink   *sink
	ent    *mEnt
	sub    Subqueue
	credit int
}

func (ll *mLL) path() string { return ll.ent.name + ll.sub.String() }

// mWaiter is an AcceptNextSession call blocked in its own goroutine.
type mWaiter struct {
	res      chan acceptResult
	sink     *sink
	deadline int64
}

// outcome returns the waiter's result, which the broker has already
// decided: the goroutine only has to pass it on.
func (r *modelRun) outcome(w *mWaiter) acceptResult {
	var res acceptResult
	if !poll.Wait(0, func() bool {
		select {
		case res = <-w.res:
			return true
		default:
			return false
		}
	}) {
		r.failf("a waiting AcceptNextSession did not return")
	}
	return res
}

type modelRun struct {
	window     int   // Options.PageWindow of this seed
	cacheBytes int64 // Options.CacheBytes of this seed (0: the default)
	t          *testing.T
	seed       uint64
	rng        *rand.Rand
	st         *memstore.Store
	fs         *faultStore // st, failing a commit when an operation is picked to fail
	clk        *clock.Fake
	b          *Broker
	opens      int
	step       int

	ents   []*mEnt // queues and subscriptions: what receivers read
	topic  *mEnt
	nextID int
	stale  []LockToken // tokens whose lock ended
	open   []*mSC      // session consumers holding their session
	lls    []*mLL      // long-lived consumers, at most one per subqueue
	waits  []*mWaiter  // AcceptNextSession calls waiting for a session, oldest first
	log    []string
	tally  map[string]int // what happened, for -v
	replay string         // the environment that replays this run
}

func newModelRun(t *testing.T, seed uint64) *modelRun {
	r := &modelRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), st: memstore.New(), clk: clock.NewFake(t0), tally: map[string]int{}}
	// Seeds alternate between keeping everything in memory and paging
	// with windows small enough that most steps cross one; every other
	// pair caches no message bodies, so that deliveries, settlements and
	// deferred receives read them from the store.
	r.window = []int{-1, 1, 2, 3}[seed%4]
	if seed/4%2 == 1 {
		r.cacheBytes = 1
	}
	r.openBroker()
	r.ents = []*mEnt{
		{name: "mq", lockDur: 30 * time.Second, maxDeliv: 3, defTTL: 5 * time.Minute, dlOnExp: true, dupWin: 2 * time.Minute},
		{name: "ms", sessions: true, lockDur: 20 * time.Second, maxDeliv: 4, defTTL: InfiniteTTL},
		{name: "mdl", lockDur: 30 * time.Second, maxDeliv: 10, defTTL: InfiniteTTL}, // gets the dead letters of mt/Subscriptions/all
		{name: "mt/Subscriptions/all", kind: kindSubscription, lockDur: 25 * time.Second, maxDeliv: 2, defTTL: 4 * time.Minute, dlOnExp: true},
		{name: "mt/Subscriptions/x", kind: kindSubscription, subject: "x", lockDur: 15 * time.Second, maxDeliv: 5, defTTL: InfiniteTTL, dlOnExp: true},
	}
	r.ents[3].fwdDL = r.ents[2]
	if r.window > 0 {
		// A cold message expires when it is paged in, as Service Bus
		// expires messages when a receiver reaches them (pager.go), not
		// at its TTL as this model says: paging seeds send no TTLs to
		// entities without sessions (TestPagedExpiry covers them).
		for _, e := range r.ents {
			if !e.sessions {
				e.defTTL = InfiniteTTL
			}
		}
	}
	r.topic = &mEnt{name: "mt", kind: kindTopic, defTTL: InfiniteTTL, subs: r.ents[3:]}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.b.CreateTopic(bg, r.topic.name, TopicProperties{MaxMessageSizeInKilobytes: 1}))
	for _, e := range append(r.ents, r.topic) {
		e.msgs, e.sess, e.seen = map[string]*mMsg{}, map[string]*mSess{}, map[string]int64{}
		if e.kind == 0 {
			e.kind = kindQueue
		}
		switch e.kind {
		case kindQueue:
			must(r.b.CreateQueue(bg, e.name, QueueProperties{LockDuration: e.lockDur, MaxDeliveryCount: int32(e.maxDeliv),
				DefaultMessageTimeToLive: e.defTTL, DeadLetteringOnMessageExpiration: e.dlOnExp, RequiresSession: e.sessions,
				RequiresDuplicateDetection: e.dupWin != 0, DuplicateDetectionHistoryTimeWindow: e.dupWin,
				MaxMessageSizeInKilobytes: 1}))
		case kindSubscription:
			sp := SubscriptionProperties{LockDuration: e.lockDur, MaxDeliveryCount: int32(e.maxDeliv),
				DefaultMessageTimeToLive: e.defTTL, DeadLetteringOnMessageExpiration: e.dlOnExp}
			if e.fwdDL != nil {
				sp.ForwardDeadLetteredMessagesTo = e.fwdDL.name
			}
			if e.subject != "" {
				sp.DefaultRule = &RuleProperties{Name: "subject", Filter: RuleFilter{Kind: FilterCorrelation,
					Correlation: CorrelationFilter{Subject: e.subject}}}
			}
			topic, name, _ := strings.Cut(e.name, "/Subscriptions/")
			must(r.b.CreateSubscription(bg, topic, name, sp))
		}
	}
	return r
}

// target returns where a send goes: a queue or the topic.
func (r *modelRun) target() *mEnt {
	if r.chance(0.3) {
		return r.topic
	}
	return r.ents[r.pick(2)]
}

// fanout copies a topic message that becomes active now to the
// subscriptions whose filter matches it.
func (r *modelRun) fanout(m *mMsg) {
	for _, s := range r.topic.subs {
		if s.subject != "" && s.subject != m.subject {
			continue
		}
		c := *m
		c.ent, c.seq, c.state, c.sched = s, 0, StateActive, 0
		c.ttl = effTTL(m.rawTTL, s.defTTL)
		c.expires = r.expiryFrom(r.now(), c.ttl)
		s.msgs[c.id] = &c
	}
}

func effTTL(ttl, def time.Duration) time.Duration {
	if ttl <= 0 || ttl > def {
		return def
	}
	return ttl
}

func (r *modelRun) openBroker() {
	r.opens++
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], r.seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(r.opens))
	r.fs = &faultStore{Store: r.st}
	b, err := Open(bg, r.fs, Options{Clock: r.clk, Rand: seededRand{rand.NewChaCha8(key)}, Logger: slog.New(slog.DiscardHandler), PageWindow: r.window, CacheBytes: r.cacheBytes})
	if err != nil {
		r.t.Fatalf("seed %d: Open: %v", r.seed, err)
	}
	r.b = b
	r.t.Cleanup(func() { b.Close() })
}

func (r *modelRun) now() int64 { return r.clk.Now().UnixNano() }

// faultStore fails the next commit while armed: the model's fault
// injection.
type faultStore struct {
	*memstore.Store
	armed atomic.Bool
}

var errCommitInjected = errors.New("injected commit failure")

func (f *faultStore) Commit(ctx context.Context, b *store.Batch) error {
	if f.armed.CompareAndSwap(true, false) {
		return errCommitInjected
	}
	return f.Store.Commit(ctx, b)
}

// pFault is how often an operation's commit is made to fail.
const pFault = 0.06

// faulty arms, now and then, a failure of the next store commit; after the
// operation, failed reports whether that commit failed. The operation must
// then have returned that failure and changed nothing: its caller leaves
// the model as it was, and the step's verify compares.
func (r *modelRun) faulty() (failed func(op string, err error) bool) {
	if !r.chance(pFault) {
		return func(string, error) bool { return false }
	}
	r.fs.armed.Store(true)
	return func(op string, err error) bool {
		if r.fs.armed.Swap(false) {
			return false // the operation committed nothing
		}
		r.logf("  (its commit failed)")
		if !errors.Is(err, errCommitInjected) {
			r.failf("%s: its commit failed, yet it returned %v", op, err)
		}
		r.tally[op+": commit failed"]++
		return true
	}
}

// logf records an operation for the failure report.
func (r *modelRun) logf(format string, args ...any) {
	if strings.HasPrefix(format, "model: ") {
		var words []string
		for _, w := range strings.Fields(format)[1:] {
			if !strings.Contains(w, "%") {
				words = append(words, w)
			}
		}
		r.tally["event: "+strings.Join(words, " ")]++
	}
	r.log = append(r.log, fmt.Sprintf("%d @%v: ", r.step, time.Duration(r.now()-t0.UnixNano()))+fmt.Sprintf(format, args...))
}

func (r *modelRun) failf(format string, args ...any) {
	r.t.Helper()
	from := max(0, len(r.log)-40)
	r.t.Fatalf("seed %d, step %d: %s\nlast operations:\n  %s\n(replay: %s go test -run 'TestModel$' ./broker)",
		r.seed, r.step, fmt.Sprintf(format, args...), strings.Join(r.log[from:], "\n  "), r.replay)
}

// wantErr checks an operation's error against the model's expectation
// (nil: success).
func (r *modelRun) wantErr(op string, got, want error) {
	r.t.Helper()
	if want == nil {
		r.tally[op+": ok"]++
	} else {
		r.tally[fmt.Sprintf("%s: %v", op, want)]++
	}
	switch {
	case want == nil && got != nil:
		r.failf("%s: unexpected error %v", op, got)
	case want != nil && !errors.Is(got, want):
		r.failf("%s: error %v, want %v", op, got, want)
	}
}

func (r *modelRun) pick(n int) int        { return r.rng.IntN(n) }
func (r *modelRun) chance(p float64) bool { return r.rng.Float64() < p }

// subqueue picks the dead-letter subqueue of e with probability pDL, else
// its main one (for a session queue, only when sessionMain: receivers need
// a session there), and returns it with its path.
func (r *modelRun) subqueue(e *mEnt, pDL float64, sessionMain bool) (Subqueue, string) {
	sub := SubqueueMain
	if (e.sessions && !sessionMain) || r.chance(pDL) {
		sub = SubqueueDeadLetter
	}
	return sub, e.name + sub.String()
}

// jitter is a random sub-millisecond duration added to every time the
// test picks, so that deadlines of different owners (a lock in one queue,
// an activation in a topic) practically never fall on the same instant,
// where the broker may run them in either order.
func (r *modelRun) jitter() time.Duration { return time.Duration(r.pick(1_000_000)) }

func (r *modelRun) ent() *mEnt { return r.ents[r.pick(len(r.ents))] }

// lockingEnt returns, mostly, a queue with locked messages.
func (r *modelRun) lockingEnt() *mEnt {
	var with []*mEnt
	for _, e := range r.ents {
		if len(lockedIn(e)) > 0 {
			with = append(with, e)
		}
	}
	if len(with) > 0 && r.chance(0.9) {
		return with[r.pick(len(with))]
	}
	return r.ent()
}

// ---- model transitions ----

func (r *modelRun) unlock(m *mMsg) {
	if !m.locked() {
		return
	}
	r.stale = append(r.stale, m.token)
	if len(r.stale) > 64 {
		r.stale = r.stale[1:]
	}
	m.token, m.lockedUntil, m.sc = LockToken{}, 0, nil
}

func (r *modelRun) drop(m *mMsg) {
	r.unlock(m)
	delete(m.ent.msgs, m.id)
}

func (r *modelRun) deadLetter(m *mMsg, reason string) {
	r.unlock(m)
	m.sub, m.state = SubqueueDeadLetter, StateActive
	if reason != "" {
		m.reason = reason
	}
	if to := m.ent.fwdDL; to != nil {
		// Forwarded: a new message of the target queue, from the
		// dead-lettered content, with a count and a TTL of its own.
		delete(m.ent.msgs, m.id)
		c := *m
		c.ent, c.sub, c.deliv, c.seq, c.sched, c.session = to, SubqueueMain, 0, 0, 0, ""
		c.ttl = effTTL(m.rawTTL, to.defTTL)
		c.expires = r.expiryFrom(r.now(), c.ttl)
		c.dlFrom = m.ent.name
		to.msgs[c.id] = &c
		r.tally["dead letters forwarded"]++
	}
}

func (r *modelRun) expire(m *mMsg) {
	if m.ent.dlOnExp {
		r.deadLetter(m, ReasonTTLExpired)
	} else {
		r.drop(m)
	}
}

// failed is a delivery that ended without settlement (abandon, lock
// expiry): the broker's delivery-count rules.
func (r *modelRun) failed(m *mMsg, k string, count bool) {
	d := m.deliv
	if m.sub == SubqueueMain && count {
		d++
	}
	r.unlock(m)
	if k != "" {
		m.k = k
	}
	m.deliv = d
	switch {
	case m.sub == SubqueueMain && d >= m.ent.maxDeliv:
		r.deadLetter(m, ReasonMaxDeliveryCountExceeded)
	case m.sub == SubqueueMain && m.state == StateActive && m.expires != 0 && m.expires <= r.now():
		r.expire(m)
	}
}

// releaseSession ends sc's hold on its session.
func (r *modelRun) releaseSession(sc *mSC, expired bool) {
	for _, m := range sortedMsgs(sc.ent, func(m *mMsg) bool { return m.sc == sc }) {
		if expired {
			r.failed(m, "", true)
		} else {
			r.unlock(m)
		}
	}
	sc.s.owner, sc.s.lockedUntil = nil, 0
	r.open = slices.DeleteFunc(r.open, func(x *mSC) bool { return x == sc })
}

// sortedMsgs returns e's messages matching f by sequence number (unknown
// sequence numbers last, by id).
func sortedMsgs(e *mEnt, f func(*mMsg) bool) []*mMsg {
	var out []*mMsg
	for _, m := range e.msgs {
		if f(m) {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.seq == 0) != (b.seq == 0) {
			return b.seq == 0
		}
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.n < b.n
	})
	return out
}

func (r *modelRun) expiryFrom(base int64, ttl time.Duration) int64 {
	if ttl >= InfiniteTTL {
		return 0
	}
	return base + int64(ttl)
}

// nextEvent returns the earliest time something happens by itself.
func (r *modelRun) nextEvent() (int64, bool) {
	var t int64
	ok := false
	at := func(x int64) {
		if !ok || x < t {
			t, ok = x, true
		}
	}
	for _, e := range r.all() {
		for _, m := range e.msgs {
			switch {
			case m.locked() && m.sc == nil:
				at(m.lockedUntil)
			case m.state == StateScheduled:
				at(m.sched)
			case m.available() && m.sub == SubqueueMain && m.expires != 0:
				at(m.expires)
			}
		}
		for _, s := range e.sess {
			if s.owner != nil {
				at(s.lockedUntil)
			}
		}
	}
	for _, w := range r.waits {
		at(w.deadline)
	}
	return t, ok
}

// all returns the queues, the subscriptions and the topic.
func (r *modelRun) all() []*mEnt { return append(slices.Clip(r.ents), r.topic) }

// fireEvents applies everything due at or before now.
func (r *modelRun) fireEvents() {
	now := r.now()
	for _, e := range r.all() {
		for _, s := range sortedSessions(e) {
			if s.owner != nil && s.lockedUntil <= now {
				r.logf("model: session %s/%s lock expires", e.name, s.id)
				r.releaseSession(s.owner, true)
			}
		}
		for _, m := range sortedMsgs(e, func(*mMsg) bool { return true }) {
			switch {
			case m.locked() && m.sc == nil && m.lockedUntil <= now:
				r.logf("model: lock of %s expires", m.id)
				r.failed(m, "", true)
			case m.state == StateScheduled && m.sched <= now && e.kind == kindTopic:
				r.logf("model: %s activates in the topic", m.id)
				delete(e.msgs, m.id)
				r.fanout(m)
			case m.state == StateScheduled && m.sched <= now:
				r.logf("model: %s activates", m.id)
				m.state, m.seq = StateActive, 0 // a new sequence number, learned by verify
				m.expires = r.expiryFrom(now, m.ttl)
			}
		}
		for _, m := range sortedMsgs(e, func(*mMsg) bool { return true }) {
			if m.available() && m.sub == SubqueueMain && m.expires != 0 && m.expires <= now {
				r.logf("model: %s expires", m.id)
				r.expire(m)
			}
		}
	}
}

func sortedSessions(e *mEnt) []*mSess {
	out := slices.Collect(maps.Values(e.sess))
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (e *mEnt) session(id string) *mSess {
	s := e.sess[id]
	if s == nil {
		s = &mSess{id: id}
		e.sess[id] = s
	}
	return s
}

// ---- operations ----

func (r *modelRun) randomOp() {
	type op struct {
		w  int
		fn func()
	}
	ops := []op{
		{16, r.opSend},
		{4, r.opSchedule},
		{3, r.opCancel},
		{16, r.opReceive},
		{5, r.opAccept},
		{12, r.opSessionReceive},
		{6, r.opLongLived},
		{3, r.opSessionClose},
		{3, r.opSessionState},
		{3, r.opSessionRenew},
		{12, r.opSettle},
		{4, r.opRenew},
		{5, r.opReceiveDeferred},
		{10, r.opAdvance},
		{2, r.opRestart},
		{2, r.opPurge},
		{2, r.opUpdate},
	}
	total := 0
	for _, o := range ops {
		total += o.w
	}
	n := r.pick(total)
	for _, o := range ops {
		if n < o.w {
			o.fn()
			return
		}
		n -= o.w
	}
}

var sessionIDs = []string{"a", "b", "c", "d"}

// newMsg makes a valid message for e and its model (not yet added).
func (r *modelRun) newMsg(e *mEnt) (*Message, *mMsg) {
	r.nextID++
	id := fmt.Sprintf("m%d", r.nextID)
	body := id + ":" + strings.Repeat("x", r.pick(40))
	msg := &Message{MessageID: id, Body: []byte(body)}
	mm := &mMsg{id: id, n: r.nextID, msgID: id, body: body, ent: e}
	if e.dupWin != 0 && len(e.seen) > 0 && r.chance(0.15) {
		// An id sent before: a duplicate while within the window.
		seen := slices.Sorted(maps.Keys(e.seen))
		mm.msgID = seen[r.pick(len(seen))]
		msg.MessageID = mm.msgID
	}
	if e.sessions {
		msg.SessionID = sessionIDs[r.pick(len(sessionIDs))]
		mm.session = msg.SessionID
	}
	if e.kind == kindTopic && r.chance(0.5) {
		msg.Subject, mm.subject = "x", "x"
	}
	if r.chance(0.4) && (r.window < 0 || e.sessions) {
		msg.TimeToLive = time.Duration(5+r.pick(180))*time.Second + r.jitter()
	}
	mm.rawTTL = msg.TimeToLive
	mm.ttl = effTTL(msg.TimeToLive, e.defTTL)
	return msg, mm
}

// invalidMsg makes a message Send must refuse, and says why.
func (r *modelRun) invalidMsg(e *mEnt) (*Message, string, error) {
	msg, _ := r.newMsg(e)
	switch k := r.pick(4); {
	case k == 0:
		msg.TimeToLive = -time.Second
		return msg, "negative TTL", ErrInvalidArgument
	case k == 1:
		msg.Body = make([]byte, 1025)
		return msg, "body too large", ErrMessageSizeExceeded
	case k == 2 && e.sessions:
		msg.SessionID = ""
		return msg, "no session id", ErrSessionRequired
	default:
		msg.MessageID = strings.Repeat("i", MaxIDLength+1)
		return msg, "message id too long", ErrInvalidArgument
	}
}

// place adds sent messages to the model: active now or scheduled at sched,
// or dropped as duplicates. It returns the messages kept.
func (r *modelRun) place(ms []*mMsg, sched int64) []*mMsg {
	now := r.now()
	var kept []*mMsg
	for _, m := range ms {
		if e := m.ent; e.dupWin != 0 {
			if at, ok := e.seen[m.msgID]; ok && now-at < int64(e.dupWin) {
				r.logf("model: %s is a duplicate of MessageID %s", m.id, m.msgID)
				continue
			}
			e.seen[m.msgID] = now
		}
		kept = append(kept, m)
		if m.ent.kind == kindTopic && sched <= now {
			r.fanout(m)
			continue
		}
		if sched > now {
			m.state, m.sched = StateScheduled, sched
			m.expires = r.expiryFrom(sched, m.ttl)
		} else {
			m.expires = r.expiryFrom(now, m.ttl)
		}
		m.ent.msgs[m.id] = m
		if m.ent.sessions {
			m.ent.session(m.session)
		}
	}
	return kept
}

// batch makes 1-3 messages, one of them invalid with probability 0.12.
func (r *modelRun) batch(e *mEnt) ([]*Message, []*mMsg, string, error) {
	n := 1 + r.pick(3)
	var msgs []*Message
	var model []*mMsg
	for range n {
		msg, mm := r.newMsg(e)
		msgs, model = append(msgs, msg), append(model, mm)
	}
	why := ""
	var want error
	if r.chance(0.12) {
		bad, w, err := r.invalidMsg(e)
		i := r.pick(n + 1)
		msgs = slices.Insert(msgs, i, bad)
		why, want = fmt.Sprintf("message %d invalid (%s)", i, w), err
	}
	return msgs, model, why, want
}

// refused checks the outcome of a batch the model expects refused (why is
// not empty) and reports whether it was one; verify then checks that
// nothing changed.
func (r *modelRun) refused(op, why string, got, want error) bool {
	if why == "" {
		return false
	}
	if !errors.Is(got, want) {
		r.failf("%s with %s: error %v, want %v", op, why, got, want)
	}
	r.tally[op+": invalid batch refused"]++
	return true
}

// later returns a time to schedule at.
func (r *modelRun) later() time.Time {
	return r.clk.Now().Add(time.Duration(1+r.pick(120))*time.Second + r.jitter())
}

func ids(ms []*mMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.id
	}
	return out
}

func (r *modelRun) opSend() {
	e := r.target()
	msgs, model, why, want := r.batch(e)
	if !e.canSend() {
		why, want = "sends disabled", ErrEntityDisabled
	}
	var sched int64
	if r.chance(0.15) {
		at := r.later()
		for _, m := range msgs {
			m.ScheduledEnqueueTime = at
		}
		sched = at.UnixNano()
	}
	r.logf("Send %s %v sched=%v %s", e.name, ids(model), sched != 0, why)
	failed := r.faulty()
	err := r.b.Send(bg, e.name, msgs)
	if failed("Send", err) || r.refused("Send", why, err, want) {
		return
	}
	r.wantErr("Send", err, nil)
	r.place(model, sched)
}

func (r *modelRun) opSchedule() {
	e := r.target()
	msgs, model, why, want := r.batch(e)
	if !e.canSend() {
		why, want = "sends disabled", ErrEntityDisabled
	}
	at := r.later()
	if r.chance(0.05) {
		at, why, want = time.Time{}, "zero schedule time", ErrInvalidArgument
	}
	r.logf("Schedule %s %v %s", e.name, ids(model), why)
	failed := r.faulty()
	seqs, err := r.b.Schedule(bg, e.name, at, msgs)
	if failed("Schedule", err) || r.refused("Schedule", why, err, want) {
		return
	}
	r.wantErr("Schedule", err, nil)
	if len(seqs) != len(model) {
		r.failf("Schedule returned %d sequence numbers for %d messages", len(seqs), len(model))
	}
	kept := r.place(model, at.UnixNano())
	for i, m := range model {
		if !slices.Contains(kept, m) {
			if seqs[i] != 0 {
				r.failf("Schedule gave duplicate %s sequence number %d, want 0", m.id, seqs[i])
			}
			continue
		}
		r.learn(m, seqs[i])
	}
}

// learn records the sequence number the broker gave m.
func (r *modelRun) learn(m *mMsg, seq int64) {
	e := m.ent
	if seq <= e.baseSeq {
		r.failf("%s got sequence number %d, not above %d, the highest seen in %s before", m.id, seq, e.baseSeq, e.name)
	}
	for _, x := range e.msgs {
		if x != m && x.seq == seq {
			r.failf("%s got sequence number %d, which %s has in %s", m.id, seq, x.id, e.name)
		}
	}
	m.seq = seq
	e.maxSeq = max(e.maxSeq, seq)
}

func (r *modelRun) opCancel() {
	e := r.target()
	// A topic's scheduled messages sent by Send are not peekable: their
	// sequence numbers stay unknown.
	sched := sortedMsgs(e, func(m *mMsg) bool { return m.state == StateScheduled && m.seq != 0 })
	var seqs []int64
	var hit []*mMsg
	for _, m := range sched {
		if r.chance(0.5) {
			seqs, hit = append(seqs, m.seq), append(hit, m)
		}
	}
	bad := len(seqs) == 0 || r.chance(0.15)
	if bad {
		others := sortedMsgs(e, func(m *mMsg) bool { return m.state != StateScheduled && m.seq != 0 })
		if len(others) > 0 && r.chance(0.5) {
			seqs = append(seqs, others[r.pick(len(others))].seq)
		} else {
			seqs = append(seqs, e.maxSeq+1000)
		}
		r.rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	}
	r.logf("CancelScheduled %s %v (bad %v)", e.name, seqs, bad)
	failed := r.faulty()
	err := r.b.CancelScheduled(bg, e.name, seqs)
	if failed("CancelScheduled", err) {
		return
	}
	if bad {
		r.wantErr("CancelScheduled", err, ErrMessageNotFound)
		return
	}
	r.wantErr("CancelScheduled", err, nil)
	for _, m := range hit {
		r.drop(m)
	}
}

// deliverable returns what a receiver of e's subqueue sub (and session s,
// for session queues) gets for credit n, expiring the due messages it
// passes, as dispatch does.
//
// Messages whose sequence number the model has not learned yet (sent or
// activated in this step) come last, in creation order; as activations due
// at the same instant may take their numbers in any order, any of them
// (pool) may stand in for another.
func (r *modelRun) deliverable(e *mEnt, sub Subqueue, s *mSess, n int) (want, pool []*mMsg) {
	cands := sortedMsgs(e, func(m *mMsg) bool {
		return m.sub == sub && m.available() && (s == nil || m.session == s.id)
	})
	for _, m := range cands {
		if len(want) == n {
			if m.seq == 0 {
				pool = append(pool, m)
			}
			continue
		}
		if m.sub == SubqueueMain && m.expires != 0 && m.expires <= r.now() {
			r.logf("model: %s expires at dispatch", m.id)
			r.expire(m)
			continue
		}
		if m.seq == 0 {
			pool = append(pool, m)
		}
		if len(want) < n {
			want = append(want, m)
		}
	}
	return want, pool
}

// checkDelivered compares delivered messages with the model's expectation
// and applies the delivery: locks (sc for a session consumer) or deletes.
func (r *modelRun) checkDelivered(op string, e *mEnt, got []*Message, want, pool []*mMsg, mode ReceiveMode, until int64, sc *mSC) {
	actual := make([]*mMsg, len(got))
	for i, g := range got {
		if actual[i] = e.msgs[msgKeyOf(g)]; actual[i] == nil {
			r.failf("%s delivered %s, which the model does not have in %s", op, msgKeyOf(g), e.name)
		}
	}
	if fmt.Sprint(ids(actual)) != fmt.Sprint(ids(want)) {
		ok := len(actual) == len(want)
		for i := 0; ok && i < len(want); i++ {
			if want[i].seq != 0 {
				ok = actual[i] == want[i]
			} else {
				ok = slices.Contains(pool, actual[i]) && !slices.Contains(actual[:i], actual[i]) &&
					(i == 0 || got[i].SequenceNumber > got[i-1].SequenceNumber)
			}
		}
		if !ok {
			r.failf("%s delivered %v, want %v (any of %v for the new ones)", op, ids(actual), ids(want), ids(pool))
		}
	}
	r.tally["messages delivered"] += len(got)
	for i, g := range got {
		m := actual[i]
		if m.seq == 0 {
			r.learn(m, g.SequenceNumber)
		}
		if g.DeliveryCount != m.deliv || g.SequenceNumber != m.seq || g.State != m.state || string(g.Body) != m.body {
			r.failf("%s: %s delivered with count %d seq %d state %s, want %d %d %s", op, m.id, g.DeliveryCount, g.SequenceNumber, g.State, m.deliv, m.seq, m.state)
		}
		if k, _ := g.Properties["k"].(string); k != m.k {
			r.failf("%s: %s delivered with property k=%q, want %q", op, m.id, k, m.k)
		}
		if reason, _ := g.Properties[PropDeadLetterReason].(string); reason != m.reason {
			r.failf("%s: %s delivered with DeadLetterReason %q, want %q", op, m.id, reason, m.reason)
		}
		if mode == ReceiveAndDelete {
			if g.LockToken != (LockToken{}) {
				r.failf("%s: receive-and-delete message %s has a lock token", op, m.id)
			}
			r.drop(m)
			continue
		}
		if g.LockToken == (LockToken{}) || !g.LockedUntil.Equal(time.Unix(0, until)) {
			r.failf("%s: %s locked with token %v until %v, want a token until %v", op, m.id, g.LockToken, g.LockedUntil, time.Unix(0, until).UTC())
		}
		for _, e := range r.ents {
			for _, x := range e.msgs {
				if x.locked() && x.token == g.LockToken {
					r.failf("%s: %s got the lock token of %s", op, m.id, x.id)
				}
			}
		}
		m.token, m.lockedUntil, m.sc = g.LockToken, until, sc
	}
}

// msgIDs returns the model keys of messages (their bodies' prefixes).
func msgIDs(ms []*Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = msgKeyOf(m)
	}
	return out
}

func msgKeyOf(m *Message) string {
	k, _, _ := strings.Cut(string(m.Body), ":")
	return k
}

func (r *modelRun) opReceive() {
	e := r.ent()
	sub, path := r.subqueue(e, 0.3, false)
	mode := PeekLock
	if r.chance(0.15) {
		mode = ReceiveAndDelete
	}
	abandonOnClose := mode == PeekLock && r.chance(0.1)
	n := 1 + r.pick(4)
	r.logf("Receive %s credit %d mode %d abandonOnClose %v", path, n, mode, abandonOnClose)
	s := &sink{}
	c, err := r.b.NewConsumer(bg, path, ConsumerOptions{Mode: mode, Deliver: s.deliver, AbandonOnClose: abandonOnClose})
	if !e.canReceive() {
		r.wantErr("NewConsumer on a receive-disabled entity", err, ErrEntityDisabled)
		return
	}
	r.wantErr("NewConsumer", err, nil)
	want, pool := r.deliverable(e, sub, nil, n)
	c.AddCredit(n)
	if left := c.Drain(); left != n-len(want) {
		r.failf("Drain left %d credit, want %d", left, n-len(want))
	}
	r.wantErr("Close", c.Close(), nil)
	r.checkDelivered("Receive "+path, e, s.take(), want, pool, mode, r.now()+int64(e.lockDur), nil)
	if abandonOnClose {
		for _, m := range want {
			r.unlock(m)
		}
	}
}

func (r *modelRun) sessEnt() *mEnt {
	for _, e := range r.ents {
		if e.sessions {
			return e
		}
	}
	panic("no session queue")
}

func (r *modelRun) opAccept() {
	e := r.sessEnt()
	s := &sink{}
	o := ConsumerOptions{Deliver: s.deliver}
	if !e.canReceive() {
		r.logf("AcceptNextSession %s, receive-disabled", e.name)
		_, err := r.b.AcceptNextSession(bg, e.name, time.Minute, o)
		r.wantErr("AcceptNextSession on a receive-disabled entity", err, ErrEntityDisabled)
		return
	}
	if r.chance(0.5) {
		id := append(sessionIDs, "e")[r.pick(len(sessionIDs)+1)]
		ms := e.sess[id]
		r.logf("AcceptSession %s/%s", e.name, id)
		c, err := r.b.AcceptSession(bg, e.name, id, o)
		if ms != nil && ms.owner != nil {
			r.wantErr("AcceptSession of a locked session", err, ErrSessionCannotBeLocked)
			return
		}
		r.wantErr("AcceptSession", err, nil)
		r.accepted(e, e.session(id), c, s)
		return
	}
	var cands []string
	for _, ms := range sortedSessions(e) {
		if ms.owner == nil && len(r.deliverableNoExpire(e, ms)) > 0 {
			cands = append(cands, ms.id)
		}
	}
	if len(cands) == 0 && len(r.waits) < 3 && r.chance(0.5) {
		r.acceptWait(e, s, o)
		return
	}
	r.logf("AcceptNextSession %s (candidates %v)", e.name, cands)
	c, err := r.b.AcceptNextSession(bg, e.name, 0, o)
	if len(cands) == 0 {
		r.wantErr("AcceptNextSession with no session available", err, ErrTimeout)
		return
	}
	r.wantErr("AcceptNextSession", err, nil)
	if !slices.Contains(cands, c.SessionID()) {
		r.failf("AcceptNextSession locked session %q, not one of %v", c.SessionID(), cands)
	}
	r.accepted(e, e.sess[c.SessionID()], c, s)
}

// acceptWait starts an AcceptNextSession that must wait: no session is
// available. It returns once the broker has registered the waiter.
func (r *modelRun) acceptWait(e *mEnt, sk *sink, o ConsumerOptions) {
	timeout := time.Duration(1+r.pick(60))*time.Second + r.jitter()
	w := &mWaiter{res: make(chan acceptResult, 1), sink: sk, deadline: r.now() + int64(timeout)}
	r.logf("AcceptNextSession %s waiting up to %v", e.name, timeout)
	q := r.b.byName[e.name].q
	q.mu.Lock()
	before := len(q.waiters)
	q.mu.Unlock()
	go func() {
		c, err := r.b.AcceptNextSession(bg, e.name, timeout, o)
		w.res <- acceptResult{c, err}
	}()
	if !poll.Wait(0, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiters) > before
	}) {
		r.failf("AcceptNextSession with no session available did not wait")
	}
	r.waits = append(r.waits, w)
}

// serveWaiters hands available sessions to the waiting acceptors, oldest
// first, as the broker does the moment a session becomes available.
func (r *modelRun) serveWaiters() {
	e := r.sessEnt()
	for len(r.waits) > 0 {
		var cands []string
		for _, ms := range sortedSessions(e) {
			if ms.owner == nil && len(r.deliverableNoExpire(e, ms)) > 0 {
				cands = append(cands, ms.id)
			}
		}
		if len(cands) == 0 {
			return
		}
		w := r.waits[0]
		r.waits = r.waits[1:]
		res := r.outcome(w)
		r.wantErr("waiting AcceptNextSession", res.err, nil)
		id := res.c.SessionID()
		r.logf("model: a waiting acceptor gets session %s (candidates %v)", id, cands)
		if !slices.Contains(cands, id) {
			r.failf("a waiting AcceptNextSession got session %q, not one of %v", id, cands)
		}
		r.accepted(e, e.sess[id], res.c, w.sink)
	}
}

// endWaiters checks that the waiters whose time is up (all, on close)
// fail with want.
func (r *modelRun) endWaiters(all bool, want error) {
	now := r.now()
	r.waits = slices.DeleteFunc(r.waits, func(w *mWaiter) bool {
		if !all && w.deadline > now {
			return false
		}
		r.logf("model: a waiting acceptor gives up")
		res := r.outcome(w)
		r.wantErr("waiting AcceptNextSession", res.err, want)
		return true
	})
}

func (r *modelRun) deliverableNoExpire(e *mEnt, s *mSess) []*mMsg {
	return sortedMsgs(e, func(m *mMsg) bool { return m.sub == SubqueueMain && m.available() && m.session == s.id })
}

func (r *modelRun) accepted(e *mEnt, s *mSess, c *Consumer, sk *sink) {
	sc := &mSC{c: c, sink: sk, ent: e, s: s}
	s.owner, s.lockedUntil = sc, r.now()+int64(e.lockDur)
	if got := c.LockedUntil(); !got.Equal(time.Unix(0, s.lockedUntil)) {
		r.failf("session %q locked until %v, want %v", s.id, got, time.Unix(0, s.lockedUntil).UTC())
	}
	r.open = append(r.open, sc)
}

func (r *modelRun) pickSC() *mSC {
	if len(r.open) == 0 {
		return nil
	}
	return r.open[r.pick(len(r.open))]
}

func (r *modelRun) opSessionReceive() {
	sc := r.pickSC()
	if sc == nil {
		r.opAccept()
		return
	}
	n := 1 + r.pick(3)
	drain := r.chance(0.6)
	r.logf("Session receive %s/%s credit %d drain %v", sc.ent.name, sc.s.id, n, drain)
	sc.c.AddCredit(n)
	sc.credit += n
	r.dispatch()
	if drain {
		if left := sc.c.Drain(); left != sc.credit {
			r.failf("Drain left %d credit, want %d", left, sc.credit)
		}
		sc.credit = 0
	}
}

// opLongLived opens, feeds, drains or closes a long-lived consumer.
func (r *modelRun) opLongLived() {
	e := r.ent()
	sub, _ := r.subqueue(e, 0.4, false)
	i := slices.IndexFunc(r.lls, func(ll *mLL) bool { return ll.ent == e && ll.sub == sub })
	if i < 0 {
		ll := &mLL{sink: &sink{}, ent: e, sub: sub}
		r.logf("Open a consumer on %s", ll.path())
		c, err := r.b.NewConsumer(bg, ll.path(), ConsumerOptions{Deliver: ll.sink.deliver})
		if !e.canReceive() {
			r.wantErr("NewConsumer on a receive-disabled entity", err, ErrEntityDisabled)
			return
		}
		r.wantErr("NewConsumer", err, nil)
		ll.c = c
		r.lls = append(r.lls, ll)
		return
	}
	ll := r.lls[i]
	switch x := r.rng.Float64(); {
	case x < 0.6:
		n := 1 + r.pick(3)
		r.logf("AddCredit %d to the consumer on %s", n, ll.path())
		ll.c.AddCredit(n)
		ll.credit += n
		r.dispatch()
	case x < 0.8:
		r.logf("Drain the consumer on %s", ll.path())
		if left := ll.c.Drain(); left != ll.credit {
			r.failf("Drain left %d credit, want %d", left, ll.credit)
		}
		ll.credit = 0
	default:
		r.logf("Close the consumer on %s", ll.path())
		r.wantErr("Close", ll.c.Close(), nil)
		r.lls = slices.Delete(r.lls, i, i+1)
	}
}

// dispatch checks what the consumers with credit got since the last look:
// the messages that became available, in sequence order, up to the credit.
func (r *modelRun) dispatch() {
	r.b.bg.Wait() // page-ins (pager.go) run on their own goroutines
	r.serveWaiters()
	// A receive-disabled entity delivers nothing: its consumers keep their
	// credit.
	credit := func(e *mEnt, n int) int {
		if !e.canReceive() {
			return 0
		}
		return n
	}
	for _, ll := range r.lls {
		want, pool := r.deliverable(ll.ent, ll.sub, nil, credit(ll.ent, ll.credit))
		ll.credit -= len(want)
		r.checkDelivered("delivery to the consumer on "+ll.path(), ll.ent, ll.sink.take(), want, pool, PeekLock, r.now()+int64(ll.ent.lockDur), nil)
	}
	for _, sc := range r.open {
		want, pool := r.deliverable(sc.ent, SubqueueMain, sc.s, credit(sc.ent, sc.credit))
		sc.credit -= len(want)
		r.checkDelivered("delivery to the consumer of session "+sc.s.id, sc.ent, sc.sink.take(), want, pool, PeekLock, sc.s.lockedUntil, sc)
	}
}

func (r *modelRun) opSessionClose() {
	sc := r.pickSC()
	if sc == nil {
		return
	}
	r.logf("Close session consumer %s/%s", sc.ent.name, sc.s.id)
	r.wantErr("Close", sc.c.Close(), nil)
	r.releaseSession(sc, false)
}

func (r *modelRun) opSessionState() {
	e := r.sessEnt()
	id := append(sessionIDs, "e")[r.pick(len(sessionIDs)+1)]
	var state []byte
	if r.chance(0.7) {
		state = fmt.Appendf(nil, "state-%d", r.step)
	}
	s := e.sess[id]
	r.logf("SetSessionState %s/%s %q", e.name, id, state)
	failed := r.faulty()
	err := r.b.SetSessionState(bg, e.name, id, state)
	if failed("SetSessionState", err) {
		// unchanged: the state read below is the old one
	} else if s == nil || s.owner == nil {
		r.wantErr("SetSessionState of an unlocked session", err, ErrSessionLockLost)
	} else {
		r.wantErr("SetSessionState", err, nil)
		s.state = state
	}
	got, err := r.b.GetSessionState(bg, e.name, id)
	r.wantErr("GetSessionState", err, nil)
	var want []byte
	if s != nil {
		want = s.state
	}
	if string(got) != string(want) || (got == nil) != (len(want) == 0) {
		r.failf("session %q state %q, want %q", id, got, want)
	}
}

func (r *modelRun) opSessionRenew() {
	e := r.sessEnt()
	var (
		got time.Time
		err error
		s   *mSess
	)
	if sc := r.pickSC(); sc != nil && r.chance(0.6) {
		s = sc.s
		r.logf("Consumer.RenewSessionLock %s/%s", e.name, s.id)
		got, err = sc.c.RenewSessionLock()
	} else {
		id := append(sessionIDs, "e")[r.pick(len(sessionIDs)+1)]
		s = e.sess[id]
		r.logf("RenewSessionLock %s/%s", e.name, id)
		got, err = r.b.RenewSessionLock(bg, e.name, id)
	}
	if s == nil || s.owner == nil {
		r.wantErr("RenewSessionLock of an unlocked session", err, ErrSessionLockLost)
		return
	}
	r.wantErr("RenewSessionLock", err, nil)
	s.lockedUntil = r.now() + int64(e.lockDur)
	if !got.Equal(time.Unix(0, s.lockedUntil)) {
		r.failf("RenewSessionLock returned %v, want %v", got, time.Unix(0, s.lockedUntil).UTC())
	}
}

// lockedIn returns the locked messages of e, in a stable order.
func lockedIn(e *mEnt) []*mMsg { return sortedMsgs(e, (*mMsg).locked) }

// tokenFor finds the model message locked under t in e.
func tokenFor(e *mEnt, t LockToken) *mMsg {
	for _, m := range e.msgs {
		if m.locked() && m.token == t {
			return m
		}
	}
	return nil
}

// randomToken returns a lock token: mostly a valid one of e, sometimes a
// stale one, a random one, or a valid one of another queue.
func (r *modelRun) randomToken(e *mEnt, valid []*mMsg) LockToken {
	switch x := r.rng.Float64(); {
	case x < 0.85 && len(valid) > 0:
		return valid[r.pick(len(valid))].token
	case x < 0.88 && len(r.stale) > 0:
		return r.stale[r.pick(len(r.stale))]
	case x < 0.94:
		for _, o := range r.ents {
			if l := lockedIn(o); o != e && len(l) > 0 {
				return l[r.pick(len(l))].token
			}
		}
	}
	var t LockToken
	binary.LittleEndian.PutUint64(t[:], r.rng.Uint64())
	binary.LittleEndian.PutUint64(t[8:], r.rng.Uint64())
	return t
}

func (r *modelRun) opSettle() {
	e := r.lockingEnt()
	kinds := []string{"complete", "abandon", "defer", "defer", "deadletter"}
	kind := kinds[r.pick(len(kinds))]
	valid := lockedIn(e)
	n := 1
	if r.chance(0.25) {
		n = 2 + r.pick(2)
	}
	var tokens []LockToken
	for range n {
		t := r.randomToken(e, valid)
		tokens = append(tokens, t)
	}
	if r.chance(0.05) {
		tokens = append(tokens, tokens[r.pick(len(tokens))])
	}
	k := ""
	var props map[string]any
	if kind != "complete" && r.chance(0.3) {
		k = fmt.Sprintf("k%d", r.step)
		props = map[string]any{"k": k}
	}
	reason := ""
	if r.chance(0.7) {
		reason = fmt.Sprintf("why%d", r.step)
	}
	path := e.name
	if r.chance(0.2) {
		path += "/$DeadLetterQueue" // settlement is by token: any path of the entity
	}

	// The model's verdict: every token must be valid and distinct, and
	// dead-lettering needs main-subqueue messages.
	var ms []*mMsg
	var want error
	for i, t := range tokens {
		m := tokenFor(e, t)
		if m == nil {
			want = ErrLockLost
			break
		}
		if slices.Contains(tokens[:i], t) {
			want = ErrInvalidArgument
			break
		}
		ms = append(ms, m)
	}
	if want == nil && kind == "deadletter" {
		for _, m := range ms {
			if m.sub != SubqueueMain {
				want = ErrInvalidArgument
			}
		}
	}
	names := make([]string, len(tokens))
	for i, t := range tokens {
		names[i] = "?"
		if m := tokenFor(e, t); m != nil {
			names[i] = m.id
		}
	}
	r.logf("%s %s tokens of %v props %v (want %v)", kind, path, names, props, want)
	var err error
	failed := r.faulty()
	switch kind {
	case "complete":
		err = r.b.Complete(bg, path, tokens...)
	case "abandon":
		err = r.b.Abandon(bg, path, props, tokens...)
	case "defer":
		err = r.b.Defer(bg, path, props, tokens...)
	case "deadletter":
		err = r.b.DeadLetter(bg, path, reason, "desc", props, tokens...)
	}
	if failed(kind, err) {
		return
	}
	r.wantErr(kind, err, want)
	if want != nil {
		return
	}
	for _, m := range ms {
		switch kind {
		case "complete":
			r.drop(m)
		case "abandon":
			r.failed(m, k, true)
		case "defer":
			r.unlock(m)
			m.state = StateDeferred
			if k != "" {
				m.k = k
			}
		case "deadletter":
			if k != "" {
				m.k = k
			}
			r.deadLetter(m, reason)
		}
	}
}

func (r *modelRun) opRenew() {
	e := r.lockingEnt()
	t := r.randomToken(e, lockedIn(e))
	m := tokenFor(e, t)
	id := "?"
	if m != nil {
		id = m.id
	}
	r.logf("RenewLock %s token of %s", e.name, id)
	got, err := r.b.RenewLock(bg, e.name, t)
	if m == nil {
		r.wantErr("RenewLock", err, ErrLockLost)
		return
	}
	r.wantErr("RenewLock", err, nil)
	want := r.now() + int64(e.lockDur)
	if m.sc != nil {
		want = m.sc.s.lockedUntil // covered by the session lock
	} else {
		m.lockedUntil = want
	}
	if !got.Equal(time.Unix(0, want)) {
		r.failf("RenewLock of %s returned %v, want %v", id, got, time.Unix(0, want).UTC())
	}
}

func (r *modelRun) opReceiveDeferred() {
	e := r.ent()
	sub, path := r.subqueue(e, 0.3, true)
	deferred := sortedMsgs(e, func(m *mMsg) bool { return m.sub == sub && m.state == StateDeferred && !m.locked() })
	if len(deferred) == 0 && r.chance(0.7) {
		r.opSettle() // nothing to receive: settle (often defer) instead
		return
	}
	var want []*mMsg
	for _, m := range deferred {
		if r.chance(0.6) {
			want = append(want, m)
		}
	}
	r.rng.Shuffle(len(want), func(i, j int) { want[i], want[j] = want[j], want[i] })
	seqs := make([]int64, len(want))
	for i, m := range want {
		seqs[i] = m.seq
	}
	dup := len(seqs) > 0 && r.chance(0.1)
	if dup {
		// A sequence number given twice receives nothing
		// (TestReceiveDeferredDuplicateSequenceNumbers).
		seqs = append(seqs, seqs[0])
	}
	bad := dup || len(seqs) == 0 || r.chance(0.1)
	if bad {
		others := sortedMsgs(e, func(m *mMsg) bool { return m.seq != 0 && (m.state != StateDeferred || m.locked() || m.sub != sub) })
		if len(others) > 0 && r.chance(0.6) {
			seqs = append(seqs, others[r.pick(len(others))].seq)
		} else {
			seqs = append(seqs, e.maxSeq+1000)
		}
	}
	mode := PeekLock
	if r.chance(0.2) {
		mode = ReceiveAndDelete
	}
	r.logf("ReceiveDeferred %s %v mode %d (bad %v)", path, seqs, mode, bad)
	failed := r.faulty()
	got, err := r.b.ReceiveDeferred(bg, path, seqs, mode)
	if failed("ReceiveDeferred", err) {
		return
	}
	if bad {
		r.wantErr("ReceiveDeferred", err, ErrMessageNotFound)
		return
	}
	r.wantErr("ReceiveDeferred", err, nil)
	for _, m := range want {
		if m.sub == SubqueueMain {
			m.deliv++ // receiving a deferred message is a delivery (durably, in peek-lock)
		}
	}
	r.checkDelivered("ReceiveDeferred "+path, e, got, want, nil, mode, r.now()+int64(e.lockDur), nil)
}

func (r *modelRun) opAdvance() {
	var d time.Duration
	switch r.pick(4) {
	case 0, 1:
		d = time.Duration(1+r.pick(10000))*time.Millisecond + r.jitter()
	case 2:
		d = time.Duration(1+r.pick(60))*time.Second + r.jitter()
	default:
		d = time.Duration(1+r.pick(240))*time.Second + r.jitter()
	}
	r.logf("Advance %v", d)
	r.advance(d)
}

// advance moves the clock by d, one deadline instant at a time, checking
// the broker against the model at each.
func (r *modelRun) advance(d time.Duration) {
	target := r.now() + int64(d)
	for {
		t, ok := r.nextEvent()
		if !ok || t > target {
			break
		}
		t = max(t, r.now())
		r.clk.Set(time.Unix(0, t))
		r.fireEvents()
		r.dispatch()
		r.endWaiters(false, ErrTimeout)
		r.verify()
	}
	r.clk.Set(time.Unix(0, target))
}

func (r *modelRun) opRestart() {
	r.logf("Restart")
	r.wantErr("Close", r.b.Close(), nil)
	r.endWaiters(true, ErrClosed)
	r.st = r.st.Reopen()
	r.openBroker()
	// Locks do not survive a restart: the messages are available again
	// with the delivery count they had.
	for _, e := range r.ents {
		for _, m := range e.msgs {
			r.unlock(m)
		}
		for _, s := range e.sess {
			s.owner, s.lockedUntil = nil, 0
		}
	}
	r.open, r.lls = nil, nil
}

// opUpdate changes the lock duration, maximum delivery count and status
// of a queue or subscription. New locks take the new duration; existing
// ones keep theirs.
func (r *modelRun) opUpdate() {
	e := r.ent()
	lockDur, maxDeliv, status := e.lockDur, e.maxDeliv, e.status // kept if the update fails
	e.lockDur = []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 45 * time.Second}[r.pick(4)]
	e.maxDeliv = uint32(2 + r.pick(4))
	e.status = StatusActive
	switch x := r.rng.Float64(); {
	case x < 0.25:
		e.status = StatusReceiveDisabled
	case x < 0.4 && e.kind == kindQueue:
		e.status = StatusSendDisabled
	}
	r.logf("Update %s: lock %v, max deliveries %d, %s", e.name, e.lockDur, e.maxDeliv, e.status)
	var err error
	failed := r.faulty()
	if e.kind == kindQueue {
		var qi *QueueInfo
		if qi, err = r.b.GetQueue(bg, e.name); err == nil {
			p := qi.Properties
			p.LockDuration, p.MaxDeliveryCount, p.Status = e.lockDur, int32(e.maxDeliv), e.status
			err = r.b.UpdateQueue(bg, e.name, p)
		}
	} else {
		topic, name, _ := strings.Cut(e.name, "/Subscriptions/")
		var si *SubscriptionInfo
		if si, err = r.b.GetSubscription(bg, topic, name); err == nil {
			p := si.Properties
			p.LockDuration, p.MaxDeliveryCount, p.Status = e.lockDur, int32(e.maxDeliv), e.status
			err = r.b.UpdateSubscription(bg, topic, name, p)
		}
	}
	if failed("Update", err) {
		e.lockDur, e.maxDeliv, e.status = lockDur, maxDeliv, status
		return
	}
	r.wantErr("Update", err, nil)
}

func (r *modelRun) opPurge() {
	e := r.ent()
	sub, path := r.subqueue(e, 0.5, true)
	cands := sortedMsgs(e, func(m *mMsg) bool { return m.sub == sub && !m.locked() })
	if r.chance(0.5) {
		max := 1 + r.pick(3)
		r.logf("DeleteMessages %s %d", path, max)
		failed := r.faulty()
		n, err := r.b.DeleteMessages(bg, path, max, time.Time{})
		if failed("DeleteMessages", err) {
			return
		}
		r.wantErr("DeleteMessages", err, nil)
		cands = cands[:min(max, len(cands))]
		if n != len(cands) {
			r.failf("DeleteMessages deleted %d, want %d", n, len(cands))
		}
	} else {
		r.logf("Purge %s", path)
		n, err := r.b.Purge(bg, path, time.Time{})
		r.wantErr("Purge", err, nil)
		if n != len(cands) {
			r.failf("Purge deleted %d, want %d", n, len(cands))
		}
	}
	for _, m := range cands {
		r.drop(m)
	}
}

// ---- comparison ----

// verify compares the broker's observable state with the model's and
// checks the broker's invariants.
func (r *modelRun) verify() {
	r.t.Helper()
	r.b.bg.Wait()
	for _, e := range r.b.byID {
		if e.q != nil && e.q.pg.cold > 0 {
			r.tally["steps ending with cold messages"]++
		}
	}
	for _, e := range r.ents {
		var learned []*mMsg
		var seqs []int64
		for _, sub := range []Subqueue{SubqueueMain, SubqueueDeadLetter} {
			path := e.name + sub.String()
			got, err := r.b.Peek(bg, path, 0, MaxPeek)
			if err != nil {
				r.failf("Peek %s: %v", path, err)
			}
			want := sortedMsgs(e, func(m *mMsg) bool { return m.sub == sub })
			gotIDs, wantIDs := msgIDs(got), ids(want)
			sort.Strings(gotIDs)
			sort.Strings(wantIDs)
			if fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) {
				r.failf("Peek %s holds %v, the model %v", path, gotIDs, wantIDs)
			}
			for i, g := range got {
				if i > 0 && g.SequenceNumber <= got[i-1].SequenceNumber {
					r.failf("Peek %s: sequence numbers out of order", path)
				}
				m := e.msgs[msgKeyOf(g)]
				r.compare(path, g, m)
				if m.seq == 0 {
					learned = append(learned, m)
					seqs = append(seqs, g.SequenceNumber)
				} else if g.SequenceNumber != m.seq {
					r.failf("Peek %s: %s has sequence number %d, had %d", path, m.id, g.SequenceNumber, m.seq)
				}
			}
		}
		// Sequence numbers given since the last look: all above the
		// highest seen before.
		order := make([]int, len(learned))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(i, j int) bool { return seqs[order[i]] < seqs[order[j]] })
		for _, i := range order {
			r.learn(learned[i], seqs[i])
		}
		r.compareCounts(e)
	}
	r.compareCounts(r.topic)
	if err := r.b.checkInvariants(); err != nil {
		r.failf("invariants violated:\n%v", err)
	}
	for _, e := range r.all() {
		e.baseSeq = e.maxSeq
	}
}

func (r *modelRun) compare(path string, g *Message, m *mMsg) {
	var exp time.Time
	if m.expires != 0 {
		exp = time.Unix(0, m.expires).UTC()
	}
	if g.MessageID != m.msgID {
		r.failf("Peek %s: %s has MessageID %q, want %q", path, m.id, g.MessageID, m.msgID)
	}
	if g.State != m.state || g.DeliveryCount != m.deliv || g.SessionID != m.session || string(g.Body) != m.body || !g.ExpiresAt.Equal(exp) {
		r.failf("Peek %s: %s is %s count %d session %q expires %v, want %s %d %q %v", path, m.id,
			g.State, g.DeliveryCount, g.SessionID, g.ExpiresAt, m.state, m.deliv, m.session, exp)
	}
	if g.DeadLetterSource != m.dlFrom {
		r.failf("Peek %s: %s has DeadLetterSource %q, want %q", path, m.id, g.DeadLetterSource, m.dlFrom)
	}
	if m.state == StateScheduled && !g.ScheduledEnqueueTime.Equal(time.Unix(0, m.sched)) {
		r.failf("Peek %s: %s scheduled at %v, want %v", path, m.id, g.ScheduledEnqueueTime, time.Unix(0, m.sched).UTC())
	}
	if k, _ := g.Properties["k"].(string); k != m.k {
		r.failf("Peek %s: %s has property k=%q, want %q", path, m.id, k, m.k)
	}
	if reason, _ := g.Properties[PropDeadLetterReason].(string); reason != m.reason {
		r.failf("Peek %s: %s has DeadLetterReason %q, want %q", path, m.id, reason, m.reason)
	}
}

// wantCounts adds up the runtime counts of e's messages.
func (e *mEnt) wantCounts(want *RuntimeInfo) {
	for _, m := range e.msgs {
		want.TotalMessageCount++
		want.SizeInBytes += int64(len(m.body))
		switch {
		case m.sub == SubqueueDeadLetter:
			want.DeadLetterMessageCount++
		case m.state == StateActive:
			want.ActiveMessageCount++
		case m.state == StateDeferred:
			want.DeferredMessageCount++
		case m.state == StateScheduled:
			want.ScheduledMessageCount++
		}
	}
}

func (r *modelRun) compareCounts(e *mEnt) {
	var want RuntimeInfo
	e.wantCounts(&want)
	var got RuntimeInfo
	var err error
	switch e.kind {
	case kindQueue:
		var qi *QueueInfo
		if qi, err = r.b.GetQueue(bg, e.name); err == nil {
			got = qi.Runtime
		}
	case kindSubscription:
		topic, name, _ := strings.Cut(e.name, "/Subscriptions/")
		var si *SubscriptionInfo
		if si, err = r.b.GetSubscription(bg, topic, name); err == nil {
			got = si.Runtime
		}
	case kindTopic:
		for _, s := range e.subs {
			s.wantCounts(&want)
		}
		want.SubscriptionCount = int64(len(e.subs))
		var ti *TopicInfo
		if ti, err = r.b.GetTopic(bg, e.name); err == nil {
			got = ti.Runtime
		}
	}
	if err != nil {
		r.failf("runtime information of %s: %v", e.name, err)
	}
	got.Name, got.CreatedAt, got.UpdatedAt, got.AccessedAt = "", time.Time{}, time.Time{}, time.Time{}
	if got != want {
		r.failf("runtime counts of %s: %+v, want %+v", e.name, got, want)
	}
	if !e.sessions {
		return
	}
	var wantIDs []string
	for _, s := range sortedSessions(e) {
		has := len(s.state) > 0
		for _, m := range e.msgs {
			has = has || (m.sub == SubqueueMain && m.session == s.id)
		}
		if has {
			wantIDs = append(wantIDs, s.id)
		}
	}
	for _, m := range e.msgs {
		if m.sub == SubqueueMain && e.sess[m.session] == nil {
			e.session(m.session)
			wantIDs = append(wantIDs, m.session)
		}
	}
	sort.Strings(wantIDs)
	wantIDs = slices.Compact(wantIDs)
	gotIDs, err := r.b.ListSessions(bg, e.name, time.Time{}, 0, 0)
	if err != nil {
		r.failf("ListSessions %s: %v", e.name, err)
	}
	if fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) {
		r.failf("ListSessions %s = %v, want %v", e.name, gotIDs, wantIDs)
	}
}

// ---- focused tests of bugs the model found ----

// A settlement of several tokens applies to all of them or to none: here
// the second token is of a dead letter, which cannot be dead-lettered, so
// the first message must stay where it is, locked.
func TestSettleMultiTokenAtomic(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	got := e.receive("q", PeekLock, 2)
	wantBodies(t, got, "a", "b")
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "", nil, got[1].LockToken))
	dl := e.receive("q/$DeadLetterQueue", PeekLock, 1)
	wantBodies(t, dl, "b")

	err := e.b.DeadLetter(e.ctx, "q", "r", "", nil, got[0].LockToken, dl[0].LockToken)
	wantErr(t, err, ErrInvalidArgument)
	if ri := e.info("q"); ri.ActiveMessageCount != 1 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("after the failed DeadLetter: %d active, %d dead letters; want 1 and 1", ri.ActiveMessageCount, ri.DeadLetterMessageCount)
	}
	if _, err := e.b.RenewLock(e.ctx, "q", got[0].LockToken); err != nil {
		t.Fatalf("the first message's lock is gone after the failed DeadLetter: %v", err)
	}
	mustHoldInvariants(t, e.b)
}

// ReceiveDeferred with a sequence number given twice must not lock (or
// delete and hand out) the message twice.
func TestReceiveDeferredDuplicateSequenceNumbers(t *testing.T) {
	for _, mode := range []ReceiveMode{PeekLock, ReceiveAndDelete} {
		t.Run(fmt.Sprint("mode=", mode), func(t *testing.T) {
			e := newEnv(t)
			e.queue("q", QueueProperties{})
			e.send("q", msg("a"))
			got := e.receive("q", PeekLock, 1)
			e.must(e.b.Defer(e.ctx, "q", nil, got[0].LockToken))
			s := got[0].SequenceNumber
			rd, err := e.b.ReceiveDeferred(e.ctx, "q", []int64{s, s}, mode)
			if err == nil && len(rd) != 1 {
				t.Fatalf("ReceiveDeferred([%d, %d]) handed out %d copies; want one, or an error", s, s, len(rd))
			}
			mustHoldInvariants(t, e.b)
			e.clk.Advance(2 * time.Minute) // the lock expires
			mustHoldInvariants(t, e.b)
		})
	}
}

// A dead letter abandoned without properties is available again at once:
// a consumer of the dead-letter subqueue with credit must get it.
func TestAbandonDeadLetterRedelivers(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"))
	got := e.receive("q", PeekLock, 1)
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "", nil, got[0].LockToken))
	dl := e.receive("q/$DeadLetterQueue", PeekLock, 1)
	wantBodies(t, dl, "a")
	c, s := e.consumer("q/$DeadLetterQueue", PeekLock)
	c.AddCredit(1)
	e.must(e.b.Abandon(e.ctx, "q", nil, dl[0].LockToken))
	wantBodies(t, s.take(), "a")
	mustHoldInvariants(t, e.b)
}

// Re-enabling receive hands the waiting messages to the consumers with
// credit; for a receive-and-delete consumer that means a delete commit.
func TestUpdateReenablingReceiveAndDelete(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	c, s := e.consumer("q", ReceiveAndDelete)
	e.must(e.b.UpdateQueue(e.ctx, "q", QueueProperties{Status: StatusReceiveDisabled}))
	c.AddCredit(1)
	e.send("q", msg("a"))
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("UpdateQueue re-enabling receive panicked: %v", p)
			}
		}()
		e.must(e.b.UpdateQueue(e.ctx, "q", QueueProperties{}))
	}()
	wantBodies(t, s.take(), "a")
	mustHoldInvariants(t, e.b)
}
