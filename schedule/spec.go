package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Spec says when a schedule fires: exactly one of Cron, Every or Calendar,
// in TimeZone, between Start and End, at most MaxFirings times.
type Spec struct {
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), six (a seconds field first), or a macro
	// (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly,
	// or "@every 90m", which is Every). Names (JAN, MON), ranges, lists and
	// steps are accepted; "L" in day-of-month is the month's last day;
	// "FRI#2" is the second Friday, "FRIL" the last. When both day fields
	// are restricted either may match, as in Vixie cron.
	Cron string `json:"cron,omitempty"`
	// Every fires at fixed intervals of real time from Start (or from the
	// schedule's creation), whatever the zone and its clock changes.
	Every Duration `json:"every,omitempty"`
	// Calendar is a calendar-app recurrence (every N days, weeks, months;
	// weekdays; day of month, last day, Nth weekday).
	Calendar *Calendar `json:"calendar,omitempty"`
	// TimeZone is the IANA zone Cron and Calendar times are read in
	// (default UTC).
	TimeZone string `json:"timeZone,omitempty"`
	// Start is the earliest firing (inclusive); it also anchors Every and
	// the periods of Calendar. Zero: the schedule's creation.
	Start time.Time `json:"start,omitzero"`
	// End is the latest firing (inclusive); zero: none.
	End time.Time `json:"end,omitzero"`
	// MaxFirings ends the schedule after that many scheduled firings
	// (0: no limit). Triggered firings do not count.
	MaxFirings int `json:"maxFirings,omitempty"`
	// Jitter delays each firing by a pseudo-random amount in [0, Jitter),
	// derived from the schedule name and the nominal time so that every
	// host computes the same delay. The nominal time in the fired message
	// is unchanged.
	Jitter Duration `json:"jitter,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as "1h30m".
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration %s: want a string like \"90m\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Times is a compiled Spec: it answers when the schedule fires next.
type Times struct {
	spec   Spec
	loc    *time.Location
	anchor time.Time // Start, or the creation time
	every  time.Duration
	walls  interface {
		nextWall(time.Time) (time.Time, bool)
	}
}

// MinEvery is the shortest Every accepted.
const MinEvery = time.Second

// Compile checks the spec and returns its Times. created is when the
// schedule was created: it anchors Every and Calendar periods when Start
// is zero.
func (s Spec) Compile(created time.Time) (*Times, error) {
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", s.TimeZone, err)
	}
	t := &Times{spec: s, loc: loc, anchor: created}
	if !s.Start.IsZero() {
		t.anchor = s.Start
	}
	every := time.Duration(s.Every)
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Cron), "@every "); ok {
		if every, err = time.ParseDuration(strings.TrimSpace(rest)); err != nil {
			return nil, fmt.Errorf("cron %q: %w", s.Cron, err)
		}
		if s.Every != 0 {
			return nil, errors.New("spec: give one of cron, every and calendar")
		}
	} else if s.Cron != "" {
		c, err := parseCron(s.Cron)
		if err != nil {
			return nil, err
		}
		t.walls = c
	}
	if s.Calendar != nil {
		c, err := compileCalendar(*s.Calendar, wallOf(t.anchor.In(loc)))
		if err != nil {
			return nil, err
		}
		if t.walls != nil {
			return nil, errors.New("spec: give one of cron, every and calendar")
		}
		t.walls = c
	}
	switch {
	case every != 0 && t.walls != nil:
		return nil, errors.New("spec: give one of cron, every and calendar")
	case every == 0 && t.walls == nil:
		return nil, errors.New("spec: give one of cron, every and calendar")
	case every < 0 || (every > 0 && every < MinEvery):
		return nil, fmt.Errorf("spec: every %v is shorter than %v", every, MinEvery)
	}
	t.every = every
	switch {
	case s.MaxFirings < 0:
		return nil, errors.New("spec: maxFirings must not be negative")
	case s.Jitter < 0:
		return nil, errors.New("spec: jitter must not be negative")
	case !s.End.IsZero() && !s.Start.IsZero() && s.End.Before(s.Start):
		return nil, errors.New("spec: end is before start")
	}
	return t, nil
}

// Location returns the spec's time zone.
func (t *Times) Location() *time.Location { return t.loc }

// Next returns the first firing strictly after `after` (and not before
// Start), or the zero time when there is none (past End, or a calendar that
// never matches). It does not apply MaxFirings, which depends on how many
// firings happened.
func (t *Times) Next(after time.Time) time.Time {
	if !t.spec.Start.IsZero() && after.Before(t.spec.Start) {
		after = t.spec.Start.Add(-time.Nanosecond)
	}
	var next time.Time
	if t.every > 0 {
		n := int64(0)
		if !after.Before(t.anchor) {
			n = int64(after.Sub(t.anchor)/t.every) + 1
		}
		next = t.anchor.Add(time.Duration(n) * t.every)
	} else {
		w := wallOf(after.In(t.loc))
		for {
			m, ok := t.walls.nextWall(w)
			if !ok {
				return time.Time{}
			}
			if at := resolve(m, t.loc); at.After(after) {
				next = at
				break
			}
			w = m.Add(time.Second)
		}
	}
	if !t.spec.End.IsZero() && next.After(t.spec.End) {
		return time.Time{}
	}
	return next
}
