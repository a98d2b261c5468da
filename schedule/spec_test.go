package schedule

import (
	"strings"
	"testing"
	"time"
)

// firings returns the next n firings of spec after `after`, in RFC 3339
// UTC, joined by spaces.
func firings(t *testing.T, spec Spec, after string, n int) string {
	t.Helper()
	from := mustTime(t, after)
	times, err := spec.Compile(from)
	if err != nil {
		t.Fatalf("compile %+v: %v", spec, err)
	}
	var out []string
	at := from
	for range n {
		at = times.Next(at)
		if at.IsZero() {
			out = append(out, "none")
			break
		}
		out = append(out, at.UTC().Format(time.RFC3339))
	}
	return strings.Join(out, " ")
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNext(t *testing.T) {
	oslo, ny, lh := "Europe/Oslo", "America/New_York", "Australia/Lord_Howe"
	cases := []struct {
		name  string
		spec  Spec
		after string
		want  string
	}{
		// Europe/Oslo 2026: 29 March 02:00 CET -> 03:00 CEST (01:00Z); 25 October 03:00 CEST -> 02:00 CET (01:00Z).
		{"oslo gap fires at the jump", Spec{Cron: "0 30 2 * * *", TimeZone: oslo}, "2026-03-27T12:00:00Z",
			"2026-03-28T01:30:00Z 2026-03-29T01:00:00Z 2026-03-30T00:30:00Z"},
		{"oslo overlap fires once, first occurrence", Spec{Cron: "0 30 2 * * *", TimeZone: oslo}, "2026-10-23T12:00:00Z",
			"2026-10-24T00:30:00Z 2026-10-25T00:30:00Z 2026-10-26T01:30:00Z"},
		{"oslo quarter-hours over the gap fire once at the jump", Spec{Cron: "*/15 * * * *", TimeZone: oslo}, "2026-03-29T00:30:00Z",
			"2026-03-29T00:45:00Z 2026-03-29T01:00:00Z 2026-03-29T01:15:00Z"},
		{"oslo quarter-hours in the repeated hour fire once each", Spec{Cron: "*/15 * * * *", TimeZone: oslo}, "2026-10-24T23:50:00Z",
			"2026-10-25T00:00:00Z 2026-10-25T00:15:00Z 2026-10-25T00:30:00Z 2026-10-25T00:45:00Z 2026-10-25T02:00:00Z"},
		// America/New_York 2026: 8 March 02:00 EST -> 03:00 EDT (07:00Z); 1 November 02:00 EDT -> 01:00 EST (06:00Z).
		{"new york gap", Spec{Calendar: &Calendar{Unit: Daily, At: []string{"02:30"}}, TimeZone: ny}, "2026-03-07T12:00:00Z",
			"2026-03-08T07:00:00Z 2026-03-09T06:30:00Z"},
		{"new york overlap", Spec{Calendar: &Calendar{Unit: Daily, At: []string{"01:30"}}, TimeZone: ny}, "2026-10-31T12:00:00Z",
			"2026-11-01T05:30:00Z 2026-11-02T06:30:00Z"},
		// Australia/Lord_Howe: +10:30 standard, +11 summer, a 30-minute shift.
		// 5 April 2026 02:00 -> 01:30 (15:00Z on the 4th); 4 October 2026 02:00 -> 02:30 (15:30Z on the 3rd).
		{"lord howe overlap of half an hour", Spec{Cron: "0 45 1 * * *", TimeZone: lh}, "2026-04-03T00:00:00Z",
			"2026-04-03T14:45:00Z 2026-04-04T14:45:00Z 2026-04-05T15:15:00Z"},
		{"lord howe gap of half an hour", Spec{Cron: "0 15 2 * * *", TimeZone: lh}, "2026-10-02T00:00:00Z",
			"2026-10-02T15:45:00Z 2026-10-03T15:30:00Z 2026-10-04T15:15:00Z"},
		{"lord howe 02:45 just after the gap", Spec{Cron: "0 15,45 2 * * *", TimeZone: lh}, "2026-10-03T12:00:00Z",
			"2026-10-03T15:30:00Z 2026-10-03T15:45:00Z 2026-10-04T15:15:00Z"},
		{"every is real time, across a change", Spec{Every: Duration(time.Hour), Start: time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), TimeZone: oslo}, "2026-03-29T00:30:00Z",
			"2026-03-29T01:00:00Z 2026-03-29T02:00:00Z"},
		{"leap day", Spec{Cron: "0 0 12 29 2 *"}, "2026-01-01T00:00:00Z", "2028-02-29T12:00:00Z 2032-02-29T12:00:00Z"},
		{"leap day over 2100", Spec{Cron: "0 0 12 29 2 *"}, "2096-03-01T00:00:00Z", "2104-02-29T12:00:00Z"},
		{"day 31 skips short months", Spec{Calendar: &Calendar{Unit: Monthly, Day: 31}}, "2026-01-01T00:00:00Z",
			"2026-01-31T00:00:00Z 2026-03-31T00:00:00Z 2026-05-31T00:00:00Z"},
		{"last day of the month", Spec{Calendar: &Calendar{Unit: Monthly, Day: -1, At: []string{"18:00"}}}, "2027-12-15T00:00:00Z",
			"2027-12-31T18:00:00Z 2028-01-31T18:00:00Z 2028-02-29T18:00:00Z 2028-03-31T18:00:00Z 2028-04-30T18:00:00Z"},
		{"cron L", Spec{Cron: "0 0 0 L * *"}, "2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z 2026-03-31T00:00:00Z"},
		{"second tuesday", Spec{Calendar: &Calendar{Unit: Monthly, Nth: 2, Weekdays: []time.Weekday{time.Tuesday}, At: []string{"09:00"}}}, "2026-01-01T00:00:00Z",
			"2026-01-13T09:00:00Z 2026-02-10T09:00:00Z 2026-03-10T09:00:00Z"},
		{"cron TUE#2", Spec{Cron: "0 9 * * TUE#2"}, "2026-01-01T00:00:00Z", "2026-01-13T09:00:00Z 2026-02-10T09:00:00Z"},
		{"last friday", Spec{Calendar: &Calendar{Unit: Monthly, Nth: -1, Weekdays: []time.Weekday{time.Friday}}}, "2026-01-01T00:00:00Z",
			"2026-01-30T00:00:00Z 2026-02-27T00:00:00Z"},
		{"cron 5L", Spec{Cron: "0 0 * * 5L"}, "2026-01-01T00:00:00Z", "2026-01-30T00:00:00Z 2026-02-27T00:00:00Z"},
		{"fifth monday skips months without one", Spec{Calendar: &Calendar{Unit: Monthly, Nth: 5, Weekdays: []time.Weekday{time.Monday}}}, "2026-01-01T00:00:00Z",
			"2026-03-30T00:00:00Z 2026-06-29T00:00:00Z"},
		{"every 2 months on the 15th", Spec{Calendar: &Calendar{Unit: Monthly, Interval: 2, Day: 15}, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, "2026-01-01T00:00:00Z",
			"2026-01-15T00:00:00Z 2026-03-15T00:00:00Z 2026-05-15T00:00:00Z"},
		{"every 3 days", Spec{Calendar: &Calendar{Unit: Daily, Interval: 3, At: []string{"08:00", "20:00"}}, Start: time.Date(2026, 2, 27, 0, 0, 0, 0, time.UTC)}, "2026-02-27T00:00:00Z",
			"2026-02-27T08:00:00Z 2026-02-27T20:00:00Z 2026-03-02T08:00:00Z"},
		{"every 2 weeks on monday and friday", Spec{Calendar: &Calendar{Unit: Weekly, Interval: 2, Weekdays: []time.Weekday{time.Monday, time.Friday}, At: []string{"07:00"}}, Start: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)}, "2026-11-25T00:00:00Z",
			"2026-11-27T07:00:00Z 2026-12-07T07:00:00Z 2026-12-11T07:00:00Z 2026-12-21T07:00:00Z"},
		{"the article's weekly form", Spec{Calendar: &Calendar{Unit: Weekly, Weekdays: []time.Weekday{time.Friday}, At: []string{"12:00"}}, TimeZone: oslo}, "2026-11-25T00:00:00Z",
			"2026-11-27T11:00:00Z 2026-12-04T11:00:00Z"},
		{"seconds field", Spec{Cron: "*/20 * * * * *"}, "2026-01-01T00:00:05Z", "2026-01-01T00:00:20Z 2026-01-01T00:00:40Z 2026-01-01T00:01:00Z"},
		{"either day field in vixie style", Spec{Cron: "0 0 1,15 * MON"}, "2026-06-01T00:00:00Z", "2026-06-08T00:00:00Z 2026-06-15T00:00:00Z 2026-06-22T00:00:00Z"},
		{"@hourly", Spec{Cron: "@hourly"}, "2026-01-01T10:30:00Z", "2026-01-01T11:00:00Z"},
		{"@daily in a zone", Spec{Cron: "@daily", TimeZone: ny}, "2026-01-01T10:30:00Z", "2026-01-02T05:00:00Z"},
		{"@weekly is sunday midnight", Spec{Cron: "@weekly"}, "2026-11-25T00:00:00Z", "2026-11-29T00:00:00Z"},
		{"@monthly", Spec{Cron: "@monthly"}, "2026-11-25T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"@yearly", Spec{Cron: "@yearly"}, "2026-11-25T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@annually", Spec{Cron: "@annually"}, "2026-11-25T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@midnight", Spec{Cron: "@midnight"}, "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{"@every", Spec{Cron: "@every 90m"}, "2026-11-25T00:00:00Z", "2026-11-25T01:30:00Z 2026-11-25T03:00:00Z"},
		{"start is inclusive", Spec{Cron: "@hourly", Start: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}, "2026-01-01T00:00:00Z", "2026-05-01T00:00:00Z"},
		{"end is inclusive", Spec{Cron: "@hourly", End: time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)}, "2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z 2026-01-01T02:00:00Z none"},
		{"a date that never comes", Spec{Cron: "0 0 0 30 2 *"}, "2026-01-01T00:00:00Z", "none"},
		{"sunday as 7", Spec{Cron: "0 0 * * 7"}, "2026-11-25T00:00:00Z", "2026-11-29T00:00:00Z"},
		{"ranges with steps", Spec{Cron: "0 10-40/15 9 * JAN-MAR *"}, "2026-11-25T00:00:00Z", "2027-01-01T09:10:00Z 2027-01-01T09:25:00Z 2027-01-01T09:40:00Z 2027-01-02T09:10:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := firings(t, c.spec, c.after, strings.Count(c.want, " ")+1); got != c.want {
				t.Errorf("\ngot  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestSpecErrors(t *testing.T) {
	bad := map[string]Spec{
		"nothing":          {},
		"two kinds":        {Cron: "@daily", Every: Duration(time.Hour)},
		"four fields":      {Cron: "0 0 * *"},
		"unknown macro":    {Cron: "@reboot"},
		"minute 60":        {Cron: "60 * * * *"},
		"backwards range":  {Cron: "0 5-1 * * *"},
		"zero step":        {Cron: "*/0 * * * *"},
		"bad #":            {Cron: "0 0 * * MON#6"},
		"bad zone":         {Cron: "@daily", TimeZone: "Mars/Olympus"},
		"every too short":  {Every: Duration(time.Millisecond)},
		"weekly no days":   {Calendar: &Calendar{Unit: Weekly}},
		"monthly no day":   {Calendar: &Calendar{Unit: Monthly}},
		"monthly both":     {Calendar: &Calendar{Unit: Monthly, Day: 1, Nth: 1, Weekdays: []time.Weekday{1}}},
		"bad time of day":  {Calendar: &Calendar{Unit: Daily, At: []string{"25:00"}}},
		"bad unit":         {Calendar: &Calendar{Unit: "fortnight"}},
		"end before start": {Cron: "@daily", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		"negative max":     {Cron: "@daily", MaxFirings: -1},
	}
	for name, s := range bad {
		if _, err := s.Compile(time.Now()); err == nil {
			t.Errorf("%s: %+v compiled", name, s)
		}
	}
}

// TestNextYearsOfWallTimes walks ten years of a daily 02:30 in each zone
// and checks every firing against the rule: at 02:30 local time when that
// time exists, at the jump when it falls in a gap; once per day either way.
func TestNextYearsOfWallTimes(t *testing.T) {
	for _, zone := range []string{"Europe/Oslo", "America/New_York", "Australia/Lord_Howe"} {
		loc, _ := time.LoadLocation(zone)
		times, err := Spec{Cron: "0 30 2 * * *", TimeZone: zone}.Compile(time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		days, gaps := 0, 0
		for day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() < 2036; day = day.AddDate(0, 0, 1) {
			at = times.Next(at)
			local := at.In(loc)
			if y, m, d := local.Date(); y != day.Year() || m != day.Month() || d != day.Day() {
				t.Fatalf("%s: firing %v is not on %v", zone, local, day.Format(time.DateOnly))
			}
			if h, mi, _ := local.Clock(); h != 2 || mi != 30 {
				start, _ := local.ZoneBounds()
				if !start.Equal(at) {
					t.Fatalf("%s: firing %v is neither 02:30 nor a clock change", zone, local)
				}
				gaps++
			}
			days++
		}
		// Oslo and New York skip 02:30 once a year; Lord Howe jumps from
		// 02:00 to 02:30, so its 02:30 always exists.
		wantGaps := 10
		if zone == "Australia/Lord_Howe" {
			wantGaps = 0
		}
		if gaps != wantGaps || days != 3652 {
			t.Errorf("%s: %d days, %d fired at a jump; want 3652 and %d", zone, days, gaps, wantGaps)
		}
	}
}
