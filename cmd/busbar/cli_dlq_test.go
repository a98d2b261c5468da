package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
)

// sdkClient is an official SDK client on the test broker, for setting up
// and checking what the CLI did.
func (c *cli) sdkClient() *azservicebus.Client {
	c.t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(c.srv.ConnectionString(), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = client.Close(context.Background()) })
	return client
}

// deadLetter receives n messages of queue and dead-letters each with the
// reason chosen by reason(i).
func (c *cli) deadLetter(queue string, n int, reason func(i int) string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.sdkClient().NewReceiverForQueue(queue, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i < n; {
		msgs, err := r.ReceiveMessages(ctx, n-i, nil)
		if err != nil {
			c.t.Fatalf("receiving to dead-letter: %v", err)
		}
		for _, m := range msgs {
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: ptr(reason(i)), ErrorDescription: ptr("desc " + reason(i))}); err != nil {
				c.t.Fatal(err)
			}
			i++
		}
	}
}

// counts returns the active and dead-letter counts of a queue.
func (c *cli) counts(queue string) (active, dead int32) {
	c.t.Helper()
	info, err := c.srv.Broker().GetQueue(context.Background(), queue)
	if err != nil {
		c.t.Fatal(err)
	}
	return int32(info.Runtime.ActiveMessageCount), int32(info.Runtime.DeadLetterMessageCount)
}

func TestDLQListShowResubmitPurge(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("orders", broker.QueueProperties{}))
	for i := range 6 {
		subj := "order"
		if i%3 == 0 {
			subj = "invoice"
		}
		c.ok("send", "orders", fmt.Sprintf("body-%d", i), "--subject", subj, "--message-id", fmt.Sprintf("m%d", i), "--property", "n:int="+fmt.Sprint(i))
	}
	c.deadLetter("orders", 6, func(i int) string {
		if i < 4 {
			return "Poison"
		}
		return "Expired"
	})
	if a, d := c.counts("orders"); a != 0 || d != 6 {
		t.Fatalf("before: active %d, dead %d", a, d)
	}

	out := c.ok("dlq", "list", "orders")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], "REASON") || !strings.Contains(lines[1], "Poison") || !strings.Contains(lines[6], "Expired") {
		t.Fatalf("dlq list:\n%s", out)
	}
	var listed []messageJSON
	if err := json.Unmarshal([]byte(c.ok("dlq", "list", "orders", "--json")), &listed); err != nil || len(listed) != 6 {
		t.Fatalf("dlq list --json: %v, %d messages", err, len(listed))
	}
	seq := *listed[1].SequenceNumber
	var shown messageJSON
	if err := json.Unmarshal([]byte(c.ok("dlq", "show", "orders", fmt.Sprint(seq), "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.MessageID != "m1" || *shown.Body != "body-1" || *shown.DeadLetterReason != "Poison" || *shown.DeadLetterErrorDescription != "desc Poison" {
		t.Fatalf("dlq show = %+v", shown)
	}
	detail := c.ok("dlq", "show", "orders", fmt.Sprint(seq))
	for _, want := range []string{"MessageID", "m1", "DeadLetterReason", "Poison", "Property n", "body-1"} {
		if !strings.Contains(detail, want) {
			t.Fatalf("dlq show lacks %q:\n%s", want, detail)
		}
	}
	c.expect(exitNotFound, "dlq", "show", "orders", "999999")
	c.expect(exitUsage, "dlq", "show", "orders", "abc")

	// Resubmit only the Poison invoices (m0, m3): the rest stay.
	out = c.ok("dlq", "resubmit", "orders", "--reason", "Poison", "--subject", "invoice")
	if !strings.HasPrefix(out, "resubmitted 2 message(s)") || !strings.Contains(out, "4 did not match") {
		t.Fatalf("resubmit printed %q", out)
	}
	if a, d := c.counts("orders"); a != 2 || d != 4 {
		t.Fatalf("after the filtered resubmit: active %d, dead %d; want 2, 4", a, d)
	}
	var back []messageJSON
	if err := json.Unmarshal([]byte(c.ok("peek", "orders", "--json")), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].MessageID != "m0" || back[1].MessageID != "m3" || *back[1].Body != "body-3" {
		t.Fatalf("resubmitted messages = %+v", back)
	}
	if _, ok := back[0].Properties["DeadLetterReason"]; ok || back[0].Properties["n"] != float64(0) {
		t.Fatalf("resubmitted properties = %v; want n and no dead-letter reason", back[0].Properties)
	}

	out = c.ok("dlq", "purge", "orders", "--max", "1")
	if out != "purged 1 message(s) from the dead-letter queue of orders\n" {
		t.Fatalf("purge --max 1 printed %q", out)
	}
	out = c.ok("dlq", "purge", "orders", "--json")
	var purged map[string]any
	if err := json.Unmarshal([]byte(out), &purged); err != nil || purged["purged"] != float64(3) {
		t.Fatalf("purge --json = %s", out)
	}
	if a, d := c.counts("orders"); a != 2 || d != 0 {
		t.Fatalf("after purge: active %d, dead %d", a, d)
	}
	c.expect(exitNotFound, "dlq", "purge", "nosuchqueue")
}

// TestDLQResubmitLarge resubmits 100,000 dead-lettered messages (expired
// into the dead-letter queue on a fake clock) and checks the progress line.
// Under -short it moves 5,000, under the race detector 20,000.
func TestDLQResubmitLarge(t *testing.T) {
	n := 100_000
	switch {
	case testing.Short():
		n = 5_000
	case raceEnabled:
		n = 20_000
	}
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	c := newCLI(t, busbartest.WithFakeClock(start), busbartest.WithQueue("bulk",
		broker.QueueProperties{DeadLetteringOnMessageExpiration: true, DefaultMessageTimeToLive: time.Minute}))
	c.ok("send", "bulk", "payload", "--count", fmt.Sprint(n), "--timeout", "5m")
	if a, _ := c.counts("bulk"); int(a) != n {
		t.Fatalf("sent %d, want %d", a, n)
	}
	c.srv.Advance(2 * time.Minute)
	poll.UntilNil(t, time.Minute, "every message dead-lettered on expiry", func() error {
		if a, d := c.counts("bulk"); a != 0 || int(d) != n {
			return fmt.Errorf("active %d, dead %d", a, d)
		}
		return nil
	})
	r := c.run("dlq", "resubmit", "bulk", "--progress-interval", "10ms")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if want := fmt.Sprintf("resubmitted %d message(s) from the dead-letter queue of bulk to bulk\n", n); r.stdout != want {
		t.Fatalf("stdout %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "resubmitted ") || !strings.Contains(r.stderr, " of "+groupDigits(n)) {
		t.Fatalf("no progress on stderr: %q", r.stderr)
	}
	t.Logf("progress lines: %d", strings.Count(r.stderr, "\n"))
	if a, d := c.counts("bulk"); int(a) != n || d != 0 {
		t.Fatalf("after resubmit: active %d, dead %d", a, d)
	}
}

// TestDLQResubmitSubscription sends a subscription's dead-lettered messages
// back through its topic, or with --to to a queue.
func TestDLQResubmitSubscription(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("retry", broker.QueueProperties{}), busbartest.WithTopic("events", broker.TopicProperties{}),
		busbartest.WithSubscription("events", "audit", broker.SubscriptionProperties{}))
	c.ok("send", "events", "e1")
	c.ok("send", "events", "e2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.sdkClient().NewReceiverForSubscription("events", "audit", nil)
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 2; {
		msgs, err := r.ReceiveMessages(ctx, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			got++
		}
	}
	out := c.ok("dlq", "resubmit", "events/Subscriptions/audit", "--max", "1", "--to", "retry")
	if out != "resubmitted 1 message(s) from the dead-letter queue of events/Subscriptions/audit to retry\n" {
		t.Fatalf("resubmit --to printed %q", out)
	}
	out = c.ok("dlq", "resubmit", "events", "--subscription", "audit")
	if out != "resubmitted 1 message(s) from the dead-letter queue of events/Subscriptions/audit to events\n" {
		t.Fatalf("resubmit printed %q", out)
	}
	if out := c.ok("receive", "retry", "--body-only"); out != "e1\n" {
		t.Fatalf("retry queue got %q", out)
	}
	if out := c.ok("receive", "events", "--subscription", "audit", "--body-only"); out != "e2\n" {
		t.Fatalf("subscription got %q", out)
	}
	if out := c.ok("dlq", "resubmit", "events", "--subscription", "audit"); !strings.HasPrefix(out, "resubmitted 0 message(s)") {
		t.Fatalf("resubmit of an empty dead-letter queue printed %q", out)
	}
}
