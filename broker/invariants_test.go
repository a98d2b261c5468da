package broker

import (
	"strings"
	"testing"
	"time"
)

// checkOnCleanup runs the invariant checker on b when the test ends, if b
// is still the env's broker (a restart replaces it) and the test has not
// already failed.
func (e *env) checkOnCleanup(b *Broker) {
	e.t.Cleanup(func() {
		if e.b != b || e.t.Failed() {
			return
		}
		if err := b.checkInvariants(); err != nil {
			e.t.Errorf("broker invariants violated at the end of the test:\n%v", err)
		}
		if n := e.st.DeleteOnceViolations(); n > 0 {
			e.t.Errorf("%d batches deleted with DeleteOnce a key written more than once", n)
		}
	})
}

// mustHoldInvariants fails the test when the broker's index is inconsistent.
func mustHoldInvariants(t testing.TB, b *Broker) {
	t.Helper()
	if err := b.checkInvariants(); err != nil {
		t.Fatalf("broker invariants violated:\n%v", err)
	}
}

// invariantFixture is a broker holding messages in every place the
// checker looks at: available, locked (queue and session lock lists),
// deferred, scheduled, with a TTL, dead-lettered; a locked session and a
// ready one.
func invariantFixture(t *testing.T) (*env, *qstate, *qstate) {
	t.Helper()
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("q", msg("a"), msg("b"), msg("c"), msg("d"))
	e.send("q", &Message{Body: []byte("ttl1"), TimeToLive: time.Hour}, &Message{Body: []byte("ttl2"), TimeToLive: 2 * time.Hour})
	_, err := e.b.Schedule(e.ctx, "q", t0.Add(time.Hour), []*Message{msg("sched")})
	e.must(err)
	got := e.receive("q", PeekLock, 3) // a, b, c
	e.clk.Advance(time.Second)
	got = append(got, e.receive("q", PeekLock, 1)...) // d, locked a second later
	e.must(e.b.Defer(e.ctx, "q", nil, got[1].LockToken))
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "", nil, got[2].LockToken))
	e.send("s", &Message{Body: []byte("x1"), SessionID: "x"}, &Message{Body: []byte("x2"), SessionID: "x"},
		&Message{Body: []byte("y1"), SessionID: "y"})
	sk := &sink{}
	c, err := e.b.AcceptSession(e.ctx, "s", "x", ConsumerOptions{Deliver: sk.deliver})
	e.must(err)
	c.AddCredit(1)
	c.Drain()
	wantBodies(t, sk.take(), "x1")
	mustHoldInvariants(t, e.b)
	return e, e.b.byName["q"].q, e.b.byName["s"].q
}

// find returns q's message with the given body.
func find(t *testing.T, q *qstate, body string) *msgIdx {
	t.Helper()
	for _, m := range q.msgs {
		if b, err := q.b.loadBody(q.ent.id, m); err == nil && string(b.Body) == body {
			return m
		}
	}
	t.Fatalf("no message %q", body)
	return nil
}

// Each corruption of the index must be reported.
func TestCheckInvariantsFindsCorruption(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, e *env, q, s *qstate)
		want    string
	}{
		{"count", func(t *testing.T, e *env, q, s *qstate) { q.n[SubqueueMain][StateActive]++ }, "counts by subqueue and state"},
		{"size", func(t *testing.T, e *env, q, s *qstate) { q.size++ }, "size: messages hold"},
		{"reserved", func(t *testing.T, e *env, q, s *qstate) { q.reserved = 3 }, "reserved at a quiescent point"},
		{"index differs from store", func(t *testing.T, e *env, q, s *qstate) { find(t, q, "ttl1").deliveries++ }, "store has"},
		{"record missing from index", func(t *testing.T, e *env, q, s *qstate) {
			var bt batchBuf
			bt.Set(msgKey(q.ent.id, SubqueueMain, 900), encodeMeta(&msgMeta{bodyRef: 900}))
			e.must(e.b.commit(e.ctx, &bt.Batch))
		}, "message 900 (Active, subqueue 0) is in the store but not in the index"},
		{"orphan body", func(t *testing.T, e *env, q, s *qstate) {
			var bt batchBuf
			rec, err := encodeMessage(msg("orphan"))
			e.must(err)
			bt.Set(key2(kBody, q.ent.id, 901), rec)
			e.must(e.b.commit(e.ctx, &bt.Batch))
		}, "body record 901 belongs to no message"},
		{"lock not in list", func(t *testing.T, e *env, q, s *qstate) { q.unlinkLock(find(t, q, "a")) }, "locked but not in the queue's lock list"},
		{"lock list unsorted", func(t *testing.T, e *env, q, s *qstate) { find(t, q, "a").lk.until += int64(time.Hour) }, "not sorted"},
		{"token missing", func(t *testing.T, e *env, q, s *qstate) { delete(q.locks, find(t, q, "d").lk.token) }, "not in q.locks under its token"},
		{"stranded", func(t *testing.T, e *env, q, s *qstate) { q.avail[SubqueueMain].remove(find(t, q, "ttl1")) }, "stranded"},
		{"available and locked", func(t *testing.T, e *env, q, s *qstate) { q.avail[SubqueueMain].push(find(t, q, "a")) }, "is available (hidx"},
		{"heap order", func(t *testing.T, e *env, q, s *qstate) { q.avail[SubqueueMain].swap(0, 1) }, "breaks the heap order"},
		{"session not ready", func(t *testing.T, e *env, q, s *qstate) {
			s.sessions["y"].inReady = false
			s.ready = nil
		}, `session "y" has 1 available messages and no owner but is not in the ready queue`},
		{"ready flag without queue", func(t *testing.T, e *env, q, s *qstate) { s.ready = nil }, "inReady set but is not in the ready queue"},
		{"session count", func(t *testing.T, e *env, q, s *qstate) { s.sessions["x"].count++ }, `session "x" counts 3 messages, holds 2`},
		{"stored session state not indexed", func(t *testing.T, e *env, q, s *qstate) {
			var bt batchBuf
			bt.Set(keyS(kSession, s.ent.id, "z"), append(encodeUint(1), "st"...))
			e.must(e.b.commit(e.ctx, &bt.Batch))
		}, `session "z" has a stored state but the index says it has none`},
		{"indexed session state not stored", func(t *testing.T, e *env, q, s *qstate) { s.sessions["y"].hasState = true }, `session "y" has state in the index but none stored`},
		{"session lock list", func(t *testing.T, e *env, q, s *qstate) { s.unlinkSessionLock(s.sessions["x"]) }, "session-lock list holds 0 sessions, 1 are owned"},
		{"owner's list", func(t *testing.T, e *env, q, s *qstate) {
			m := find(t, s, "x1")
			m.owner().unlinkLocked(m)
		}, "locked by a session consumer but not in its list"},
		{"activation not armed", func(t *testing.T, e *env, q, s *qstate) { e.b.wheel.remove(find(t, q, "sched").dl) }, "its activation is not armed"},
		{"expiry not armed", func(t *testing.T, e *env, q, s *qstate) { e.b.wheel.remove(find(t, q, "ttl2").dl) }, "its expiry is not armed"},
		{"stray deadline", func(t *testing.T, e *env, q, s *qstate) { q.setDeadline(find(t, q, "b"), t0.Add(time.Hour).UnixNano()) }, "stray deadline"},
		{"lock deadline", func(t *testing.T, e *env, q, s *qstate) { e.b.wheel.remove(&q.lockDL) }, "lock list: deadline armed false"},
		{"wheel order", func(t *testing.T, e *env, q, s *qstate) {
			w := e.b.wheel
			w.swap(0, len(w.h)-1)
		}, "wheel: deadline"},
		{"credit beside available messages", func(t *testing.T, e *env, q, s *qstate) {
			c := &Consumer{b: e.b, q: q, credit: 2, opts: ConsumerOptions{Deliver: func(*Message) {}}}
			q.consumers[SubqueueMain] = append(q.consumers[SubqueueMain], c)
		}, "has 2 credit while 2 messages are available"},
		{"cache differs from store", func(t *testing.T, e *env, q, s *qstate) {
			m := find(t, q, "ttl1")
			c := *e.b.cache.get(m)
			c.Properties = map[string]any{"x": int64(1)}
			e.b.cache.put(m, &c)
		}, "the cached copy differs from the store in Properties"},
		{"sequence numbers", func(t *testing.T, e *env, q, s *qstate) { q.ent.seq.next = 2 }, "not below the next sequence number 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, q, s := invariantFixture(t)
			q.mu.Lock()
			s.mu.Lock()
			tc.corrupt(t, e, q, s)
			s.mu.Unlock()
			q.mu.Unlock()
			err := e.b.checkInvariants()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkInvariants after corrupting %s = %v; want a violation containing %q", tc.name, err, tc.want)
			}
			e.b = nil // the env's end-of-test check would report it again
		})
	}
}
