package geo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/geo/geopg"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/processor"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const queue = "shipments"

// proxy forwards TCP connections to a target that may change, and can be
// cut: its connections closed and new ones refused until Restore. It
// stands for a region or a database becoming unreachable.
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	down   bool
	conns  map[net.Conn]struct{}
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.Cut() })
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down, target := p.down, p.target
		if !down {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		go p.pipe(c, target)
	}
}

func (p *proxy) pipe(c net.Conn, target string) {
	u, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = u.Close()
		p.drop(c)
		return
	}
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	p.drop(c)
	p.drop(u)
}

func (p *proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.down = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Restore accepts connections again, to target (unchanged if "").
func (p *proxy) Restore(target string) {
	p.mu.Lock()
	p.down = false
	if target != "" {
		p.target = target
	}
	p.mu.Unlock()
}

var endpoint = regexp.MustCompile(`sb://[^;]+`)

// viaProxy rewrites a connection string's endpoint to the proxy's.
func viaProxy(connStr string, p *proxy) string {
	return endpoint.ReplaceAllString(connStr, "sb://"+p.Addr())
}

func endpointAddr(connStr string) string {
	return strings.TrimPrefix(endpoint.FindString(connStr), "sb://")
}

// quick retries: a region that is down is found out in well under a second.
var clientOptions = &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{
	MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 300 * time.Millisecond}}

func newClient(t testing.TB, connStr string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(connStr, clientOptions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

func newSender(t testing.TB, c *azservicebus.Client) *azservicebus.Sender {
	t.Helper()
	s, err := c.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// region is one namespace (an in-process broker) reached through a proxy.
type region struct {
	name   string
	srv    *busbartest.Server
	px     *proxy
	client *azservicebus.Client
}

var queueProps = broker.QueueProperties{RequiresSession: true, MaxDeliveryCount: 1000, LockDuration: 5 * time.Second}

func newRegion(t testing.TB, name string) *region {
	t.Helper()
	srv := busbartest.Start(t, busbartest.WithQueue(queue, queueProps))
	px := newProxy(t, endpointAddr(srv.ConnectionString()))
	return &region{name: name, srv: srv, px: px, client: newClient(t, viaProxy(srv.ConnectionString(), px))}
}

// counts returns the region's active, scheduled and dead-lettered messages.
func (r *region) counts(t testing.TB) (active, scheduled, dead int32) {
	t.Helper()
	ac, err := r.srv.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := ac.GetQueueRuntimeProperties(ctx, queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.ActiveMessageCount, p.ScheduledMessageCount, p.DeadLetterMessageCount
}

// world is the journal and the table of effects the handlers write in the
// journal's transaction.
type world struct {
	direct  *pgxpool.Pool // for the test's own queries
	effects string
	table   string
	dsn     string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := &world{direct: pool, dsn: dsn, table: tableName(t, pool, "geo_journal_"), effects: tableName(t, pool, "geo_effects_")}
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE %s (
	seq bigserial PRIMARY KEY, session text NOT NULL, position bigint NOT NULL, region text NOT NULL, message_id text NOT NULL)`,
		pgx.Identifier{w.effects}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	j := w.journal(t, nil)
	if err := j.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// journal returns a Store on the world's table, through px when set.
func (w *world) journal(t testing.TB, px *proxy) *geopg.Store {
	t.Helper()
	dsn := w.dsn
	if px != nil {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = px.Addr()
		dsn = u.String()
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := geopg.New(pool, &geopg.Options{Table: w.table})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// handler records the effect of a message in the journal's transaction;
// before, if set, runs first (to block or fail).
func (w *world) handler(st *geopg.Store, before func(ctx context.Context, wk *geo.Work) error) geo.Handler {
	return func(ctx context.Context, wk *geo.Work) error {
		if before != nil {
			if err := before(ctx, wk); err != nil {
				return err
			}
		}
		return st.CompleteWith(ctx, wk, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (session, position, region, message_id) VALUES ($1, $2, $3, $4)`,
				pgx.Identifier{w.effects}.Sanitize()), wk.Session, wk.Position, wk.Region, wk.Message.MessageID)
			return err
		})
	}
}

type effect struct {
	session  string
	position int64
	region   string
}

func (w *world) applied(t testing.TB) []effect {
	t.Helper()
	rows, err := w.direct.Query(context.Background(), fmt.Sprintf(`SELECT session, position, region FROM %s ORDER BY seq`, pgx.Identifier{w.effects}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (effect, error) {
		var e effect
		err := r.Scan(&e.session, &e.position, &e.region)
		return e, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// verify checks that every session of want (session → last position) was
// applied exactly once per position, in order, and reports which region
// applied how many.
func (w *world) verify(t testing.TB, want map[string]int64) map[string]int {
	t.Helper()
	next := map[string]int64{}
	byRegion := map[string]int{}
	for _, e := range w.applied(t) {
		if e.position != next[e.session]+1 {
			t.Errorf("session %s: position %d applied after %d (region %s): out of order or twice", e.session, e.position, next[e.session], e.region)
		}
		next[e.session] = max(next[e.session], e.position)
		byRegion[e.region]++
	}
	for s, n := range want {
		if next[s] != n {
			t.Errorf("session %s: applied up to %d, want %d", s, next[s], n)
		}
	}
	return byRegion
}

// waitApplied waits until n effects are recorded.
func (w *world) waitApplied(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	poll.Until(t, timeout, fmt.Sprintf("%d effects", n), func() bool { return len(w.applied(t)) >= n })
}

// run starts a consumer and closes it when the test ends. Close waits for
// the handlers in flight even after its deadline, so a handler that never
// returns would hang the test's end: that fails the test instead.
func run(t testing.TB, c *geo.Consumer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Close(ctx)
			<-done
		}()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Errorf("consumer %s still running 30s after Close: a handler that does not return", c.Owner())
		}
	})
}

func consumer(t testing.TB, r *region, j geo.Journal, h geo.Handler, o geo.ConsumerOptions) *geo.Consumer {
	t.Helper()
	o.Region = r.name
	if o.SessionIdleTimeout == 0 {
		o.SessionIdleTimeout = 300 * time.Millisecond
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = 10 * time.Second
	}
	if o.Lease == 0 {
		o.Lease = 3 * time.Second
	}
	o.OnError = func(error) {}
	c, err := geo.NewConsumer(r.client, processor.Queue(queue), j, h, &o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// message returns status position of a shipment.
func message(session string, pos int64) *azservicebus.Message {
	id := fmt.Sprintf("%s-%d", session, pos)
	return &azservicebus.Message{MessageID: &id, SessionID: &session, Body: []byte(id)}
}

// sendAll sends positions from..to of each session through s, session by
// session interleaved, and returns how many each namespace accepted.
func sendAll(t testing.TB, s *geo.Sender, sessions []string, from, to int64) (primary, secondary int) {
	t.Helper()
	for p := from; p <= to; p++ {
		for _, sid := range sessions {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			sent, err := s.Send(ctx, message(sid, p), p)
			cancel()
			if err != nil {
				t.Fatalf("send %s/%d: %v", sid, p, err)
			}
			if sent.Primary == nil {
				primary++
			}
			if sent.Secondary == nil {
				secondary++
			}
		}
	}
	return primary, secondary
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	sort.Strings(out)
	return out
}

func upTo(sessions []string, n int64) map[string]int64 {
	m := map[string]int64{}
	for _, s := range sessions {
		m[s] = n
	}
	return m
}

// drained waits until neither region holds an active or scheduled message
// and fails if any was dead-lettered.
func drained(t testing.TB, regions ...*region) {
	t.Helper()
	for _, r := range regions {
		poll.Until(t, 60*time.Second, r.name+" drained", func() bool {
			a, s, _ := r.counts(t)
			return a == 0 && s == 0
		})
		if _, _, d := r.counts(t); d != 0 {
			t.Errorf("%s: %d messages dead-lettered", r.name, d)
		}
	}
}

// withPosition marks m as position pos, as the Sender does.
func withPosition(m *azservicebus.Message, pos int64) *azservicebus.Message {
	m.ApplicationProperties = map[string]any{geo.PositionProperty: pos}
	return m
}

// pgAddr is the test PostgreSQL's host:port.
func pgAddr(t testing.TB, w *world) string {
	t.Helper()
	u, err := url.Parse(w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// verifyWithGaps is verify for sessions where skip(session, position)
// positions failed for good (dead-lettered, never applied).
func (w *world) verifyWithGaps(t testing.TB, want map[string]int64, skip func(string, int64) bool) map[string]int {
	t.Helper()
	next := map[string]int64{}
	byRegion := map[string]int{}
	expect := func(s string, after int64) int64 {
		p := after + 1
		for skip(s, p) {
			p++
		}
		return p
	}
	for _, e := range w.applied(t) {
		if e.position != expect(e.session, next[e.session]) {
			t.Errorf("session %s: position %d applied after %d (region %s): out of order or twice", e.session, e.position, next[e.session], e.region)
		}
		next[e.session] = max(next[e.session], e.position)
		byRegion[e.region]++
	}
	for s, n := range want {
		last := n
		for skip(s, last) {
			last--
		}
		if next[s] != last {
			t.Errorf("session %s: applied up to %d, want %d", s, next[s], last)
		}
	}
	return byRegion
}

// count returns how many effects are recorded (-1 when it cannot tell).
func (w *world) count() int64 {
	var n int64
	if err := w.direct.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s`, pgx.Identifier{w.effects}.Sanitize())).Scan(&n); err != nil {
		return -1
	}
	return n
}

// tableName returns a fresh table name, the table dropped (if created)
// when the test ends.
func tableName(t testing.TB, pool *pgxpool.Pool, prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
	})
	return name
}
