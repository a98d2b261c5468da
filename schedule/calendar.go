package schedule

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Unit is the period a Calendar repeats over.
type Unit string

// The units of a Calendar.
const (
	Daily   Unit = "day"
	Weekly  Unit = "week"
	Monthly Unit = "month"
)

// Calendar is a recurrence a calendar app would offer: every N days, every
// N weeks on some weekdays, every N months on a day of the month, its last
// day or its Nth weekday; at one or more times of day, in the Spec's zone.
//
// The periods are counted from the Spec's Start (or, without one, from the
// moment the schedule was created): "every 2 weeks" fires in the week of
// Start, two weeks later, and so on; weeks begin on Monday.
type Calendar struct {
	// Unit is day, week or month.
	Unit Unit `json:"unit"`
	// Interval is N in "every N units" (0 means 1).
	Interval int `json:"interval,omitempty"`
	// Weekdays are the days of a weekly calendar; for a monthly calendar
	// with Nth, the one weekday counted.
	Weekdays []time.Weekday `json:"weekdays,omitempty"`
	// Day is the day of the month of a monthly calendar: 1 to 31 (a month
	// without that day is skipped), or -1 for the last day, -2 the day
	// before, and so on.
	Day int `json:"day,omitempty"`
	// Nth, instead of Day, picks the Nth Weekdays[0] of the month: 1 to 5,
	// or -1 for the last one (a month without a 5th is skipped).
	Nth int `json:"nth,omitempty"`
	// At are the times of day, "15:04" or "15:04:05" (default "00:00").
	At []string `json:"at,omitempty"`
}

type calendar struct {
	Calendar
	anchor time.Time       // the wall date the periods count from
	times  []time.Duration // sorted times of day
}

func compileCalendar(c Calendar, anchorWall time.Time) (*calendar, error) {
	cc := &calendar{Calendar: c, anchor: dateOnly(anchorWall)}
	if cc.Interval == 0 {
		cc.Interval = 1
	}
	if cc.Interval < 0 || cc.Interval > 1000 {
		return nil, fmt.Errorf("calendar: interval %d is outside 1-1000", c.Interval)
	}
	at := c.At
	if len(at) == 0 {
		at = []string{"00:00"}
	}
	for _, s := range at {
		d, err := ParseTimeOfDay(s)
		if err != nil {
			return nil, err
		}
		cc.times = append(cc.times, d)
	}
	slices.Sort(cc.times)
	cc.times = slices.Compact(cc.times)
	for _, wd := range c.Weekdays {
		if wd < time.Sunday || wd > time.Saturday {
			return nil, fmt.Errorf("calendar: weekday %d is not 0 (Sunday) to 6", wd)
		}
	}
	switch c.Unit {
	case Daily:
		if len(c.Weekdays) > 0 || c.Day != 0 || c.Nth != 0 {
			return nil, errors.New("calendar: a daily calendar takes no weekdays, day or nth")
		}
	case Weekly:
		if len(c.Weekdays) == 0 {
			return nil, errors.New("calendar: a weekly calendar needs weekdays")
		}
		if c.Day != 0 || c.Nth != 0 {
			return nil, errors.New("calendar: a weekly calendar takes no day or nth")
		}
	case Monthly:
		switch {
		case c.Day != 0 && c.Nth != 0:
			return nil, errors.New("calendar: a monthly calendar takes a day or an nth weekday, not both")
		case c.Day != 0:
			if c.Day > 31 || c.Day < -31 || len(c.Weekdays) > 0 {
				return nil, fmt.Errorf("calendar: day %d must be 1 to 31 or -1 (last) to -31, without weekdays", c.Day)
			}
		case c.Nth != 0:
			if c.Nth > 5 || c.Nth < -1 || len(c.Weekdays) != 1 {
				return nil, errors.New("calendar: nth must be 1 to 5 or -1 (last), with exactly one weekday")
			}
		default:
			return nil, errors.New("calendar: a monthly calendar needs a day or an nth weekday")
		}
	default:
		return nil, fmt.Errorf("calendar: unit %q is not day, week or month", c.Unit)
	}
	return cc, nil
}

// ParseTimeOfDay parses "15:04" or "15:04:05" into the time since midnight.
func ParseTimeOfDay(s string) (time.Duration, error) {
	layout := "15:04"
	if strings.Count(s, ":") == 2 {
		layout = "15:04:05"
	}
	t, err := time.Parse(layout, s)
	// time.Parse reads a fraction after the seconds even when the layout
	// has none ("01:02:03.5"): it would be dropped, so it is refused.
	if err != nil || strings.ContainsAny(s, ".,") {
		return 0, fmt.Errorf("time of day %q: want HH:MM or HH:MM:SS", s)
	}
	return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second, nil
}

func (c *calendar) dateMatches(d time.Time) bool {
	n := int64(c.Interval)
	switch c.Unit {
	case Daily:
		return floorMod(daysSinceEpoch(d)-daysSinceEpoch(c.anchor), n) == 0
	case Weekly:
		if !slices.Contains(c.Weekdays, d.Weekday()) {
			return false
		}
		week := floorDiv(daysSinceEpoch(monday(d))-daysSinceEpoch(monday(c.anchor)), 7)
		return floorMod(week, n) == 0
	default:
		months := int64(d.Year()*12+int(d.Month())) - int64(c.anchor.Year()*12+int(c.anchor.Month()))
		if floorMod(months, n) != 0 {
			return false
		}
		last := lastDay(d.Year(), d.Month())
		day := d.Day()
		switch {
		case c.Day > 0:
			return day == c.Day
		case c.Day < 0:
			return day == last+1+c.Day
		case d.Weekday() != c.Weekdays[0]:
			return false
		case c.Nth > 0:
			return (day-1)/7+1 == c.Nth
		default:
			return day+7 > last
		}
	}
}

func monday(d time.Time) time.Time {
	back := (int(d.Weekday()) + 6) % 7
	return d.AddDate(0, 0, -back)
}

// nextWall returns the first wall time at or after w the calendar matches.
func (c *calendar) nextWall(w time.Time) (time.Time, bool) {
	w = w.Truncate(time.Second)
	day := dateOnly(w)
	tod := w.Sub(day)
	end := day.AddDate(maxSearchYears*max(1, c.Interval/12+1), 0, 0)
	for ; day.Before(end); day, tod = day.AddDate(0, 0, 1), 0 {
		if !c.dateMatches(day) {
			continue
		}
		for _, t := range c.times {
			if t >= tod {
				return day.Add(t), true
			}
		}
	}
	return time.Time{}, false
}
