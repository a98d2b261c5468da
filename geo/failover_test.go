//go:build unix

package geo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/jackc/pgx/v5"
)

const failoverConfig = `{"UserConfig":{"Namespaces":[{"Name":"geo","Queues":[{"Name":"orders","Properties":{"MaxDeliveryCount":100}}]}]}}`

// pair is a PostgreSQL primary and its streaming standby, run by
// scripts/pg-standby.sh on free ports.
type pair struct {
	script, dir      string
	primary, standby string // DSNs
	env              []string
}

func startPair(t *testing.T) *pair {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "busbar-geo-pair-")
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := serveproc.FreeAddr()
	sa, _ := serveproc.FreeAddr()
	p := &pair{script: filepath.Join(root, "scripts", "pg-standby.sh"), dir: dir, env: append(os.Environ(),
		"BUSBAR_PG_STANDBY_DIR="+dir,
		"BUSBAR_PG_PRIMARY_PORT="+pa[strings.LastIndex(pa, ":")+1:],
		"BUSBAR_PG_STANDBY_PORT="+sa[strings.LastIndex(sa, ":")+1:])}
	t.Cleanup(func() { _, _ = p.run("stop") })
	out, err := p.run("start")
	if err != nil {
		if os.Getenv(pgtest.EnvRequire) == "" && strings.Contains(out, "no PostgreSQL server binaries") {
			t.Skip(out)
		}
		t.Fatalf("scripts/pg-standby.sh start: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "export BUSBAR_PG_PRIMARY_DSN="); ok {
			p.primary = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(line, "export BUSBAR_PG_STANDBY_DSN="); ok {
			p.standby = strings.Trim(v, "'")
		}
	}
	if p.primary == "" || p.standby == "" {
		t.Fatalf("scripts/pg-standby.sh start printed no DSNs:\n%s", out)
	}
	return p
}

func (p *pair) run(cmd string) (string, error) {
	c := exec.Command("bash", p.script, cmd)
	c.Env = p.env
	out, err := c.CombinedOutput()
	return string(out), err
}

func (p *pair) must(t *testing.T, cmd string) {
	t.Helper()
	if out, err := p.run(cmd); err != nil {
		t.Fatalf("scripts/pg-standby.sh %s: %v\n%s", cmd, err, out)
	}
}

// syncState returns the standby's state as the primary sees it
// (pg_stat_replication.sync_state: "sync" or "async"), or "".
func (p *pair) syncState() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.primary)
	if err != nil {
		return ""
	}
	defer conn.Close(ctx)
	var s string
	_ = conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'`).Scan(&s)
	return s
}

// TestNamespaceFailover fails a namespace over the way Service Bus
// Geo-Replication promotes a secondary region: `busbar serve --store` on a
// PostgreSQL primary with a streaming standby, producers sending, the
// primary lost at once (immediate shutdown, and the node killed), the
// standby promoted and a new node started on it. With a synchronous
// standby nothing acknowledged is lost; with an asynchronous one the test
// measures what was (the data-loss window) and reports it.
func TestNamespaceFailover(t *testing.T) {
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) { failover(t, mode) })
	}
}

type ack struct {
	id int
	at time.Time
}

func failover(t *testing.T, mode string) {
	p := startPair(t)
	p.must(t, mode)
	poll.Until(t, 30*time.Second, "the standby streaming in mode "+mode, func() bool { return p.syncState() == mode })
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(failoverConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	table := "busbar_geo_failover"
	node := func(dsn, data string) *serveproc.Process {
		n, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, data), Config: cfg, LogLimit: 64 << 10,
			Args: []string{"--store", dsn + "&busbar_table=" + table}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	primary := node(p.primary, "primary")
	client := newClient(t, primary.ConnectionString())

	// Producers: ids in order per producer; an acknowledged send is on
	// the primary's disk.
	const producers = 4
	var mu sync.Mutex
	var acked []ack
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := client.NewSender("orders", nil)
			if err != nil {
				t.Error(err)
				return
			}
			for i := w; ctx.Err() == nil; i += producers {
				id := strconv.Itoa(i)
				sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
				err := s.SendMessage(sctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil)
				scancel()
				if err != nil {
					return // the primary is gone
				}
				mu.Lock()
				acked = append(acked, ack{i, time.Now()})
				mu.Unlock()
			}
		}()
	}
	poll.Until(t, 30*time.Second, "load under way", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 400 })
	// The region is lost: its database at once, then its node.
	p.must(t, "crash-primary")
	crashed := time.Now()
	if err := primary.Kill(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	promoteStart := time.Now()
	p.must(t, "promote")
	secondary := node(p.standby, "secondary")
	rto := time.Since(promoteStart)

	got := map[int]bool{}
	rc, err := newClient(t, secondary.ConnectionString()).NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		msgs, err := rc.ReceiveMessages(rctx, 500, nil)
		rcancel()
		if err != nil && rctx.Err() == nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			id, _ := strconv.Atoi(m.MessageID)
			got[id] = true
		}
	}
	var lost []ack
	for _, a := range acked {
		if !got[a.id] {
			lost = append(lost, a)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].at.Before(lost[j].at) })
	window := time.Duration(0)
	if len(lost) > 0 {
		window = crashed.Sub(lost[0].at)
	}
	t.Logf("%s standby: %d sends acknowledged, %d lost in the failover (window %v before the loss of the primary), %d messages on the promoted standby; promotion and a new node serving in %v (shared machine)",
		mode, len(acked), len(lost), window.Round(time.Microsecond), len(got), rto.Round(time.Millisecond))
	// Replication keeps commit order: what a producer lost is the tail of
	// what it sent, never a message before one that survived.
	lastKept := map[int]time.Time{}
	for _, a := range acked {
		if got[a.id] && a.at.After(lastKept[a.id%producers]) {
			lastKept[a.id%producers] = a.at
		}
	}
	for _, a := range lost {
		if a.at.Before(lastKept[a.id%producers]) {
			t.Errorf("message %d was lost although a later one of its producer survived", a.id)
		}
	}
	if mode == "sync" && len(lost) > 0 {
		t.Errorf("synchronous standby: %d acknowledged messages lost, the first %v", len(lost), fmt.Sprint(lost[:min(len(lost), 10)]))
	}
}
