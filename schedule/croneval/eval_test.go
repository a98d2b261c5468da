package croneval

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/busbar-io/busbar/schedule"
	"github.com/robfig/cron/v3"
)

// nextFunc returns the first firing of expr (six fields, seconds first, or
// a macro) in loc strictly after t.
type nextFunc func(expr string, loc *time.Location, t time.Time) (time.Time, error)

var libraries = []struct {
	name string
	next nextFunc
}{
	{"busbar/schedule", func(expr string, loc *time.Location, t time.Time) (time.Time, error) {
		times, err := schedule.Spec{Cron: expr, TimeZone: loc.String()}.Compile(t)
		if err != nil {
			return time.Time{}, err
		}
		return times.Next(t), nil
	}},
	{"robfig/cron/v3", func(expr string, loc *time.Location, t time.Time) (time.Time, error) {
		p := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
		s, err := p.Parse(expr)
		if err != nil {
			return time.Time{}, err
		}
		return s.Next(t.In(loc)), nil
	}},
	{"adhocore/gronx", func(expr string, loc *time.Location, t time.Time) (time.Time, error) {
		return gronx.NextTickAfter(expr, t.In(loc), false)
	}},
}

// A case runs a library from `from` for `n` firings (or until `until`)
// and compares the firings, in UTC, with want.
type evalCase struct {
	name  string
	expr  string
	zone  string
	from  string
	until string // stop at this instant (exclusive) instead of after n firings
	n     int
	want  string
}

var cases = []evalCase{
	// Europe/Oslo 2026: 29 March 02:00 -> 03:00 (01:00Z); 25 October 03:00 -> 02:00 (01:00Z).
	{name: "Oslo gap: 02:30 fires once, at the jump", expr: "0 30 2 * * *", zone: "Europe/Oslo", from: "2026-03-28T12:00:00Z", n: 2,
		want: "2026-03-29T01:00:00Z 2026-03-30T00:30:00Z"},
	{name: "Oslo overlap: 02:30 fires once", expr: "0 30 2 * * *", zone: "Europe/Oslo", from: "2026-10-24T12:00:00Z", until: "2026-10-26T00:00:00Z",
		want: "2026-10-25T00:30:00Z"},
	{name: "Oslo quarter-hours in the gap fire once", expr: "0 */15 2 * * *", zone: "Europe/Oslo", from: "2026-03-28T12:00:00Z", until: "2026-03-29T12:00:00Z",
		want: "2026-03-29T01:00:00Z"},
	// America/New_York 2026: 8 March 02:00 -> 03:00 (07:00Z); 1 November 02:00 -> 01:00 (06:00Z).
	{name: "New York overlap: 01:30 fires once", expr: "0 30 1 * * *", zone: "America/New_York", from: "2026-10-31T12:00:00Z", until: "2026-11-02T00:00:00Z",
		want: "2026-11-01T05:30:00Z"},
	{name: "New York gap: 02:30 fires once", expr: "0 30 2 * * *", zone: "America/New_York", from: "2026-03-07T12:00:00Z", until: "2026-03-09T00:00:00Z",
		want: "2026-03-08T07:00:00Z"},
	// Australia/Lord_Howe: 30-minute changes. 5 April 2026 02:00 -> 01:30; 4 October 2026 02:00 -> 02:30.
	{name: "Lord Howe overlap: 01:45 fires once", expr: "0 45 1 * * *", zone: "Australia/Lord_Howe", from: "2026-04-04T00:00:00Z", until: "2026-04-05T12:00:00Z",
		want: "2026-04-04T14:45:00Z"},
	{name: "Lord Howe gap: 02:15 fires once, at the jump", expr: "0 15 2 * * *", zone: "Australia/Lord_Howe", from: "2026-10-03T00:00:00Z", until: "2026-10-04T12:00:00Z",
		want: "2026-10-03T15:30:00Z"},
	// Local 01:00 (+10:30) is 14:30Z; 02:00 does not exist and fires at the
	// jump, 02:30 (+11), 15:30Z; 03:00 is 16:00Z.
	{name: "Lord Howe hourly across the gap", expr: "0 0 * * * *", zone: "Australia/Lord_Howe", from: "2026-10-03T13:30:00Z", n: 4,
		want: "2026-10-03T14:30:00Z 2026-10-03T15:30:00Z 2026-10-03T16:00:00Z 2026-10-03T17:00:00Z"},
	{name: "leap day", expr: "0 0 12 29 2 *", zone: "UTC", from: "2026-01-01T00:00:00Z", n: 2,
		want: "2028-02-29T12:00:00Z 2032-02-29T12:00:00Z"},
	{name: "day 31 skips short months", expr: "0 0 0 31 * *", zone: "UTC", from: "2026-01-01T00:00:00Z", n: 3,
		want: "2026-01-31T00:00:00Z 2026-03-31T00:00:00Z 2026-05-31T00:00:00Z"},
	{name: "last day of the month (L)", expr: "0 0 0 L * *", zone: "UTC", from: "2028-01-31T00:00:00Z", n: 2,
		want: "2028-02-29T00:00:00Z 2028-03-31T00:00:00Z"},
	{name: "second Tuesday (TUE#2)", expr: "0 0 9 * * TUE#2", zone: "UTC", from: "2026-01-01T00:00:00Z", n: 2,
		want: "2026-01-13T09:00:00Z 2026-02-10T09:00:00Z"},
	{name: "seconds field", expr: "*/20 * * * * *", zone: "UTC", from: "2026-01-01T00:00:05Z", n: 3,
		want: "2026-01-01T00:00:20Z 2026-01-01T00:00:40Z 2026-01-01T00:01:00Z"},
	{name: "@weekly", expr: "@weekly", zone: "UTC", from: "2026-11-25T00:00:00Z", n: 1, want: "2026-11-29T00:00:00Z"},
	{name: "@monthly", expr: "@monthly", zone: "UTC", from: "2026-11-25T00:00:00Z", n: 1, want: "2026-12-01T00:00:00Z"},
}

// wrong lists the cases each library got wrong when this was written
// (robfig/cron v3.0.1, gronx v1.20.4); every other case is right. Both
// libraries skip a time in a spring-forward gap altogether (the firing is
// lost); robfig fires a time in a fall-back overlap twice; gronx fires it
// once, but at the first occurrence in one zone and the second in another;
// robfig has no L or #.
var wrong = map[string][]string{
	"busbar/schedule": nil,
	"robfig/cron/v3": {"Oslo gap: 02:30 fires once, at the jump", "Oslo overlap: 02:30 fires once", "Oslo quarter-hours in the gap fire once",
		"New York overlap: 01:30 fires once", "New York gap: 02:30 fires once", "Lord Howe overlap: 01:45 fires once",
		"Lord Howe gap: 02:15 fires once, at the jump", "Lord Howe hourly across the gap", "last day of the month (L)", "second Tuesday (TUE#2)"},
	"adhocore/gronx": {"Oslo gap: 02:30 fires once, at the jump", "Oslo overlap: 02:30 fires once", "Oslo quarter-hours in the gap fire once",
		"New York gap: 02:30 fires once", "Lord Howe overlap: 01:45 fires once", "Lord Howe gap: 02:15 fires once, at the jump",
		"Lord Howe hourly across the gap"},
}

func run(lib nextFunc, c evalCase) string {
	loc, err := time.LoadLocation(c.zone)
	if err != nil {
		return "error: " + err.Error()
	}
	at, _ := time.Parse(time.RFC3339, c.from)
	var until time.Time
	if c.until != "" {
		until, _ = time.Parse(time.RFC3339, c.until)
	}
	var out []string
	for i := 0; i < 50; i++ {
		if c.until == "" && len(out) == c.n {
			break
		}
		next, err := lib(c.expr, loc, at)
		if err != nil {
			return "error: " + err.Error()
		}
		if next.IsZero() || (!until.IsZero() && !next.Before(until)) {
			break
		}
		if !next.After(at) {
			return "error: not after " + at.Format(time.RFC3339)
		}
		out = append(out, next.UTC().Format(time.RFC3339))
		at = next
	}
	return strings.Join(out, " ")
}

func TestLibraries(t *testing.T) {
	var report strings.Builder
	for _, lib := range libraries {
		misses := 0
		for _, c := range cases {
			got := run(lib.next, c)
			verdict := "ok"
			if got != c.want {
				verdict = "wrong"
				misses++
			}
			fmt.Fprintf(&report, "%-16s %-5s %-48s got %s\n", lib.name, verdict, c.name, got)
			if was := slices.Contains(wrong[lib.name], c.name); was != (verdict == "wrong") {
				t.Errorf("%s on %q: %s now (got %s); the recorded verdict differs", lib.name, c.name, verdict, got)
			}
		}
		fmt.Fprintf(&report, "%-16s %d of %d cases wrong\n\n", lib.name, misses, len(cases))
	}
	t.Log("\n" + report.String())
}
