package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/schedule"
	"github.com/busbar-io/busbar/server"
)

// TestToolkitView checks the toolkit view against what the schedule and
// pipeline packages themselves keep in the broker.
func TestToolkitView(t *testing.T) {
	s := start(t,
		busbartest.WithQueue("schedules", broker.QueueProperties{RequiresSession: true}),
		busbartest.WithQueue("reports", broker.QueueProperties{}),
		busbartest.WithQueue("failed-jobs", broker.QueueProperties{RequiresSession: true}))
	client := busbartest.NewClient(t, server.ConnectionString(s.AMQPAddr().String(), server.RootKeyName, rootKey))
	ctx := context.Background()

	sch, err := schedule.New(client, "schedules", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sch.Put(ctx, schedule.Definition{Name: "nightly", Spec: schedule.Spec{Cron: "0 0 3 * * *", TimeZone: "UTC"}, Target: "reports"}); err != nil {
		t.Fatal(err)
	}
	if err := sch.Pause(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sch.Put(ctx, schedule.Definition{Name: "hourly", Spec: schedule.Spec{Cron: "0 0 * * * *", TimeZone: "UTC"}, Target: "reports"}); err != nil {
		t.Fatal(err)
	}
	info, err := sch.Get(ctx, "hourly")
	if err != nil {
		t.Fatal(err)
	}

	store := pipeline.NewBrokerStore(client, "failed-jobs")
	defer func() { _ = store.Close(ctx) }()
	failedAt := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	if err := store.Add(ctx, pipeline.FailedTask{Job: "job-7", Index: 2, Count: 4, Type: "charge", Body: []byte("{}"),
		Reason: "failed", Error: "card declined", Attempts: 3, FailedAt: failedAt}); err != nil {
		t.Fatal(err)
	}

	c := signedIn(t, s, "watcher", listenKey)
	var tk struct {
		Schedules []struct {
			Session    string
			Definition map[string]any
			Paused     bool
			Next       time.Time
		}
		Failed []struct {
			Entity, Job, Type, Reason, Error, FailedAt, Queue string
			Index, Attempts                                   any
		}
	}
	c.must("GET", "toolkit", nil, &tk)
	if len(tk.Schedules) != 2 {
		t.Fatalf("schedules: %+v", tk.Schedules)
	}
	got := fmt.Sprintf("%s %v %v, %s %v %v", tk.Schedules[0].Session, tk.Schedules[0].Paused, tk.Schedules[0].Definition["target"],
		tk.Schedules[1].Session, tk.Schedules[1].Paused, tk.Schedules[1].Definition["cron"])
	if got != "hourly false reports, nightly true 0 0 3 * * *" || !tk.Schedules[0].Next.Equal(info.Next) {
		t.Fatalf("schedules: %+v (next %v)", tk.Schedules, info.Next)
	}
	if len(tk.Failed) != 1 || fmt.Sprint(tk.Failed[0]) != "{failed-jobs job-7 charge failed card declined 2026-05-01T08:00:00Z  2 3}" { // failed-jobs is no QUEUE-failed: its pipeline is unknown
		t.Fatalf("failed tasks: %+v", tk.Failed)
	}
}
