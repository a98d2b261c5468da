//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/cluster"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/postgres"
)

// failoverLease is the nodes' --lease-time.
const failoverLease = 2 * time.Second

// TestFailover runs three `busbar serve` nodes over one PostgreSQL table,
// loads them with the official SDK, and SIGKILLs the node serving the
// test's queues, twice (three nodes, then two): from what the SDK
// acknowledged, nothing acknowledged is lost, nothing completed comes back,
// per-session order and session state hold and scheduled messages fire
// once — the crash test's ledger, across a change of node instead of a
// restart. It measures how long the queues go unserved (bounded by the
// lease time plus the rebuild).
//
// Clients reach the cluster through one endpoint, a round-robin TCP load
// balancer that knows nothing of entities (see balancer): their
// connections land on all three nodes, which forward the links to the node
// serving the queues, and after a kill the SDKs' own retries reconnect
// through it.
func TestFailover(t *testing.T) {
	sh := shape{producers: 4, consumers: 3, sessions: 3, hold: 24, ops: 1000}
	if testing.Short() {
		sh.ops = 400
	}
	cl := startCluster(t)
	for round := 1; round <= 2; round++ {
		cl.round(t, round, sh, func(victim string) time.Time {
			kill(t, cl.procs[victim])
			cl.setProc(victim, nil)
			return time.Now()
		})
	}
	cl.stop(t)
}

// TestRollingRestart restarts every node in turn, with SIGTERM, under load,
// as an upgrade does: each node hands what it serves over before it exits
// and takes its share back when it returns. The node serving the test's
// queues goes last (its locks die with it, as the ledger expects), so the
// load runs through the restarts of the others first. Each cycle is a
// round of the ledger; BUSBAR_ROLLING_CYCLES sets their number (default 1).
func TestRollingRestart(t *testing.T) {
	sh := shape{producers: 4, consumers: 3, sessions: 3, hold: 24, ops: 600}
	if testing.Short() {
		sh.ops = 300
	}
	cycles := 1
	if v := os.Getenv("BUSBAR_ROLLING_CYCLES"); v != "" {
		if _, err := fmt.Sscan(v, &cycles); err != nil {
			t.Fatalf("BUSBAR_ROLLING_CYCLES=%q: %v", v, err)
		}
	}
	cl := startCluster(t)
	for round := 1; round <= cycles; round++ {
		cl.round(t, round, sh, func(victim string) time.Time {
			var stopped time.Time
			for _, id := range append(without(cl.ids, victim), victim) {
				terminate(t, cl.procs[id])
				stopped = time.Now()
				cl.setProc(id, cl.start(t, id))
			}
			return stopped
		})
	}
	cl.stop(t)
}

func without(ids []string, x string) []string {
	var out []string
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

// testCluster is three `busbar serve` nodes over one PostgreSQL table,
// behind one round-robin balancer.
type testCluster struct {
	bin, cfg, dir, storeURL string
	ids                     []string
	procs                   map[string]*serveproc.Process
	st                      store.Store
	connStr                 string // through the balancer
	l                       *ledger
	mu                      sync.Mutex // guards procs' entries for the balancer
}

// addrs returns the nodes' AMQP addresses, in the order of ids.
func (cl *testCluster) addrs() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []string
	for _, id := range cl.ids {
		if p := cl.procs[id]; p != nil {
			out = append(out, p.AMQPAddr())
		}
	}
	return out
}

// setProc records (p != nil) or forgets the process of node id.
func (cl *testCluster) setProc(id string, p *serveproc.Process) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if p == nil {
		delete(cl.procs, id)
	} else {
		cl.procs[id] = p
	}
}

func startCluster(t *testing.T) *testCluster {
	dsn := pgtest.DSN(t)
	table := fmt.Sprintf("cluster_%d_%d", os.Getpid(), time.Now().UnixNano())
	cl := &testCluster{dir: t.TempDir(), storeURL: dsn + sep(dsn) + "busbar_table=" + table,
		ids: colocatedIDs(), procs: map[string]*serveproc.Process{}, l: newLedger()}
	cl.bin = buildBusbar(t, cl.dir)
	cl.cfg = cl.dir + "/Config.json"
	if err := os.WriteFile(cl.cfg, []byte(configJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range cl.ids {
		cl.setProc(id, cl.start(t, id))
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cl.st = st
	lb := startBalancer(t, cl.addrs)
	cl.connStr = withEndpoint(cl.procs[cl.ids[0]].ConnectionString(), lb.addr())
	return cl
}

func (cl *testCluster) start(t *testing.T, id string) *serveproc.Process {
	return startChild(t, cl.bin, cl.dir+"/data-"+id, cl.cfg,
		"--store", cl.storeURL, "--node-id", id, "--lease-time", failoverLease.String())
}

// round loads the cluster until the kill condition, then hits the node
// serving the queues with fail (which returns when the node stopped),
// measures how long the queue goes unserved, drains and checks the ledger.
func (cl *testCluster) round(t *testing.T, round int, sh shape, fail func(victim string) time.Time) {
	t.Helper()
	l := cl.l
	victim := waitOwner(t, cl.st, queueName)
	if o := waitOwner(t, cl.st, sessionName); o != victim {
		t.Fatalf("round %d: the queues are on %s and %s; the node ids were chosen to keep them together", round, victim, o)
	}
	ld := newLoad(l, nil, cl.connStr, sh)
	lctx, cancel := context.WithCancel(context.Background())
	ld.start(lctx, round)
	select {
	case <-ld.kill:
	case <-time.After(loadTimeout):
		cancel()
		report(t, l)
		t.Fatalf("round %d: the load did not reach its kill condition in %v: %s", round, loadTimeout, ld.summary())
	}
	ld.crashed.Store(true)
	stopped := fail(victim)
	cancel()
	waitWorkers(t, ld)
	held := l.crashed()
	served := waitServed(t, cl.connStr)
	t.Logf("round %d: stopped %s (%s); %d messages locked; queue served again %v after the node stopped (lease %v)",
		round, victim, ld.summary(), held, served.Sub(stopped).Round(time.Millisecond), failoverLease)
	if d := served.Sub(stopped); d > failoverLease+3*time.Second {
		t.Errorf("round %d: the queue was unserved for %v, beyond the lease time %v plus 3s of detection and rebuild", round, d, failoverLease)
	}
	drain(t, l, cl.connStr)
	checkSessions(t, l, cl.connStr, sh.sessions)
	dst := l.endDrain()
	t.Logf("round %d: drained: %d messages delivered, %d of %d held at the stop (%d delivered more than once), %d scheduled before it",
		round, dst.delivered, dst.heldBack, dst.heldAtCrash, dst.heldCounted, dst.scheduledBack)
	if dst.heldCounted == 0 || dst.scheduledBack == 0 {
		t.Errorf("round %d exercised too little: %d held messages counted, %d scheduled messages fired after the stop", round, dst.heldCounted, dst.scheduledBack)
	}
	report(t, l)
	if t.Failed() {
		for id, p := range cl.procs {
			t.Logf("node %s's log:\n%s", id, p.LogTail(16<<10))
		}
		t.FailNow()
	}
}

// stop stops the remaining nodes with SIGTERM.
func (cl *testCluster) stop(t *testing.T) {
	for _, p := range cl.procs {
		terminate(t, p)
	}
}

// colocatedIDs returns three node ids under which the placement puts the
// test's two queues (entity ids 1 and 2, declared in that order) on one
// node, with three nodes and again with the two that remain: so each kill
// takes both, sessions included.
func colocatedIDs() []string {
	for k := 0; ; k++ {
		ids := []string{fmt.Sprintf("a%d", k), fmt.Sprintf("b%d", k), fmt.Sprintf("c%d", k)}
		first := cluster.Place(1, ids)
		if cluster.Place(2, ids) != first {
			continue
		}
		var rest []string
		for _, id := range ids {
			if id != first {
				rest = append(rest, id)
			}
		}
		if cluster.Place(1, rest) == cluster.Place(2, rest) {
			return ids
		}
	}
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// withEndpoint replaces a connection string's endpoint by addr.
func withEndpoint(connStr, addr string) string {
	return sas.ReplaceField(connStr, "Endpoint", "sb://"+addr)
}

// waitOwner returns the node holding entity's lease once one does.
func waitOwner(t *testing.T, st store.Store, entity string) string {
	t.Helper()
	var node string
	poll.UntilNil(t, 20*time.Second, "a node to hold "+entity, func() error {
		n, _, ok, err := cluster.Owner(context.Background(), st, entity)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return fmt.Errorf("no node holds %s", entity)
		}
		node = n
		return nil
	})
	return node
}

// waitServed returns when a peek of the queue through the balancer succeeds.
func waitServed(t *testing.T, connStr string) time.Time {
	t.Helper()
	poll.UntilNil(t, 30*time.Second, "the queue served again after the kill", func() error { return peekOnce(connStr) })
	return time.Now()
}

func peekOnce(connStr string) error {
	c, err := azservicebus.NewClientFromConnectionString(connStr,
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		return err
	}
	defer closeClient(c)
	r, err := c.NewReceiverForQueue(queueName, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = r.PeekMessages(ctx, 1, nil)
	return err
}

// balancer is the cluster's one endpoint: a TCP load balancer that knows
// nothing of entities. Each connection goes to the next live node in turn
// (a node that refuses the connection is skipped), so the SDK clients land
// on all three nodes, and most of their links are forwarded to the node
// that serves the queue.
type balancer struct {
	l     net.Listener
	nodes func() []string // the nodes' AMQP addresses
	wg    sync.WaitGroup

	mu   sync.Mutex
	next int
}

func startBalancer(t *testing.T, nodes func() []string) *balancer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{l: l, nodes: nodes}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() {
		_ = l.Close()
		b.wg.Wait()
	})
	return b
}

func (b *balancer) addr() string { return b.l.Addr().String() }

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		go b.route(c)
	}
}

func (b *balancer) route(c net.Conn) {
	addrs := b.nodes()
	b.mu.Lock()
	first := b.next
	b.next++
	b.mu.Unlock()
	var up net.Conn
	for i := range addrs {
		var err error
		if up, err = net.DialTimeout("tcp", addrs[(first+i)%len(addrs)], time.Second); err == nil {
			break
		}
	}
	if up == nil {
		_ = c.Close() // the client retries
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}
