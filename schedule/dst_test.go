package schedule_test

import (
	"os"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/schedule"
)

// TestYearsAcrossDST runs one schedule per zone through two years of fake
// time on one host, wake-up by wake-up, and checks that the durable path
// fires exactly the firings the calendar computes, each once, and that the
// firings on the clock-change days follow the documented rules.
func TestYearsAcrossDST(t *testing.T) {
	start := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC)
	if os.Getenv("BUSBAR_LONG") != "" {
		end = time.Date(2036, 2, 1, 0, 0, 0, 0, time.UTC)
	}
	e := newEnv(t, start)
	s, ev := e.host(&schedule.Options{MaxConcurrentSessions: 4})
	zones := map[string]string{"oslo": "Europe/Oslo", "new-york": "America/New_York", "lord-howe": "Australia/Lord_Howe"}
	next := map[string]time.Time{}
	want := map[string][]time.Time{}
	for name, zone := range zones {
		// Sundays at 01:15, 01:45, 02:15 and 02:45 of the months with clock
		// changes: those of all three zones happen on Sundays between 01:00
		// and 03:00, in March, April, October or November.
		spec := schedule.Spec{Cron: "0 15,45 1-2 * MAR,APR,OCT,NOV SUN", TimeZone: zone, End: end}
		info := e.put(s, schedule.Definition{Name: name, Spec: spec, Target: jobsQueue})
		next[name] = info.Next
		times, err := spec.Compile(start)
		if err != nil {
			t.Fatal(err)
		}
		for at := times.Next(start); !at.IsZero(); at = times.Next(at) {
			want[name] = append(want[name], at)
		}
	}
	for {
		var at time.Time
		for _, n := range next {
			if !n.IsZero() && (at.IsZero() || n.Before(at)) {
				at = n
			}
		}
		if at.IsZero() {
			break
		}
		e.set(at)
		for name, n := range next {
			if n.Equal(at) {
				next[name] = ev.waitTick(t, name, at)
			}
		}
	}
	total := 0
	for name := range zones {
		total += len(want[name])
	}
	poll.Until(t, 0, "every firing to arrive", func() bool { return e.got.count() >= total })
	for name := range zones {
		got := e.got.firings(name)
		if len(got) != len(want[name]) {
			seen := map[time.Time]bool{}
			for _, f := range got {
				seen[f.Nominal] = true
			}
			for _, w := range want[name] {
				if !seen[w] {
					t.Logf("%s: missing %v", name, w)
				}
			}
			t.Fatalf("%s: %d firings, want %d", name, len(got), len(want[name]))
		}
		for i, f := range got {
			if !f.Nominal.Equal(want[name][i]) || f.Trigger != schedule.TriggerSchedule {
				t.Fatalf("%s: firing %d at %v (%s), want %v", name, i, f.Nominal, f.Trigger, want[name][i])
			}
		}
	}
	for id, n := range e.got.byID {
		if n != 1 {
			t.Errorf("firing %s received %d times", id, n)
		}
	}
	if stale := ev.of(schedule.EventStale, ""); len(stale) != 0 {
		t.Errorf("stale wake-ups: %v", stale)
	}
	// The clock-change days, by hand.
	fired := func(name string) map[time.Time]bool {
		m := map[time.Time]bool{}
		for _, f := range e.got.firings(name) {
			m[f.Nominal] = true
		}
		return m
	}
	utc := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	checks := []struct {
		name string
		at   string
		want bool
	}{
		// Oslo, 29 March 2026: 02:15 and 02:45 do not exist; both fire once, at 03:00 CEST.
		{"oslo", "2026-03-29T00:15:00Z", true},  // 01:15 CET
		{"oslo", "2026-03-29T00:45:00Z", true},  // 01:45 CET
		{"oslo", "2026-03-29T01:00:00Z", true},  // the jump
		{"oslo", "2026-03-29T01:15:00Z", false}, // 03:15 CEST is not in the schedule
		// Oslo, 25 October 2026: 02:15 and 02:45 happen twice; the first (CEST) only.
		{"oslo", "2026-10-25T00:15:00Z", true},
		{"oslo", "2026-10-25T00:45:00Z", true},
		{"oslo", "2026-10-25T01:15:00Z", false},
		{"oslo", "2026-10-25T01:45:00Z", false},
		// New York, 1 November 2026: 01:15 and 01:45 happen twice (EDT first).
		{"new-york", "2026-11-01T05:15:00Z", true},
		{"new-york", "2026-11-01T05:45:00Z", true},
		{"new-york", "2026-11-01T06:15:00Z", false},
		{"new-york", "2026-11-01T06:45:00Z", false},
		{"new-york", "2026-11-01T07:15:00Z", true}, // 02:15 EST
		// New York, 8 March 2026: 02:15 and 02:45 fire once at 03:00 EDT.
		{"new-york", "2026-03-08T07:00:00Z", true},
		// Lord Howe, 5 April 2026 (02:00 -> 01:30): 01:45 happens twice, fires at +11 only.
		{"lord-howe", "2026-04-04T14:45:00Z", true},
		{"lord-howe", "2026-04-04T15:15:00Z", false},
		// Lord Howe, 4 October 2026 (02:00 -> 02:30): 02:15 fires at 02:30, 02:45 as usual.
		{"lord-howe", "2026-10-03T15:30:00Z", true},
		{"lord-howe", "2026-10-03T15:45:00Z", true},
	}
	for _, c := range checks {
		if got := fired(c.name)[utc(c.at)]; got != c.want {
			t.Errorf("%s at %s: fired %v, want %v", c.name, c.at, got, c.want)
		}
	}
	t.Logf("%d firings over %v of fake time", total, end.Sub(start))
}
