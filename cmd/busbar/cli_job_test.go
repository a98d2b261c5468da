package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/pipeline"
)

func TestJobCommandsHaveHelp(t *testing.T) {
	for _, cmd := range []string{"job list", "job show", "job failed", "job resubmit", "job purge", "job sweep"} {
		r := runArgs(append(strings.Fields(cmd), "--help")...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage:\n  busbar "+cmd+" ") || !strings.Contains(r.stdout, "Examples:\n  busbar "+cmd) {
			t.Errorf("busbar %s --help: exit %d\n%s", cmd, r.code, r.stdout)
		}
	}
	if r := runArgs("--help"); !strings.Contains(r.stdout, "busbar job ") {
		t.Error("busbar --help does not mention job")
	}
}

// TestJobFailedShowResubmitPurge drives a pipeline whose payment fails and
// operates its failed jobs with the CLI.
func TestJobFailedShowResubmitPurge(t *testing.T) {
	sess := broker.QueueProperties{RequiresSession: true, RequiresDuplicateDetection: true, MaxDeliveryCount: 100}
	c := newCLI(t, busbartest.WithQueue("buy", sess), busbartest.WithQueue("buy-failed", broker.QueueProperties{RequiresSession: true}))
	client, err := azservicebus.NewClientFromConnectionString(c.srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	ran := map[string]int{}
	p, err := pipeline.New(client, "buy", &pipeline.Options{Store: pipeline.NewBrokerStore(client, "buy-failed")})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"total", "payment", "receipt"} {
		_ = p.Handle(typ, func(_ context.Context, tk *pipeline.Task) error {
			mu.Lock()
			ran[tk.Job]++
			mu.Unlock()
			if typ == "payment" && broken.Load() {
				return pipeline.Permanent(errors.New("card declined"))
			}
			return nil
		})
	}
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, job := range []string{"order-1", "order-2", "order-3"} {
		if err := p.Submit(ctx, job, []pipeline.TaskSpec{{Type: "total"}, {Type: "payment"}, {Type: "receipt"}}); err != nil {
			t.Fatal(err)
		}
	}
	var rows []failedRow
	poll.Until(t, 30*time.Second, "three failed jobs", func() bool {
		r := c.run("job", "failed", "buy", "--json")
		rows = nil
		_ = json.Unmarshal([]byte(r.stdout), &rows)
		return r.code == 0 && len(rows) == 3
	})
	if r := rows[1]; r.Job != "order-2" || r.FailedTask != 1 || r.Type != "payment" || r.Reason != pipeline.ReasonFailed || r.Error != "card declined" {
		t.Fatalf("failed row %+v", r)
	}
	out := c.ok("job", "show", "buy", "order-1")
	for _, want := range []string{"1\tpayment\tTaskFailed", "2\treceipt\tJobFailed"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "\t"), strings.Join(strings.Fields(want), "\t")) {
			t.Fatalf("job show lacks %q:\n%s", want, out)
		}
	}
	broken.Store(false)
	if out := c.ok("job", "resubmit", "buy", "order-1"); !strings.Contains(out, "resubmitted order-1 as order-1~r1") {
		t.Fatalf("resubmit: %s", out)
	}
	c.expect(exitNotFound, "job", "resubmit", "buy", "order-1")
	out = c.ok("job", "resubmit", "buy", "--all", "--job-prefix", "order-2", "--progress-interval", "0")
	if !strings.Contains(out, "order-2 as order-2~r1") || strings.Contains(out, "order-3") {
		t.Fatalf("resubmit --all: %s", out)
	}
	poll.Until(t, 30*time.Second, "the resubmitted jobs to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return ran["order-1~r1"] == 2 && ran["order-2~r1"] == 2
	})
	if out := c.ok("job", "purge", "buy", "--all"); !strings.Contains(out, "purged order-3") {
		t.Fatalf("purge: %s", out)
	}
	if out := c.ok("job", "failed", "buy", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("failed after purge: %s", out)
	}
	poll.Until(t, 30*time.Second, "no job left in the work queue", func() bool {
		r := c.run("job", "list", "buy", "--json")
		return r.code == 0 && strings.TrimSpace(r.stdout) == "[]"
	})
	c.expect(exitNotFound, "job", "show", "buy", "order-3")
	mu.Lock()
	defer mu.Unlock()
	if ran["order-1~r1"] != 2 || ran["order-3"] != 2 {
		t.Fatalf("runs %v", ran)
	}
}

// TestJobListAndSweep: a job whose last task never came shows in job list
// with its progress; job sweep --dry-run names it, job sweep clears it.
func TestJobListAndSweep(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("imp", broker.QueueProperties{RequiresSession: true}),
		busbartest.WithQueue("imp-failed", broker.QueueProperties{RequiresSession: true}))
	client, err := azservicebus.NewClientFromConnectionString(c.srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	var ran atomic.Int32
	p, err := pipeline.New(client, "imp", &pipeline.Options{Store: pipeline.NewBrokerStore(client, "imp-failed"), SessionIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Handle("row", func(context.Context, *pipeline.Task) error { ran.Add(1); return nil })
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())
	// Two rows of three sent by hand: the last never comes.
	s, err := client.NewSender("imp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range 2 {
		id, job, typ := fmt.Sprintf("half/%d", i), "half", "row"
		if err := s.SendMessage(context.Background(), &azservicebus.Message{MessageID: &id, SessionID: &job, Subject: &typ,
			ApplicationProperties: map[string]any{pipeline.PropIndex: int64(i), pipeline.PropCount: int64(3), pipeline.PropLast: false}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var rows []jobRow
	poll.Until(t, 30*time.Second, "the half job in job list", func() bool {
		r := c.run("job", "list", "imp", "--json")
		rows = nil
		_ = json.Unmarshal([]byte(r.stdout), &rows)
		return r.code == 0 && len(rows) == 1 && rows[0].LastTask != nil && *rows[0].LastTask == 1
	})
	if r := rows[0]; r.Job != "half" || r.Count != 3 || r.Pending != 0 || r.Status != "in progress (no task pending)" || ran.Load() != 2 {
		t.Fatalf("job list row %+v (ran %d)", r, ran.Load())
	}
	if out := c.ok("job", "sweep", "imp", "--older-than", "1ns", "--dry-run", "--json"); strings.TrimSpace(out) != `[
  "half"
]` {
		t.Fatalf("sweep --dry-run: %s", out)
	}
	if out := c.ok("job", "list", "imp", "--json"); !strings.Contains(out, `"job": "half"`) {
		t.Fatalf("the dry run cleared the state: %s", out)
	}
	c.ok("job", "sweep", "imp", "--older-than", "1ns")
	if out := c.ok("job", "list", "imp", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("job list after the sweep: %s", out)
	}
}
