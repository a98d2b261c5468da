package schedule

import "time"

// A wall time is a local date and time of day without a zone ("2026-03-29
// 02:30:00"), held in a time.Time in UTC so that the calendar arithmetic of
// package time (month lengths, leap years, carries) applies to it while no
// daylight-saving rule does.

// wallOf returns the wall time t shows in its location, to the second.
func wallOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

// resolve returns the instant at which the wall time w happens in loc:
//
//   - a wall time that happens once is that instant;
//   - a wall time that happens twice (the hour repeated when clocks go back)
//     is its first occurrence;
//   - a wall time that never happens (skipped when clocks go forward) is the
//     first instant after the gap, the moment the clocks jumped.
//
// resolve is monotone: a later wall time never resolves to an earlier
// instant, which is what lets Next scan wall times in order.
func resolve(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	before := offsetAt(u-2*86400, loc)
	after := offsetAt(u+2*86400, loc)
	var best time.Time
	for _, off := range [...]int{before, after, offsetAt(u, loc)} {
		t := time.Unix(u-int64(off), 0).In(loc)
		if _, o := t.Zone(); o != off {
			continue // that offset is not in force at that instant
		}
		if best.IsZero() || t.Before(best) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	// In the gap: read with the offset in force before the jump, the wall
	// time lands after it; the zone period that instant is in started at
	// the jump.
	start, _ := time.Unix(u-int64(before), 0).In(loc).ZoneBounds()
	if start.IsZero() {
		return time.Unix(u-int64(before), 0).In(loc)
	}
	return start
}

func offsetAt(unix int64, loc *time.Location) int {
	_, off := time.Unix(unix, 0).In(loc).Zone()
	return off
}

// daysSinceEpoch numbers the days of the (proleptic Gregorian) calendar.
func daysSinceEpoch(w time.Time) int64 {
	return floorDiv(w.Unix(), 86400)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// lastDay returns the number of days of month m of year y.
func lastDay(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func dateOnly(w time.Time) time.Time {
	y, m, d := w.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
