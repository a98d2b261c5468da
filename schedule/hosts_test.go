package schedule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/schedule"
)

// TestManyHosts: three hosts on one control queue share the schedules;
// every firing is sent by exactly one of them, exactly once.
func TestManyHosts(t *testing.T) {
	e := newEnv(t, epoch)
	var hosts []*events
	for range 3 {
		_, ev := e.host(&schedule.Options{MaxConcurrentSessions: 2})
		hosts = append(hosts, ev)
	}
	admin := e.scheduler(nil)
	const schedules, minutes = 10, 10
	for i := range schedules {
		e.put(admin, schedule.Definition{Name: fmt.Sprintf("s%02d", i), Spec: schedule.Spec{Cron: "0 * * * * *"}, Target: jobsQueue})
	}
	ticks := func() int {
		n := 0
		for _, ev := range hosts {
			n += len(ev.of(schedule.EventTick, ""))
		}
		return n
	}
	for m := 1; m <= minutes; m++ {
		e.set(epoch.Add(time.Duration(m) * time.Minute))
		poll.Until(t, 0, fmt.Sprintf("the wake-ups of minute %d", m), func() bool { return ticks() == m*schedules })
	}
	poll.Until(t, 0, "every firing", func() bool { return e.got.count() == schedules*minutes })
	for id, n := range e.got.byID {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
	sentBy := map[string]int{}
	busy := 0
	for _, ev := range hosts {
		fired := ev.of(schedule.EventFired, "")
		for _, f := range fired {
			sentBy[schedule.FiringID(f.Schedule, f.Nominal)]++
		}
		if len(fired) > 0 {
			busy++
		}
	}
	if len(sentBy) != schedules*minutes {
		t.Errorf("%d distinct firings reported by the hosts, want %d", len(sentBy), schedules*minutes)
	}
	for id, n := range sentBy {
		if n != 1 {
			t.Errorf("%s fired by %d hosts", id, n)
		}
	}
	t.Logf("%d of 3 hosts sent firings", busy)
}
