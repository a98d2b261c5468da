package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/cluster"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/server"
	"github.com/busbar-io/busbar/store/postgres"
)

const lease = 1500 * time.Millisecond

// clusterURL returns a store URL on a fresh table of the test PostgreSQL.
func clusterURL(t testing.TB) string {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("busbar_table", fmt.Sprintf("cluster_%d_%d", os.Getpid(), time.Now().UnixNano()))
	u.RawQuery = q.Encode()
	return u.String()
}

type node struct {
	id  string
	srv *server.Server
}

func (n *node) b() *broker.Broker { return n.srv.Broker() }

func clusterOptions(id string) cluster.Options {
	return cluster.Options{NodeID: id, LeaseTime: lease}
}

func startNode(t testing.TB, storeURL, id string) *node {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Options{
		DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "-", StoreURL: storeURL,
		Cluster: clusterOptions(id),
	})
	if err != nil {
		t.Fatalf("starting node %s: %v", id, err)
	}
	n := &node{id: id, srv: srv}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return n
}

// owners maps every queue or topic id to the nodes serving it.
func owners(nodes ...*node) map[uint64][]string {
	m := map[uint64][]string{}
	for _, n := range nodes {
		for _, id := range n.srv.Node().Owned() {
			m[id] = append(m[id], n.id)
		}
	}
	return m
}

// settled waits until each of the want entities is served by exactly one
// of nodes, and returns the owners.
func settled(t *testing.T, want int, nodes ...*node) map[uint64][]string {
	t.Helper()
	var m map[uint64][]string
	poll.UntilNil(t, 20*time.Second, "ownership to settle", func() error {
		m = owners(nodes...)
		if len(m) != want {
			return fmt.Errorf("%d of %d entities served: %v", len(m), want, m)
		}
		for id, o := range m {
			if len(o) != 1 {
				return fmt.Errorf("entity %d served by %v", id, o)
			}
		}
		return nil
	})
	return m
}

func perNode(m map[uint64][]string) map[string]int {
	c := map[string]int{}
	for _, o := range m {
		c[o[0]]++
	}
	return c
}

func send(t *testing.T, n *node, queue string, body string) error {
	t.Helper()
	return n.b().Send(context.Background(), queue, []*broker.Message{{Body: []byte(body)}})
}

// ownerOf returns the node serving queue.
func ownerOf(t *testing.T, queue string, nodes ...*node) *node {
	t.Helper()
	var o *node
	poll.Until(t, 20*time.Second, queue+" to be served by a node", func() bool {
		o = nil
		for _, n := range nodes {
			if _, err := n.b().Peek(context.Background(), queue, 0, 1); err == nil {
				if o != nil {
					t.Fatalf("%s served by %s and %s at once", queue, o.id, n.id)
				}
				o = n
			}
		}
		return o != nil
	})
	return o
}

func TestEntitiesSpreadAndJoiningNodeTakesAShare(t *testing.T) {
	u := clusterURL(t)
	a, b := startNode(t, u, "a"), startNode(t, u, "b")
	for i := range 24 {
		if err := a.b().CreateQueue(context.Background(), fmt.Sprintf("q%d", i), broker.QueueProperties{}); err != nil {
			t.Fatal(err)
		}
	}
	per := perNode(settled(t, 24, a, b))
	if per["a"] == 0 || per["b"] == 0 {
		t.Fatalf("24 queues over 2 nodes: %v", per)
	}
	// Every node knows every queue (management), served or not.
	for _, n := range []*node{a, b} {
		qs, err := n.b().ListQueues(context.Background(), 0, 100)
		if err != nil || len(qs) != 24 {
			t.Fatalf("node %s lists %d queues (%v), want 24", n.id, len(qs), err)
		}
	}
	c := startNode(t, u, "c")
	poll.UntilNil(t, 20*time.Second, "c to take a share", func() error {
		per = perNode(settled(t, 24, a, b, c))
		if per["c"] < 3 || per["a"] == 0 || per["b"] == 0 {
			return fmt.Errorf("after c joined: %v, want each node to serve a share", per)
		}
		return nil
	})
	t.Logf("24 queues over 3 nodes: %v", per)
}

func TestManagementReachesEveryNode(t *testing.T) {
	u := clusterURL(t)
	a, b := startNode(t, u, "a"), startNode(t, u, "b")
	ctx := context.Background()
	if err := a.b().CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	// Created on b while a may own the topic; the rule is set on b too.
	poll.Until(t, 10*time.Second, "topic t to reach b", func() bool {
		_, err := b.b().GetTopic(ctx, "t")
		return err == nil
	})
	if err := b.b().CreateSubscription(ctx, "t", "red", broker.SubscriptionProperties{
		DefaultRule: &broker.RuleProperties{Name: "red", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQL: "color = 'red'"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.b().CreateSubscription(ctx, "t", "all", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	settled(t, 1, a, b)
	// Ids are given by compare-and-swap: two nodes creating at once never
	// share one.
	errs := make(chan error, 20)
	for i := range 10 {
		go func() { errs <- a.b().CreateQueue(ctx, fmt.Sprintf("qa%d", i), broker.QueueProperties{}) }()
		go func() { errs <- b.b().CreateQueue(ctx, fmt.Sprintf("qb%d", i), broker.QueueProperties{}) }()
	}
	created := 0
	for range 20 {
		if err := <-errs; err == nil {
			created++
		} else if !errors.Is(err, broker.ErrNotOwned) {
			t.Fatalf("concurrent create: %v", err)
		}
	}
	poll.Until(t, 10*time.Second, "both nodes to list every queue", func() bool {
		qa, _ := a.b().ListQueues(ctx, 0, 100)
		qb, _ := b.b().ListQueues(ctx, 0, 100)
		return len(qa) == created && len(qb) == created
	})
	settled(t, created+1, a, b)

	o := ownerOf(t, "t/Subscriptions/all", a, b)
	msgs := []*broker.Message{
		{Body: []byte("r"), Properties: map[string]any{"color": "red"}},
		{Body: []byte("g"), Properties: map[string]any{"color": "green"}},
	}
	if err := o.b().Send(ctx, "t", msgs); err != nil {
		t.Fatal(err)
	}
	for sub, want := range map[string]int{"all": 2, "red": 1} {
		got, err := o.b().Peek(ctx, "t/Subscriptions/"+sub, 0, 10)
		if err != nil || len(got) != want {
			t.Errorf("subscription %s holds %d messages (%v), want %d", sub, len(got), err, want)
		}
	}
	// A node that does not serve the topic refuses its data, clearly.
	other := a
	if o == a {
		other = b
	}
	if err := other.b().Send(ctx, "t", msgs); !errors.Is(err, broker.ErrNotOwned) {
		t.Errorf("send on the node not serving t: %v, want ErrNotOwned", err)
	}
}

// TestPausedNodeCannotWrite: a node whose heartbeat stops (a paused
// process, a node cut off from PostgreSQL) loses its entities to the others
// after the lease time; whatever it still holds in memory, its commits are
// refused by the store, and when it runs again it serves nothing it lost.
func TestPausedNodeCannotWrite(t *testing.T) {
	u := clusterURL(t)
	a, b, c := startNode(t, u, "a"), startNode(t, u, "b"), startNode(t, u, "c")
	ctx := context.Background()
	for i := range 9 {
		if err := a.b().CreateQueue(ctx, fmt.Sprintf("q%d", i), broker.QueueProperties{}); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, 9, a, b, c)
	nodes := []*node{a, b, c}
	var victim *node
	var queue string
	for i := range 9 {
		q := fmt.Sprintf("q%d", i)
		if o := ownerOf(t, q, nodes...); o != nil {
			victim, queue = o, q
			break
		}
	}
	for i := range 5 {
		if err := send(t, victim, queue, fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	victim.srv.Node().Pause()
	paused := time.Now()
	var others []*node
	for _, n := range nodes {
		if n != victim {
			others = append(others, n)
		}
	}
	newOwner := ownerOf(t, queue, others...)
	took := time.Since(paused)
	t.Logf("%s served again by %s %v after %s stopped renewing (lease %v)", queue, newOwner.id, took.Round(time.Millisecond), victim.id, lease)
	// The last heartbeat was at most one renewal period (lease/5) before
	// the pause; others wait a full lease time after they saw it change.
	if took < lease*4/5 || took > 2*lease {
		t.Errorf("taken over after %v, want between %v and %v", took, lease*4/5, 2*lease)
	}
	// The paused node still has the queue loaded, but cannot write it.
	err := send(t, victim, queue, "late")
	if !errors.Is(err, broker.ErrNotOwned) {
		t.Fatalf("late send through the paused node: %v, want ErrNotOwned", err)
	}
	got, err := newOwner.b().Peek(ctx, queue, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	if strings.Join(bodies, ",") != "before-0,before-1,before-2,before-3,before-4" {
		t.Fatalf("the new owner holds %v", bodies)
	}
	// Back, the node finds it lost the lease and serves nothing it lost.
	victim.srv.Node().Resume()
	poll.Until(t, 10*time.Second, "the resumed node to stop serving "+queue, func() bool {
		_, err := victim.b().Peek(ctx, queue, 0, 1)
		return errors.Is(err, broker.ErrNotOwned)
	})
	settled(t, 9, a, b, c)
}

// TestStopHandsOver: a node stopping gracefully hands its entities to the
// others before it exits, without waiting for the lease time, and they
// rebuild them from the store.
func TestStopHandsOver(t *testing.T) {
	u := clusterURL(t)
	a, b := startNode(t, u, "a"), startNode(t, u, "b")
	ctx := context.Background()
	for i := range 6 {
		if err := a.b().CreateQueue(ctx, fmt.Sprintf("q%d", i), broker.QueueProperties{RequiresSession: i%2 == 1}); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, 6, a, b)
	for i := range 6 {
		q := fmt.Sprintf("q%d", i)
		o := ownerOf(t, q, a, b)
		m := &broker.Message{Body: []byte(q)}
		if i%2 == 1 {
			m.SessionID = "s"
		}
		if err := o.b().Send(ctx, q, []*broker.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	stopping := time.Now()
	if err := a.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	settled(t, 6, b)
	if d := time.Since(stopping); d >= lease {
		t.Errorf("handover took %v, not less than the lease time %v", d, lease)
	}
	for i := range 6 {
		q := fmt.Sprintf("q%d", i)
		var got []*broker.Message
		var err error
		if i%2 == 1 {
			got, err = b.b().PeekSession(ctx, q, "s", 0, 10)
		} else {
			got, err = b.b().Peek(ctx, q, 0, 10)
		}
		if err != nil || len(got) != 1 || string(got[0].Body) != q {
			t.Errorf("%s on b after a stopped: %v, %v", q, got, err)
		}
	}
}

// TestCreatedQueueServedAtOnce: a queue created through the node that is to
// serve it can be used as soon as the creation returns.
func TestCreatedQueueServedAtOnce(t *testing.T) {
	a := startNode(t, clusterURL(t), "a")
	for i := range 5 {
		q := fmt.Sprint("new", i)
		if err := a.b().CreateQueue(context.Background(), q, broker.QueueProperties{}); err != nil {
			t.Fatal(err)
		}
		if err := send(t, a, q, "first"); err != nil {
			t.Fatalf("send right after creating %s: %v", q, err)
		}
	}
}

// BenchmarkTakeOver measures how long a node takes to rebuild a queue it
// is handed: 100,000 messages of 1 KiB in 1,000 sessions (a session-enabled
// queue is loaded whole), handed over by a stopping node. Each iteration
// moves the queue once (the stop, the handover and the rebuild); the
// figure is ns/op.
func BenchmarkTakeOver(b *testing.B) {
	u := clusterURL(b)
	t := b
	ctx := context.Background()
	first := startNode(t, u, "n0")
	if err := first.b().CreateQueue(ctx, "big", broker.QueueProperties{RequiresSession: true}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := 0; i < 100_000; i += 500 {
		batch := make([]*broker.Message, 500)
		for j := range batch {
			batch[j] = &broker.Message{Body: body, SessionID: fmt.Sprint("s", (i+j)%1000)}
		}
		if err := first.b().Send(ctx, "big", batch); err != nil {
			b.Fatal(err)
		}
	}
	cur := first
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		next := startNode(t, u, fmt.Sprint("n", i+1))
		b.StartTimer()
		if err := cur.srv.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		if !poll.Wait(time.Minute, func() bool { return len(next.srv.Node().Owned()) == 1 }) {
			b.Fatal("the queue was not taken over")
		}
		cur = next
	}
}

// Changes announced while a node's notification listener is down are lost
// with it; once it listens again, the node re-reads all shared metadata.
func TestNodeCatchesUpAfterLosingNotifications(t *testing.T) {
	u := clusterURL(t)
	a := startNode(t, u, "a")
	ctx := context.Background()
	dsn, opts, err := postgres.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	// A change no notification reports: a broker outside the cluster
	// writes to the same table and announces nothing.
	raw, err := postgres.Open(ctx, dsn, postgres.Options{Table: opts.Table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	outsider, err := broker.Open(ctx, raw, broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outsider.Close() })
	if err := outsider.CreateQueue(ctx, "unannounced", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.b().GetQueue(ctx, "unannounced"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("the node knows of a queue no one announced: %v", err)
	}
	// Cut the node's listening connection.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cut int
	listen := `LISTEN "` + strings.ToLower(opts.Table) + `_changes"`
	if err := conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1", listen).Scan(&cut); err != nil || cut < 1 { // the outsider's store listens too
		t.Fatalf("cutting the listener (%s): %d cut, %v", listen, cut, err)
	}
	poll.Until(t, 20*time.Second, "the node to learn of the unannounced queue", func() bool {
		_, err := a.b().GetQueue(ctx, "unannounced")
		return err == nil
	})
	settled(t, 1, a)
}
