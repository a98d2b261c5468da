package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cron is a parsed cron expression: second minute hour day-of-month month
// day-of-week (the five-field form has second 0).
type cron struct {
	sec, min, hour uint64 // bit n: value n matches
	dom            uint64 // bits 1..31
	month          uint64 // bits 1..12
	dow            uint64 // bits 0..6, Sunday 0
	lastDom        bool   // "L" in day-of-month: the month's last day
	nth            []nthWeekday
	domStar        bool // the field starts with * or ?: see dayMatches
	dowStar        bool
}

// nthWeekday is "FRI#2" (n=2) or "FRIL" (n=-1, the last one of the month).
type nthWeekday struct {
	wd time.Weekday
	n  int
}

var macros = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

var monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// parseCron parses a cron expression: five fields (minute first), six
// (second first), or a macro. @every is handled by the Spec, not here.
func parseCron(expr string) (*cron, error) {
	s := strings.TrimSpace(expr)
	if m, ok := macros[strings.ToLower(s)]; ok {
		s = m
	} else if strings.HasPrefix(s, "@") {
		return nil, fmt.Errorf("cron %q: unknown macro (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION)", expr)
	}
	f := strings.Fields(s)
	switch len(f) {
	case 5:
		f = append([]string{"0"}, f...)
	case 6:
	default:
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day month weekday) or 6 (with seconds first), got %d", expr, len(f))
	}
	c := &cron{}
	var err error
	fail := func(field string, e error) error { return fmt.Errorf("cron %q: %s field: %w", expr, field, e) }
	if c.sec, err = parseField(f[0], 0, 59, nil); err != nil {
		return nil, fail("second", err)
	}
	if c.min, err = parseField(f[1], 0, 59, nil); err != nil {
		return nil, fail("minute", err)
	}
	if c.hour, err = parseField(f[2], 0, 23, nil); err != nil {
		return nil, fail("hour", err)
	}
	if c.dom, c.lastDom, err = parseDom(f[3]); err != nil {
		return nil, fail("day-of-month", err)
	}
	if c.month, err = parseField(f[4], 1, 12, monthNames); err != nil {
		return nil, fail("month", err)
	}
	if c.dow, c.nth, err = parseDow(f[5]); err != nil {
		return nil, fail("day-of-week", err)
	}
	c.domStar = strings.HasPrefix(f[3], "*") || f[3] == "?"
	c.dowStar = strings.HasPrefix(f[5], "*") || f[5] == "?"
	if c.dom == 0 && !c.lastDom && !c.domStar && c.dowStar {
		return nil, fmt.Errorf("cron %q: day-of-month matches no day", expr)
	}
	return c, nil
}

func parseDom(field string) (uint64, bool, error) {
	var bits uint64
	last := false
	for _, part := range strings.Split(field, ",") {
		if strings.EqualFold(part, "L") {
			last = true
			continue
		}
		b, err := parseField(part, 1, 31, nil)
		if err != nil {
			return 0, false, err
		}
		bits |= b
	}
	return bits, last, nil
}

func parseDow(field string) (uint64, []nthWeekday, error) {
	var bits uint64
	var nth []nthWeekday
	for _, part := range strings.Split(field, ",") {
		up := strings.ToUpper(part)
		switch {
		case strings.Contains(up, "#"):
			day, n, _ := strings.Cut(up, "#")
			wd, err := parseValue(day, 0, 7, dayNames)
			if err != nil {
				return 0, nil, err
			}
			k, err := strconv.Atoi(n)
			if err != nil || k < 1 || k > 5 {
				return 0, nil, fmt.Errorf("%q: the occurrence after # must be 1 to 5", part)
			}
			nth = append(nth, nthWeekday{time.Weekday(wd % 7), k})
		case len(up) > 1 && strings.HasSuffix(up, "L"):
			wd, err := parseValue(strings.TrimSuffix(up, "L"), 0, 7, dayNames)
			if err != nil {
				return 0, nil, err
			}
			nth = append(nth, nthWeekday{time.Weekday(wd % 7), -1})
		default:
			b, err := parseField(part, 0, 7, dayNames)
			if err != nil {
				return 0, nil, err
			}
			if b&(1<<7) != 0 { // 7 is Sunday too
				b = b&^(1<<7) | 1
			}
			bits |= b
		}
	}
	return bits, nth, nil
}

// parseField parses a comma-separated list of *, ?, N, N-M, with an
// optional /STEP, into a bit set of the values in [lo, hi].
func parseField(field string, lo, hi int, names []string) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(field, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			var err error
			if step, err = strconv.Atoi(stepStr); err != nil || step < 1 {
				return 0, fmt.Errorf("%q: the step must be a positive number", part)
			}
		}
		var a, b int
		switch {
		case rng == "*" || rng == "?":
			a, b = lo, hi
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err error
			if a, err = parseValue(x, lo, hi, names); err != nil {
				return 0, err
			}
			if b, err = parseValue(y, lo, hi, names); err != nil {
				return 0, err
			}
			if b < a {
				return 0, fmt.Errorf("%q: the range runs backwards", part)
			}
		default:
			var err error
			if a, err = parseValue(rng, lo, hi, names); err != nil {
				return 0, err
			}
			b = a
			if hasStep {
				b = hi
			}
		}
		for v := a; v <= b; v += step {
			bits |= 1 << uint(v)
			if step > b-v { // v+step would pass b, or overflow and wrap below it
				break
			}
		}
	}
	return bits, nil
}

func parseValue(s string, lo, hi int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return i + lo, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is outside %d-%d", v, lo, hi)
	}
	return v, nil
}

// dayMatches applies cron's day rule: when either day field starts with *
// both must match, otherwise either may (so "0 0 1,15 * MON" is the 1st,
// the 15th and every Monday, as in Vixie cron).
func (c *cron) dayMatches(w time.Time) bool {
	y, m, d := w.Date()
	wd := w.Weekday()
	last := lastDay(y, m)
	dom := c.dom&(1<<uint(d)) != 0 || (c.lastDom && d == last)
	dow := c.dow&(1<<uint(wd)) != 0
	for _, n := range c.nth {
		if n.wd != wd {
			continue
		}
		if (n.n > 0 && (d-1)/7+1 == n.n) || (n.n < 0 && d+7 > last) {
			dow = true
		}
	}
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// nextWall returns the first wall time at or after w that the expression
// matches, and false when there is none within maxSearch (as for "0 0 0 30
// 2 *").
func (c *cron) nextWall(w time.Time) (time.Time, bool) {
	w = w.Truncate(time.Second)
	end := w.AddDate(maxSearchYears, 0, 0)
	for w.Before(end) {
		y, mo, d := w.Date()
		switch {
		case c.month&(1<<uint(mo)) == 0:
			w = time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(w):
			w = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
		case c.hour&(1<<uint(w.Hour())) == 0:
			w = w.Truncate(time.Hour).Add(time.Hour)
		case c.min&(1<<uint(w.Minute())) == 0:
			w = w.Truncate(time.Minute).Add(time.Minute)
		case c.sec&(1<<uint(w.Second())) == 0:
			w = w.Add(time.Second)
		default:
			return w, true
		}
	}
	return time.Time{}, false
}

// maxSearchYears bounds the search for a match: long enough for 29
// February across a century year without one (2096 to 2104).
const maxSearchYears = 9
