//go:build unix

package geo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/geo/geopg"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/sas"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Environment of the serve test.
const (
	// envLong runs the longer campaign (more sessions, positions, kills).
	envLong = "BUSBAR_GEO_LONG"
	// envBinary names a prebuilt busbar binary; unset, ./cmd/busbar is built.
	envBinary = "BUSBAR_GEO_BINARY"
	// envChild* configure TestConsumerChild, the consumer process the
	// serve test starts and kills.
	envChildConn  = "BUSBAR_GEO_CHILD_CONN"
	envChildDSN   = "BUSBAR_GEO_CHILD_DSN"
	envChildTable = "BUSBAR_GEO_CHILD_TABLE"
	envChildFX    = "BUSBAR_GEO_CHILD_EFFECTS"
	envChildName  = "BUSBAR_GEO_CHILD_REGION"
	envChildGran  = "BUSBAR_GEO_CHILD_GRANULARITY"
)

const serveConfig = `{"UserConfig":{"Namespaces":[{"Name":"geo","Queues":[
 {"Name":"` + queue + `","Properties":{"RequiresSession":true,"LockDuration":"PT5S","MaxDeliveryCount":1000}}]}]}}`

// poison reports whether the handler fails for good on this position:
// every seventh position of the first session.
func poison(session string, pos int64) bool { return session == "trk-00" && pos%7 == 0 }

// TestConsumerChild is the consumer process of TestServeRegions; it runs
// only when started by it (envChildConn set) and until it is killed.
func TestConsumerChild(t *testing.T) {
	conn := os.Getenv(envChildConn)
	if conn == "" {
		t.Skip("runs as a child of TestServeRegions")
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(envChildDSN))
	if err != nil {
		t.Fatal(err)
	}
	st, err := geopg.New(pool, &geopg.Options{Table: os.Getenv(envChildTable)})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{effects: os.Getenv(envChildFX)}
	g := geo.PerSession
	if os.Getenv(envChildGran) == geo.PerMessage.String() {
		g = geo.PerMessage
	}
	client, err := azservicebus.NewClientFromConnectionString(conn, clientOptions)
	if err != nil {
		t.Fatal(err)
	}
	h := w.handler(st, func(ctx context.Context, wk *geo.Work) error {
		if poison(wk.Session, wk.Position) {
			return processor.Permanent(errors.New("poison status"))
		}
		return nil
	})
	c, err := geo.NewConsumer(client, processor.Queue(queue), st, h, &geo.ConsumerOptions{
		Region: os.Getenv(envChildName), Granularity: g, Lease: 2 * time.Second, WaitTimeout: 10 * time.Second,
		SessionIdleTimeout: 500 * time.Millisecond, MaxConcurrentSessions: 16, JournalRetry: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range time.Tick(time.Second) {
			fmt.Fprintf(os.Stderr, "stats %+v\n", c.Stats())
		}
	}()
	_ = c.Run(context.Background())
}

// servedRegion is a `busbar serve` child behind a proxy (so that a restart
// on a new port keeps the address clients use) and its consumer children.
type servedRegion struct {
	name, bin, data, cfg string
	px                   *proxy
	broker               *serveproc.Process
	client               *azservicebus.Client
	consumer             *exec.Cmd
	consumerExited       chan struct{}
}

func startServed(t *testing.T, name, bin, dir string) *servedRegion {
	t.Helper()
	r := &servedRegion{name: name, bin: bin, data: filepath.Join(dir, name), cfg: filepath.Join(dir, "Config.json")}
	if err := os.WriteFile(r.cfg, []byte(serveConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	r.startBroker(t)
	r.px = newProxy(t, r.broker.AMQPAddr())
	r.client = newClient(t, r.connStr())
	return r
}

func (r *servedRegion) startBroker(t *testing.T) {
	t.Helper()
	p, err := serveproc.Start(serveproc.Options{Binary: r.bin, DataDir: r.data, Config: r.cfg, HTTP: true, LogLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r.broker = p
	if r.px != nil {
		r.px.Restore(p.AMQPAddr())
	}
}

func (r *servedRegion) connStr() string { return viaProxy(r.broker.ConnectionString(), r.px) }

// startConsumer starts a consumer child process for the region.
func (r *servedRegion) startConsumer(t *testing.T, w *world, g geo.Granularity) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsumerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChildConn+"="+r.connStr(), envChildDSN+"="+w.dsn, envChildTable+"="+w.table,
		envChildFX+"="+w.effects, envChildName+"="+r.name, envChildGran+"="+g.String())
	logf, err := os.Create(filepath.Join(filepath.Dir(r.data), r.name+"-consumer.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	r.consumer, r.consumerExited = cmd, exited
	t.Cleanup(func() { r.killConsumer(t) })
}

// killConsumer sends SIGKILL to the consumer child, if it runs.
func (r *servedRegion) killConsumer(t *testing.T) {
	t.Helper()
	if r.consumer == nil {
		return
	}
	select {
	case <-r.consumerExited:
		return
	default:
	}
	_ = r.consumer.Process.Signal(syscall.SIGKILL)
	select {
	case <-r.consumerExited:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s consumer still running after SIGKILL", r.name)
	}
}

// dlq returns the dead-lettered messages of the region: MessageId → reason.
func (r *servedRegion) dlq(t *testing.T) map[string]string {
	t.Helper()
	rc, err := r.client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(context.Background())
	out := map[string]string{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msgs, err := rc.PeekMessages(ctx, 100, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			reason := ""
			if m.DeadLetterReason != nil {
				reason = *m.DeadLetterReason
			}
			out[m.MessageID] = reason
		}
	}
}

var built struct {
	sync.Mutex
	dir, bin string
}

// TestMain removes the busbar binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildBinary returns the busbar binary under test: envBinary's, or
// ./cmd/busbar built once for the package's tests.
func buildBinary(t *testing.T, _ string) string {
	t.Helper()
	if bin := os.Getenv(envBinary); bin != "" {
		return bin
	}
	built.Lock()
	defer built.Unlock()
	if built.bin != "" {
		return built.bin
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "busbar-geo-bin-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := serveproc.Build(ctx, root, filepath.Join(dir, "busbar")); err != nil {
		t.Fatal(err)
	}
	built.dir, built.bin = dir, filepath.Join(dir, "busbar")
	return built.bin
}

// TestServeRegions runs two `busbar serve` processes as two regions, a
// consumer process in each and a producer in the test, with the journal in
// PostgreSQL. Under load it SIGKILLs the primary consumer, then kills the
// primary broker entirely, keeps producing to the secondary alone,
// restarts the primary broker (on its data: a backlog) and its consumer,
// and checks that every position of every session was processed once, in
// order, or dead-lettered with a reason, and that nothing is left.
// BUSBAR_GEO_LONG=1 runs a longer campaign.
func TestServeRegions(t *testing.T) {
	if testing.Short() && os.Getenv(envLong) == "" {
		t.Skip("starts two brokers and four consumer processes")
	}
	eachGranularity(t, func(t *testing.T, g geo.Granularity) {
		sessions, positions, rounds := 8, int64(24), 1
		if os.Getenv(envLong) != "" {
			sessions, positions, rounds = 32, 120, 3
		}
		serveRegions(t, g, names("trk", sessions), positions, rounds)
	})
}

func serveRegions(t *testing.T, g geo.Granularity, sessions []string, positions int64, rounds int) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	w := newWorld(t)
	east, west := startServed(t, "east", bin, dir), startServed(t, "west", bin, dir)
	s, err := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: time.Second, Straggler: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	east.startConsumer(t, w, g)
	west.startConsumer(t, w, g)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range []*servedRegion{east, west} {
				b, _ := os.ReadFile(filepath.Join(dir, r.name+"-consumer.log"))
				t.Logf("%s consumer log (last):\n%s", r.name, tail(string(b), 3000))
			}
		}
	})

	// The producer: every session's positions in order, a send that
	// neither region accepted tried again (producers always can send
	// while one region is up).
	var sent, onlyOne atomic.Int64
	total := int64(len(sessions)) * positions
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := int64(1); p <= positions; p++ {
			for _, sid := range sessions {
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					res, err := s.Send(ctx, message(sid, p), p)
					cancel()
					if err == nil {
						if !res.Both() {
							onlyOne.Add(1)
						}
						break
					}
				}
				sent.Add(1)
			}
			// Keep at most a few positions ahead of processing, so that the
			// faults below land under load, not after it.
			ahead := (p - 8) * int64(len(sessions))
			poll.Wait(5*time.Minute, func() bool { return w.count()+p >= ahead })
		}
	}()
	applied := w.count
	for round := 1; round <= rounds; round++ {
		base := applied()
		poll.Until(t, 60*time.Second, "load under way", func() bool { return applied() >= base+int64(len(sessions)) })
		east.killConsumer(t)
		t.Logf("round %d: SIGKILLed the east consumer after %d effects, %d sent", round, applied(), sent.Load())
		poll.Until(t, 60*time.Second, "west taking over", func() bool { return applied() >= base+3*int64(len(sessions)) })
		if err := east.broker.Kill(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		east.px.Cut()
		t.Logf("round %d: killed the east broker after %d effects, %d sent", round, applied(), sent.Load())
		one := onlyOne.Load()
		poll.Until(t, 60*time.Second, "sends to west alone, processed", func() bool {
			return onlyOne.Load() >= one+2*int64(len(sessions)) && applied() >= base+5*int64(len(sessions))
		})
		east.startBroker(t)
		east.startConsumer(t, w, g)
		t.Logf("round %d: east back after %d effects, %d sent, %d accepted by one region only", round, applied(), sent.Load(), onlyOne.Load())
	}
	wg.Wait()
	// Everything is processed or dead-lettered with a reason.
	var failed int64
	for _, sid := range sessions {
		for p := int64(1); p <= positions; p++ {
			if poison(sid, p) {
				failed++
			}
		}
	}
	poll.Until(t, 120*time.Second, "every position processed", func() bool { return applied()+failed >= total })
	for _, r := range []*servedRegion{east, west} {
		poll.Until(t, 60*time.Second, r.name+" drained", func() bool {
			a, sc, _ := r.counts(t)
			return a == 0 && sc == 0
		})
	}
	want := map[string]int64{}
	for _, sid := range sessions {
		want[sid] = positions
	}
	got := w.verifyWithGaps(t, want, poison)
	// A region is drained when nothing is active or scheduled in it; a
	// poison message's copy may still be on its way to the dead-letter
	// queue then (its consumer settles after the count), so the queues
	// are read until every poison position is in one.
	var dead map[string]string
	poll.UntilNil(t, 60*time.Second, "every poison position dead-lettered", func() error {
		dead = map[string]string{}
		for _, r := range []*servedRegion{east, west} {
			for id, reason := range r.dlq(t) {
				if reason == "" {
					t.Errorf("%s: %s dead-lettered without a reason", r.name, id)
				}
				dead[id] = reason
			}
		}
		for _, sid := range sessions {
			for p := int64(1); p <= positions; p++ {
				if id := sid + "-" + strconv.FormatInt(p, 10); poison(sid, p) && dead[id] == "" {
					return fmt.Errorf("%s is in no dead-letter queue (found %v)", id, dead)
				}
			}
		}
		return nil
	})
	for _, sid := range sessions {
		for p := int64(1); p <= positions; p++ {
			id := sid + "-" + strconv.FormatInt(p, 10)
			if poison(sid, p) && dead[id] != geo.ReasonHandlerFailed {
				t.Errorf("%s: poison message not dead-lettered as %s (dead-letter reason %q)", id, geo.ReasonHandlerFailed, dead[id])
			}
			if !poison(sid, p) && dead[id] != "" {
				t.Errorf("%s: processed, yet dead-lettered as %q", id, dead[id])
			}
		}
	}
	t.Logf("%s: %d sent (%d accepted by one region only), applied by region %v, %d dead-lettered copies",
		g, sent.Load(), onlyOne.Load(), got, len(dead))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// counts returns the region's active, scheduled and dead-lettered messages,
// from the management API.
func (r *servedRegion) counts(t *testing.T) (active, scheduled, dead int32) {
	t.Helper()
	ac, err := busbartest.PlainAdminClient(sas.ReplaceField(r.broker.ConnectionString(), "Endpoint", "sb://"+r.broker.HTTPAddr()))
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
