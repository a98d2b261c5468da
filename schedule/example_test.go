package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/schedule"
)

// A program registers its schedules at start-up (unchanged ones are left
// as they are) and runs a host; any number of copies may run.
func Example() {
	connStr := "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=...;UseDevelopmentEmulator=true"
	client, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		return
	}
	s, err := schedule.New(client, "schedules", nil) // a session-enabled queue
	if err != nil {
		return
	}
	ctx := context.Background()
	_, _, err = s.Put(ctx, schedule.Definition{
		Name:   "weekly-report",
		Spec:   schedule.Spec{Calendar: &schedule.Calendar{Unit: schedule.Weekly, Weekdays: []time.Weekday{time.Friday}, At: []string{"12:00"}}, TimeZone: "Europe/Oslo"},
		Target: "reports", // with duplicate detection
	})
	if err != nil {
		return
	}
	_ = s.Run(ctx)
}

// The calendar maths on its own: when does a spec fire?
func ExampleSpec_Compile() {
	spec := schedule.Spec{Cron: "0 30 2 * * *", TimeZone: "Europe/Oslo"}
	times, err := spec.Compile(time.Time{})
	if err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	for range 3 {
		at = times.Next(at)
		fmt.Println(at.In(times.Location()).Format(time.RFC3339))
	}
	// 02:30 does not exist on 29 March 2026 in Oslo: it fires at 03:00,
	// the moment the clocks jump.

	// Output:
	// 2026-03-28T02:30:00+01:00
	// 2026-03-29T03:00:00+02:00
	// 2026-03-30T02:30:00+02:00
}

// Fired messages carry the schedule and the nominal fire time, which
// identify the firing.
func ExampleParseFiring() {
	nominal := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	m := &azservicebus.ReceivedMessage{MessageID: schedule.FiringID("weekly-report", nominal), ApplicationProperties: map[string]any{
		schedule.PropScheduleName: "weekly-report", schedule.PropScheduledFireTime: "2026-11-27T11:00:00Z"}}
	f, ok := schedule.ParseFiring(m)
	fmt.Println(ok, f.Schedule, f.Nominal.Format(time.RFC3339), m.MessageID)
	// Output: true weekly-report 2026-11-27T11:00:00Z weekly-report@20261127T110000Z
}

// A worker of fired messages under the overlap policies skip and queue
// reports each firing done when its work is finished.
func ExampleScheduler_DoneAfter() {
	var client *azservicebus.Client // connected to the broker
	s, err := schedule.New(client, "schedules", nil)
	if err != nil {
		return
	}
	handler := s.DoneAfter(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		f, _ := schedule.ParseFiring(m)
		fmt.Println("running the import due at", f.Nominal)
		return nil
	}, nil)
	p, err := processor.New(client, processor.Queue("imports"), handler, nil)
	if err != nil {
		return
	}
	_ = p.Run(context.Background())
}
