package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/schedule"
)

func TestScheduleCommands(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("schedules", broker.QueueProperties{RequiresSession: true}),
		busbartest.WithQueue("jobs", broker.QueueProperties{RequiresDuplicateDetection: true}))
	out := c.ok("schedule", "create", "report", "--target", "jobs", "--unit", "week", "--on", "FRI", "--at", "12:00", "--zone", "Europe/Oslo", "--subject", "RunReport")
	if !strings.Contains(out, "schedule report created; next firing ") || !strings.Contains(out, "12:00:00+01:00 CET (") {
		t.Fatalf("create: %s", out)
	}
	// The same definition again is a no-op; a different one is refused.
	if out := c.ok("schedule", "create", "report", "--target", "jobs", "--unit", "week", "--on", "FRI", "--at", "12:00", "--zone", "Europe/Oslo", "--subject", "RunReport"); !strings.Contains(out, "exists unchanged") {
		t.Fatalf("create again: %s", out)
	}
	c.expect(exitError, "schedule", "create", "report", "--target", "jobs", "--every", "1h")
	c.expect(exitUsage, "schedule", "create", "bad", "--target", "jobs", "--cron", "61 * * * *")
	c.expect(exitUsage, "schedule", "create", "bad", "--cron", "@daily")
	c.ok("schedule", "create", "sync", "--target", "jobs", "--every", "8h")

	list := c.ok("schedule", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], "report") || !strings.Contains(lines[1], "every week Fri at 12:00") ||
		!strings.Contains(lines[1], "Europe/Oslo") || !strings.Contains(lines[1], "T12:00:00+01:00") || !strings.Contains(lines[1], "T11:00:00Z") || !strings.Contains(lines[2], "every 8h0m0s") {
		t.Fatalf("list:\n%s", list)
	}

	c.ok("schedule", "update", "report", "--at", "13:30")
	var info schedule.Info
	if err := json.Unmarshal([]byte(c.ok("schedule", "show", "report", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Definition.Calendar.At[0] != "13:30" || info.Definition.Message.Subject != "RunReport" || info.Generation != 2 ||
		info.Next.In(time.UTC).Minute() != 30 || info.Next.Weekday() != time.Friday {
		t.Fatalf("after update: %+v", info)
	}
	c.ok("schedule", "pause", "report")
	if out := c.ok("schedule", "show", "report"); !strings.Contains(out, "paused") || !strings.Contains(out, "none (paused)") {
		t.Fatalf("show paused:\n%s", out)
	}
	c.ok("schedule", "resume", "report")
	if out := c.ok("schedule", "trigger", "report"); !strings.Contains(out, "schedule report triggered at ") {
		t.Fatalf("trigger: %s", out)
	}
	peek := c.ok("peek", "jobs", "--json")
	if !strings.Contains(peek, `"ScheduleName": "report"`) || !strings.Contains(peek, `"ScheduleTrigger": "manual"`) {
		t.Fatalf("the triggered firing:\n%s", peek)
	}
	c.ok("schedule", "delete", "report")
	c.expect(exitNotFound, "schedule", "show", "report")
	c.expect(exitNotFound, "schedule", "delete", "report")
	c.expect(exitNotFound, "schedule", "update", "report", "--every", "1h")
	if out := c.ok("schedule", "list"); strings.Contains(out, "report") {
		t.Fatalf("list after delete:\n%s", out)
	}
}

func TestScheduleHelp(t *testing.T) {
	for _, sub := range []string{"create", "update", "list", "show", "pause", "resume", "trigger", "delete", "run"} {
		r := runArgs("schedule", sub, "--help")
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage:\n  busbar schedule "+sub) || !strings.Contains(r.stdout, "Examples:\n  busbar schedule "+sub) {
			t.Errorf("schedule %s --help: exit %d\n%s%s", sub, r.code, r.stdout, r.stderr)
		}
	}
	if r := runArgs("schedule"); r.code != exitUsage {
		t.Errorf("schedule without a command: exit %d", r.code)
	}
}
