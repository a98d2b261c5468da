//go:build unix

package consistent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/consistent/consistenttest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/processor"
)

// Environment of the crash test's handler child (the test binary itself).
const (
	envChild      = "BUSBAR_CONSISTENT_CRASH_CHILD" // set: run as the child
	envChildConn  = "BUSBAR_CONSISTENT_CRASH_CONN"
	envChildDSN   = "BUSBAR_CONSISTENT_CRASH_DSN"
	envChildTable = "BUSBAR_CONSISTENT_CRASH_TABLE"
	envChildMode  = "BUSBAR_CONSISTENT_CRASH_MODE" // "outbox" for the outbox variant
)

const crashConfig = `{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
  "Queues": [
    {"Name": "in", "Properties": {"LockDuration": "PT5S", "MaxDeliveryCount": 1000}},
    {"Name": "out", "Properties": {}}
  ], "Topics": []}], "Logging": {"Type": "File"}}}`

// crashRetention keeps every version, so that the verdict can read them all.
var crashRetention = consistent.Retention{MaxVersions: 1 << 30, MaxAge: -1}

// TestCrashHandlerChild is the handler process of TestCrash; it does
// nothing unless started by it, and runs until it is killed.
func TestCrashHandlerChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("the handler process of TestCrash")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(envChildDSN))
	if err != nil {
		t.Fatal(err)
	}
	store, err := consistentpg.New(pool, &consistentpg.Options{Table: os.Getenv(envChildTable), Retention: crashRetention})
	if err != nil {
		t.Fatal(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(os.Getenv(envChildConn), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := consistent.New(client, tallyHandler(2), &consistent.Options{Store: store, IDProperty: "game", Destination: "out",
		Outbox: os.Getenv(envChildMode) == string(onOutbox)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := processor.New(client, processor.Queue("in"), r.Handle, &processor.Options{MaxConcurrentCalls: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Fatal(p.Run(ctx)) // until SIGKILL
}

// TestCrash runs the handler in a child process against a real `busbar
// serve` and PostgreSQL, SIGKILLs it many times while it works through
// its inputs, and then accounts for every input: each is in its
// game's stream exactly once, each game's state counts its inputs (as a
// clean single pass would), and each logical output (two per input) was
// published with one identity, every copy identical, with no output of a
// run that did not commit. The destination has no duplicate detection.
// The outbox variant goes through the same, and must leave its outbox
// empty. Default: 600 inputs and 6 kills (outbox: 200 and 2);
// BUSBAR_LONG=1: 10,000 inputs and 60 kills each.
func TestCrash(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Skip("running as the child")
	}
	for _, c := range []struct {
		m             mode
		inputs, kills int
	}{{onPostgres, 600, 6}, {onOutbox, 200, 2}} {
		if os.Getenv("BUSBAR_LONG") == "1" {
			c.inputs, c.kills = 10000, 60
		}
		t.Run(string(c.m), func(t *testing.T) {
			t.Parallel()
			crashTest(t, c.m, c.inputs, c.kills)
		})
	}
}

func crashTest(t *testing.T, m mode, inputs, kills int) {
	const games = 20
	store, pool := consistenttest.PostgresStore(t, consistentpg.Options{Retention: crashRetention})
	table := pgx.Identifier{store.Table()}.Sanitize()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "busbar")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := serveproc.Build(bctx, root, bin); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "Config.json")
	if err := os.WriteFile(cfg, []byte(crashConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: filepath.Join(tmp, "data"), Config: cfg, LogLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	client := busbartest.NewClient(t, srv.ConnectionString())
	sendInputs(t, client, inputs, games)

	versions := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	env := append(os.Environ(), envChild+"=1", envChildConn+"="+srv.ConnectionString(),
		envChildDSN+"="+consistenttest.PostgresDSN(t), envChildTable+"="+store.Table(), envChildMode+"="+string(m))
	for k := 0; k <= kills; k++ {
		child := exec.Command(os.Args[0], "-test.run=^TestCrashHandlerChild$", "-test.count=1")
		child.Env = env
		var out lockedBuffer
		child.Stdout, child.Stderr = &out, &out
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		if k == kills {
			// The last child runs until every input is handled and
			// completed (what earlier children held locked comes back
			// when its lock expires).
			poll.UntilNil(t, 3*time.Minute, "every input handled", func() error {
				if n := versions(); n < inputs {
					return fmt.Errorf("%d of %d inputs stored", n, inputs)
				}
				if n := count(t, client, "in"); n > 0 {
					return fmt.Errorf("%d inputs not completed", n)
				}
				return nil
			})
		} else {
			// Kill it at a random point once it has made some progress.
			from, step := versions(), 5+rng.IntN(inputs/kills/2+1)
			if !poll.Wait(time.Minute, func() bool { return versions() >= min(from+step, inputs) }) {
				t.Fatalf("child %d made no progress from %d versions; its output:\n%s", k, from, out.String())
			}
		}
		_ = child.Process.Kill()
		_ = child.Wait()
	}
	verifyCrash(t, pool, table, client, inputs, games)
	var left int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{store.Table() + "_outbox"}.Sanitize()).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d outputs left in the outbox (%v)", left, err)
	}
}

// sendInputs sends inputs "m1".."mN", round robin over games.
func sendInputs(t *testing.T, client *azservicebus.Client, inputs, games int) {
	t.Helper()
	s, err := client.NewSender("in", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for from := 0; from < inputs; from += 200 {
		b, err := s.NewMessageBatch(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < min(from+200, inputs); i++ {
			id := "m" + strconv.Itoa(i+1)
			if err := b.AddMessage(&azservicebus.Message{MessageID: &id, ApplicationProperties: map[string]any{"game": fmt.Sprintf("g%d", i%games)}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx(t), b, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// count returns how many messages a queue holds (peeked, locked or not).
func count(t *testing.T, client *azservicebus.Client, queue string) int {
	t.Helper()
	r, err := client.NewReceiverForQueue(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	n := 0
	for {
		ms, err := r.PeekMessages(ctx(t), 250, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return n
		}
		n += len(ms)
	}
}

// verifyCrash accounts for every input and output.
func verifyCrash(t *testing.T, pool *pgxpool.Pool, table string, client *azservicebus.Client, inputs, games int) {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id, version, message_id, state::text FROM "+table+" ORDER BY id, version")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		game, mid, state string
		version          int64
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.game, &x.version, &x.mid, &x.state)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != inputs {
		t.Fatalf("%d versions for %d inputs", len(all), inputs)
	}
	seen := map[string]bool{}
	want := map[string]string{} // output id -> the properties it must carry
	last := map[string]row{}
	for _, r := range all {
		if seen[r.mid] {
			t.Fatalf("input %s stored twice", r.mid)
		}
		seen[r.mid] = true
		if prev, ok := last[r.game]; ok && prev.version != r.version-1 || !ok && r.version != 1 {
			t.Fatalf("game %s: version %d after %+v", r.game, r.version, prev)
		}
		last[r.game] = r
		for i := range 2 {
			want[consistent.OutputID(r.mid, i)] = fmt.Sprintf("i=%d(int64),input=%s(string),n=%d(int64)", i, r.mid, r.version-1)
		}
	}
	if len(last) != games {
		t.Fatalf("%d games have state, want %d", len(last), games)
	}
	for g, r := range last {
		var s tally
		if err := json.Unmarshal([]byte(r.state), &s); err != nil || int64(s.N) != r.version {
			t.Fatalf("game %s: state %s after %d inputs (%v)", g, r.state, r.version, err)
		}
	}
	e := &env{t: t, client: client}
	copies := map[string][]output{}
	for _, o := range e.published() {
		copies[o.ID] = append(copies[o.ID], o)
	}
	republished := 0
	for id, props := range want {
		os := copies[id]
		if len(os) == 0 {
			t.Fatalf("output %s (%s) was never published", id, props)
		}
		for _, o := range os {
			if o != os[0] || o.Props != props {
				t.Fatalf("output %s: copy %+v, want properties %s and identical to %+v", id, o, props, os[0])
			}
		}
		republished += len(os) - 1
		delete(copies, id)
	}
	for id, os := range copies {
		t.Fatalf("ghost output %s: %+v", id, os)
	}
	t.Logf("%d inputs over %d games, %d outputs, %d of them re-published after a kill (identical)", inputs, games, len(want), republished)
}

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
