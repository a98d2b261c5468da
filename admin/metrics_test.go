package admin

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func (e *env) scrape() string {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		e.t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

// hasLines asserts every line appears in the exposition.
func hasLines(t *testing.T, exposition string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(exposition, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("missing metric line %q", l)
		}
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", exposition)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.root()
	if _, err := c.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "feed", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSubscription(ctx, "feed", "s1", nil); err != nil {
		t.Fatal(err)
	}
	e.send("jobs", 4, 50)
	e.send("feed", 2, 10)
	got := e.receive("jobs", 2)
	e.deadLetter("jobs", got[0], "Poison")
	// The other lock expires.
	e.clk.Advance(2 * time.Minute)

	e.metrics.ConnectionOpened()
	e.metrics.ConnectionOpened()
	e.metrics.ConnectionClosed()
	e.metrics.LinkAttached("receiver")
	e.metrics.LinkAttached("sender")
	e.metrics.LinkAttached("sender")
	e.metrics.LinkDetached("sender")
	e.metrics.ObserveCommit(3*time.Millisecond, 16)
	e.metrics.ObserveWALSync(300 * time.Microsecond)
	e.metrics.ObserveWALSync(5 * time.Millisecond)

	info, err := e.b.GetQueue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	stats := e.st.Stats()
	x := e.scrape()
	hasLines(t, x,
		`busbar_messages_in_total{entity="jobs"} 4`,
		`busbar_messages_out_total{entity="jobs"} 2`,
		`busbar_messages_dead_lettered_total{entity="jobs",reason="Poison"} 1`,
		`busbar_lock_expirations_total{entity="jobs"} 1`,
		`busbar_entity_active_messages{entity="jobs",kind="queue"} 3`,
		`busbar_entity_dead_letter_messages{entity="jobs",kind="queue"} 1`,
		`busbar_entity_scheduled_messages{entity="jobs",kind="queue"} 0`,
		`busbar_entity_messages{entity="jobs",kind="queue"} 4`,
		`busbar_entity_size_bytes{entity="jobs",kind="queue"} `+itoa(info.Runtime.SizeInBytes),
		`busbar_entity_active_messages{entity="feed/Subscriptions/s1",kind="subscription"} 2`,
		`busbar_entity_active_messages{entity="feed",kind="topic"} 2`,
		`busbar_topic_subscriptions{entity="feed"} 1`,
		`busbar_connections 1`,
		`busbar_connections_opened_total 2`,
		`busbar_links{role="receiver"} 1`,
		`busbar_links{role="sender"} 1`,
		`busbar_store_commit_seconds_count 1`,
		`busbar_store_commit_batch_ops_sum 16`,
		`busbar_store_wal_sync_seconds_bucket{le="0.0004"} 1`,
		`busbar_store_wal_sync_seconds_bucket{le="0.0064"} 2`,
		`busbar_store_wal_sync_seconds_count 2`,
		`busbar_store_fsyncs_total `+itoa(int64(stats.Syncs)),
		`busbar_store_commits_total `+itoa(int64(stats.Commits)),
		`busbar_admin_requests_total{code="201",method="PUT",operation="entity"} 2`,
		`busbar_admin_requests_total{code="201",method="PUT",operation="subscription"} 1`,
	)
	if stats.Commits == 0 {
		t.Fatal("the store reported no commits")
	}
	if !strings.Contains(x, "go_goroutines ") || !strings.Contains(x, "process_") {
		t.Error("runtime and process collectors are missing")
	}
	// A second registration is ignored rather than panicking.
	e.metrics.CollectEntities(e.b)
	e.metrics.CollectStore(e.st.Stats)
	// A deleted entity disappears from the gauges.
	if _, err := c.DeleteQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	if x := e.scrape(); strings.Contains(x, `busbar_entity_active_messages{entity="jobs"`) {
		t.Error("gauges of a deleted queue are still exported")
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.ConnectionOpened()
	m.ConnectionClosed()
	m.LinkAttached("sender")
	m.LinkDetached("sender")
	m.MessagesIn("q", 1)
	m.MessagesOut("q", 1)
	m.DeadLettered("q", "r")
	m.LockExpired("q")
	m.ObserveCommit(time.Millisecond, 1)
	m.ObserveWALSync(time.Millisecond)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
