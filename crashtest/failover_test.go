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
	"github.com/busbar-io/busbar/internal/serveproc"
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
// Clients reach the node that serves their queue through an entity-aware
// TCP router (one listener per queue, dialing the lease holder's address):
// nodes do not forward links to each other yet.
func TestFailover(t *testing.T) {
	dsn := pgtest.DSN(t)
	table := fmt.Sprintf("failover_%d_%d", os.Getpid(), time.Now().UnixNano())
	storeURL := dsn + sep(dsn) + "busbar_table=" + table
	rounds, sh := 2, shape{producers: 4, consumers: 3, sessions: 3, hold: 24, ops: 1000}
	if testing.Short() {
		sh.ops = 400
	}
	tmp := t.TempDir()
	bin := buildBusbar(t, tmp)
	cfg := tmp + "/Config.json"
	if err := os.WriteFile(cfg, []byte(configJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	ids := colocatedIDs()
	procs := map[string]*serveproc.Process{}
	for i, id := range ids {
		procs[id] = startChild(t, bin, fmt.Sprintf("%s/data%d", tmp, i), cfg,
			"--store", storeURL, "--node-id", id, "--lease-time", failoverLease.String())
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, postgres.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	qr, sr := startRouter(t, st, queueName), startRouter(t, st, sessionName)
	base := procs[ids[0]].ConnectionString()
	connStr, sessConn := withEndpoint(base, qr.addr()), withEndpoint(base, sr.addr())

	l := newLedger()
	for round := 1; round <= rounds; round++ {
		victim := waitOwner(t, st, queueName)
		if o := waitOwner(t, st, sessionName); o != victim {
			t.Fatalf("round %d: the queues are on %s and %s; the node ids were chosen to keep them together", round, victim, o)
		}
		ld := newLoad(l, connStr, sh)
		ld.sessConnStr = sessConn
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
		kill(t, procs[victim])
		killed := time.Now()
		delete(procs, victim)
		cancel()
		waitWorkers(t, ld)
		held := l.crashed()
		served := waitServed(t, connStr)
		t.Logf("round %d: killed %s (%s); %d messages locked; queue served again after %v (lease %v)",
			round, victim, ld.summary(), held, served.Sub(killed).Round(time.Millisecond), failoverLease)
		if d := served.Sub(killed); d > failoverLease+3*time.Second {
			t.Errorf("round %d: the queue was unserved for %v, beyond the lease time %v plus 3s of detection and rebuild", round, d, failoverLease)
		}
		drain(t, l, connStr)
		checkSessions(t, l, sessConn, sh.sessions)
		dst := l.endDrain()
		t.Logf("round %d: drained: %d messages delivered, %d of %d held at the kill (%d delivered more than once), %d scheduled before it",
			round, dst.delivered, dst.heldBack, dst.heldAtCrash, dst.heldCounted, dst.scheduledBack)
		if dst.heldCounted == 0 || dst.scheduledBack == 0 {
			t.Errorf("round %d exercised too little: %d held messages counted, %d scheduled messages fired after the kill", round, dst.heldCounted, dst.scheduledBack)
		}
		report(t, l)
	}
	for _, p := range procs {
		terminate(t, p)
	}
	if t.Failed() {
		for id, p := range procs {
			t.Logf("node %s's log:\n%s", id, p.LogTail(16<<10))
		}
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
	parts := strings.Split(connStr, ";")
	for i, p := range parts {
		if strings.HasPrefix(p, "Endpoint=") {
			parts[i] = "Endpoint=sb://" + addr
		}
	}
	return strings.Join(parts, ";")
}

// waitOwner returns the node holding entity's lease once one does.
func waitOwner(t *testing.T, st store.Store, entity string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		node, _, ok, err := cluster.Owner(context.Background(), st, entity)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return node
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node holds %s", entity)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServed returns when a peek of the queue through its router succeeds.
func waitServed(t *testing.T, connStr string) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := peekOnce(connStr); err == nil {
			return time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("the queue is not served again 30s after the kill: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// router accepts connections for one entity and pipes each to the node
// that holds the entity's lease when it connects.
type router struct {
	l      net.Listener
	st     store.Store
	entity string
	wg     sync.WaitGroup
}

func startRouter(t *testing.T, st store.Store, entity string) *router {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &router{l: l, st: st, entity: entity}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(func() {
		_ = l.Close()
		r.wg.Wait()
	})
	return r
}

func (r *router) addr() string { return r.l.Addr().String() }

func (r *router) serve() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		go r.route(c)
	}
}

func (r *router) route(c net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, addr, ok, err := cluster.Owner(ctx, r.st, r.entity)
	if err != nil || !ok {
		_ = c.Close() // the client retries
		return
	}
	up, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		_ = c.Close()
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
