package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
)

// TestSendSetsEveryProperty sends with every flag and checks, through the
// official SDK, what arrived.
func TestSendSetsEveryProperty(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("orders", broker.QueueProperties{}))
	out := c.ok("send", "orders", `{"id": 42}`, "--subject", "created", "--message-id", "m1", "--correlation-id", "c1",
		"--content-type", "application/json", "--reply-to", "replies", "--to", "shop", "--ttl", "1h",
		"--property", "tenant=acme", "--property", "n:int=7", "--property", "small:int32=3", "--property", "ok:bool=true",
		"--property", "x:double=2.5", "--property", "at:time=2026-12-01T09:00:00Z")
	if out != "sent 1 message(s) to orders\n" {
		t.Fatalf("send printed %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.sdkClient().NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("received %d, %v", len(msgs), err)
	}
	m := msgs[0]
	if string(m.Body) != `{"id": 42}` || m.MessageID != "m1" || *m.Subject != "created" || *m.CorrelationID != "c1" || *m.ContentType != "application/json" ||
		*m.ReplyTo != "replies" || *m.To != "shop" || *m.TimeToLive != time.Hour {
		t.Fatalf("received %+v", m)
	}
	wantProps := map[string]any{"tenant": "acme", "n": int64(7), "small": int32(3), "ok": true, "x": 2.5, "at": time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	for k, v := range wantProps {
		got := m.ApplicationProperties[k]
		if gt, ok := got.(time.Time); ok {
			got = gt.UTC()
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("property %s = %#v, want %#v", k, m.ApplicationProperties[k], v)
		}
	}
}

func TestSendBodySources(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("q", broker.QueueProperties{}))
	file := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(file, []byte{0xff, 0x00, 0x01}, 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("send", "q", "from-arg")
	if r := c.runIn("from-stdin\n", "send", "q"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := c.runIn("dash-stdin", "send", "q", "-"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	c.ok("send", "q", "--file", file)
	var msgs []messageJSON
	if err := json.Unmarshal([]byte(c.ok("peek", "q", "--json")), &msgs); err != nil || len(msgs) != 4 {
		t.Fatalf("peek: %v, %d", err, len(msgs))
	}
	if *msgs[0].Body != "from-arg" || *msgs[1].Body != "from-stdin\n" || *msgs[2].Body != "dash-stdin" || msgs[3].Body != nil || string(msgs[3].BodyBase64) != "\xff\x00\x01" {
		t.Fatalf("bodies: %+v", msgs)
	}
	if out := c.ok("peek", "q", "--from-seq", "4"); !strings.Contains(out, "<3 bytes>") {
		t.Fatalf("binary body preview:\n%s", out)
	}
	c.expect(exitUsage, "send", "q", "--file", filepath.Join(t.TempDir(), "missing"))
}

func TestSendCountAndReceive(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("q", broker.QueueProperties{}))
	c.ok("send", "q", "copy", "--count", "25")
	if a, _ := c.counts("q"); a != 25 {
		t.Fatalf("active = %d, want 25", a)
	}
	// peek pages and stops at --count.
	var peeked []messageJSON
	if err := json.Unmarshal([]byte(c.ok("peek", "q", "--count", "10", "--from-seq", "5", "--json")), &peeked); err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 10 || *peeked[0].SequenceNumber != 5 || *peeked[9].SequenceNumber != 14 {
		t.Fatalf("peek --from-seq 5 --count 10 gave %d messages from %v", len(peeked), peeked[0].SequenceNumber)
	}

	// Peek-lock receive completes what it prints.
	out := c.ok("receive", "q", "--count", "10", "--wait", "2s")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 11 || !strings.Contains(lines[0], "DELIVERIES") {
		t.Fatalf("receive --count 10:\n%s", out)
	}
	if a, _ := c.counts("q"); a != 15 {
		t.Fatalf("after receiving 10: active = %d, want 15", a)
	}
	// Receive-and-delete with bare bodies; stops when the queue is empty.
	out = c.ok("receive", "q", "--count", "100", "--mode", "receive-and-delete", "--wait", "500ms", "--body-only")
	if out != strings.Repeat("copy\n", 15) {
		t.Fatalf("receive --body-only printed %q", out)
	}
	if a, _ := c.counts("q"); a != 0 {
		t.Fatalf("after receive-and-delete: active = %d", a)
	}
	r := c.run("receive", "q", "--wait", "100ms")
	if r.code != 0 || r.stdout != "" || r.stderr != "no messages\n" {
		t.Fatalf("receive on an empty queue: %+v", r)
	}
	if r := c.run("receive", "q", "--wait", "100ms", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("receive --json on an empty queue: %+v", r)
	}
}

func TestScheduleListCancel(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	c := newCLI(t, busbartest.WithFakeClock(start), busbartest.WithQueue("reminders", broker.QueueProperties{}))
	c.ok("send", "reminders", "now")
	var sched map[string]any
	if err := json.Unmarshal([]byte(c.ok("send", "reminders", "later", "--schedule", "2030-01-01T00:00:00Z", "--count", "3", "--json")), &sched); err != nil {
		t.Fatal(err)
	}
	seqs, _ := sched["sequenceNumbers"].([]any)
	if sched["scheduled"] != float64(3) || len(seqs) != 3 || sched["scheduledFor"] != "2030-01-01T00:00:00Z" {
		t.Fatalf("send --schedule --json = %v", sched)
	}
	out := c.ok("send", "reminders", "soon", "--schedule", "15m")
	if !strings.HasPrefix(out, "scheduled 1 message(s) on reminders for ") {
		t.Fatalf("send --schedule 15m printed %q", out)
	}

	out = c.ok("peek", "reminders")
	if strings.Count(out, "scheduled") != 4 || strings.Count(out, "active") != 1 {
		t.Fatalf("peek does not show the states:\n%s", out)
	}
	var listed []messageJSON
	if err := json.Unmarshal([]byte(c.ok("scheduled", "list", "reminders", "--json")), &listed); err != nil || len(listed) != 4 {
		t.Fatalf("scheduled list: %v, %d", err, len(listed))
	}
	for _, m := range listed {
		if m.State != "scheduled" || m.ScheduledEnqueueTime == nil {
			t.Fatalf("scheduled list gave %+v", m)
		}
	}
	table := c.ok("scheduled", "list", "reminders")
	if !strings.Contains(table, "SCHEDULED-FOR") || !strings.Contains(table, "2030-01-01T00:00:00.000Z") {
		t.Fatalf("scheduled list table:\n%s", table)
	}

	c.ok("scheduled", "cancel", "reminders", fmt.Sprint(seqs[0]), fmt.Sprint(seqs[1]))
	if err := json.Unmarshal([]byte(c.ok("scheduled", "list", "reminders", "--json")), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("after cancel, scheduled list: %v, %d", err, len(listed))
	}
	c.expect(exitNotFound, "scheduled", "cancel", "reminders", fmt.Sprint(seqs[0]))
}

func TestSessions(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("payments", broker.QueueProperties{RequiresSession: true}))
	c.ok("send", "payments", "a1", "--session", "alice")
	c.ok("send", "payments", "a2", "--session", "alice")
	c.ok("send", "payments", "b1", "--session", "bob")

	var ids []string
	if err := json.Unmarshal([]byte(c.ok("sessions", "list", "payments", "--json")), &ids); err != nil || !reflect.DeepEqual(ids, []string{"alice", "bob"}) {
		t.Fatalf("sessions list = %v, %v", ids, err)
	}
	if out := c.ok("sessions", "list", "payments"); out != "SESSION\nalice\nbob\n" {
		t.Fatalf("sessions list table %q", out)
	}

	if out := c.ok("session", "state", "get", "payments", "alice"); out != "" {
		t.Fatalf("empty state printed %q", out)
	}
	c.ok("session", "state", "set", "payments", "alice", `{"step": 3}`)
	if out := c.ok("session", "state", "get", "payments", "alice"); out != `{"step": 3}` {
		t.Fatalf("state = %q", out)
	}
	if r := c.runIn("from stdin", "session", "state", "set", "payments", "bob"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(c.ok("session", "state", "get", "payments", "bob", "--json")), &st); err != nil || st["state"] != "from stdin" || st["sessionId"] != "bob" {
		t.Fatalf("state --json = %v, %v", st, err)
	}
	c.ok("session", "state", "set", "payments", "alice", "--clear")
	if out := c.ok("session", "state", "get", "payments", "alice"); out != "" {
		t.Fatalf("cleared state = %q", out)
	}

	// A session's messages, in order.
	if out := c.ok("receive", "payments", "--session", "alice", "--count", "5", "--wait", "500ms", "--body-only"); out != "a1\na2\n" {
		t.Fatalf("receive --session alice printed %q", out)
	}
	if out := c.ok("receive", "payments", "--next-session", "--wait", "2s", "--body-only"); out != "b1\n" {
		t.Fatalf("receive --next-session printed %q", out)
	}
	if r := c.run("receive", "payments", "--next-session", "--wait", "300ms"); r.code != 0 || r.stderr != "no messages\n" {
		t.Fatalf("receive --next-session with none left: %+v", r)
	}
}

func TestSubscriptionAddressing(t *testing.T) {
	c := newCLI(t, busbartest.WithTopic("events", broker.TopicProperties{}),
		busbartest.WithSubscription("events", "audit", broker.SubscriptionProperties{}))
	c.ok("send", "events", "e1")
	for _, args := range [][]string{{"peek", "events", "--subscription", "audit"}, {"peek", "events/Subscriptions/audit"}} {
		if out := c.ok(args...); !strings.Contains(out, "e1") {
			t.Fatalf("%v:\n%s", args, out)
		}
	}
	if out := c.ok("receive", "events", "--subscription", "audit", "--body-only"); out != "e1\n" {
		t.Fatalf("receive from the subscription printed %q", out)
	}
}
