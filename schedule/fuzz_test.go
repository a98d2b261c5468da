package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// modelField is the meaning of a cron field as a membership test, written
// independently of parseField's loop: value v is in the field when some
// comma-separated part has a ≤ v ≤ b and (v−a) divisible by the step. ok
// is false when parseField must reject the field.
func modelField(field string, lo, hi int, names []string) (bits uint64, ok bool) {
	for _, part := range strings.Split(field, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			var err error
			if step, err = strconv.Atoi(stepStr); err != nil || step < 1 {
				return 0, false
			}
		}
		var a, b int
		switch {
		case rng == "*" || rng == "?":
			a, b = lo, hi
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err1, err2 error
			a, err1 = parseValue(x, lo, hi, names)
			b, err2 = parseValue(y, lo, hi, names)
			if err1 != nil || err2 != nil || b < a {
				return 0, false
			}
		default:
			var err error
			if a, err = parseValue(rng, lo, hi, names); err != nil {
				return 0, false
			}
			b = a
			if hasStep {
				b = hi
			}
		}
		for v := lo; v <= hi; v++ {
			if v >= a && v <= b && (v-a)%step == 0 {
				bits |= 1 << uint(v)
			}
		}
	}
	return bits, true
}

// rangeBits is the bit set of lo..hi.
func rangeBits(lo, hi int) uint64 { return (1<<uint(hi+1) - 1) &^ (1<<uint(lo) - 1) }

// swapASCIICase swaps the case of ASCII letters only: cron names, "L" and
// macros are case-insensitive.
func swapASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{
		"* * * * *", "0 30 2 * * *", "*/15 * * * *", "0 0 12 29 2 *", "0 0 0 L * *", "0 9 * * TUE#2", "0 0 * * 5L",
		"*/20 * * * * *", "0 0 1,15 * MON", "0 10-40/15 9 * JAN-MAR *", "0 0 * * 7", "0 0 0 30 2 *", "@hourly", "@Daily",
		"@reboot", "0 0 * *", "60 * * * *", "0 5-1 * * *", "*/0 * * * *", "0 0 * * MON#6", "0 0 L,15 * FRIL,SUN#1",
		"5/9223372036854775807 * * * * *", "1-5/2 * * * * *", "0 0 ? * SUN-SAT", "? ? ? ? ? ?", "0 0 * * #", "0 0 , * *",
		" \t0 0 * * *\n", "0 0 0 * * 7-7", "0 0 0 l * sunl",
	} {
		f.Add(s)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := parseCron(expr)
		other, otherErr := parseCron(swapASCIICase(expr))
		if (err == nil) != (otherErr == nil) || (err == nil && fmt.Sprint(*c) != fmt.Sprint(*other)) {
			t.Fatalf("case changes the meaning of %q: %+v, %v; swapped %+v, %v", expr, c, err, other, otherErr)
		}
		if err != nil {
			if c != nil {
				t.Fatalf("parseCron(%q) rejected with %v but returned %+v", expr, err, c)
			}
			if !strings.Contains(err.Error(), strconv.Quote(expr)) {
				t.Fatalf("parseCron(%q): error %q does not name the expression", expr, err)
			}
			return
		}
		// Every field is within its range and not empty.
		switch {
		case c.sec == 0 || c.sec&^rangeBits(0, 59) != 0,
			c.min == 0 || c.min&^rangeBits(0, 59) != 0,
			c.hour == 0 || c.hour&^rangeBits(0, 23) != 0,
			c.dom&^rangeBits(1, 31) != 0 || (c.dom == 0 && !c.lastDom),
			c.month == 0 || c.month&^rangeBits(1, 12) != 0,
			c.dow&^rangeBits(0, 6) != 0 || (c.dow == 0 && len(c.nth) == 0):
			t.Fatalf("parseCron(%q) = %+v: a field out of range or empty", expr, c)
		}
		for _, n := range c.nth {
			if n.wd < time.Sunday || n.wd > time.Saturday || n.n == 0 || n.n < -1 || n.n > 5 {
				t.Fatalf("parseCron(%q): weekday occurrence %+v out of range", expr, n)
			}
		}
		// Each field holds exactly the values the grammar gives it.
		fields := strings.Fields(strings.TrimSpace(expr))
		if m, ok := macros[strings.ToLower(strings.TrimSpace(expr))]; ok {
			fields = strings.Fields(m)
		}
		if len(fields) == 5 {
			fields = append([]string{"0"}, fields...)
		}
		var dom, dow []string
		for _, p := range strings.Split(fields[3], ",") {
			if !strings.EqualFold(p, "L") {
				dom = append(dom, p)
			}
		}
		for _, p := range strings.Split(fields[5], ",") {
			if up := strings.ToUpper(p); !strings.Contains(up, "#") && !(len(up) > 1 && strings.HasSuffix(up, "L")) {
				dow = append(dow, p)
			}
		}
		want := [...]struct {
			name  string
			got   uint64
			field string
			lo    int
			hi    int
			names []string
		}{
			{"second", c.sec, fields[0], 0, 59, nil},
			{"minute", c.min, fields[1], 0, 59, nil},
			{"hour", c.hour, fields[2], 0, 23, nil},
			{"day-of-month", c.dom, strings.Join(dom, ","), 1, 31, nil},
			{"month", c.month, fields[4], 1, 12, monthNames},
			{"day-of-week", c.dow, strings.Join(dow, ","), 0, 7, dayNames},
		}
		for _, w := range want {
			if w.field == "" {
				if w.got != 0 {
					t.Fatalf("parseCron(%q): %s field %b, want none", expr, w.name, w.got)
				}
				continue
			}
			bits, ok := modelField(w.field, w.lo, w.hi, w.names)
			if w.name == "day-of-week" && bits&(1<<7) != 0 {
				bits = bits&^(1<<7) | 1
			}
			if !ok || bits != w.got {
				t.Fatalf("parseCron(%q): %s field %q is %b, want %b (valid %v)", expr, w.name, w.field, w.got, bits, ok)
			}
		}
		// A firing found matches every field and is not before the start.
		w, ok := c.nextWall(start)
		if !ok {
			return
		}
		if w.Before(start) || c.month&(1<<uint(w.Month())) == 0 || !c.dayMatches(w) ||
			c.hour&(1<<uint(w.Hour())) == 0 || c.min&(1<<uint(w.Minute())) == 0 || c.sec&(1<<uint(w.Second())) == 0 {
			t.Fatalf("parseCron(%q): next firing %v does not match", expr, w)
		}
	})
}

func FuzzParseTimeOfDay(f *testing.F) {
	for _, s := range []string{"00:00", "15:04", "9:30", "23:59:59", "24:00", "12:60", "1:2", "01:02:03.5", "01:02:03,5",
		"", ":", "::", "-1:00", "+1:00", " 01:00", "01:00 ", "1:02:03", "001:00", "12:00:60"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTimeOfDay(s)
		if err != nil {
			if d != 0 || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseTimeOfDay(%q) = %v, %v: want 0 and an error naming the input", s, d, err)
			}
			return
		}
		if d < 0 || d >= 24*time.Hour || d%time.Second != 0 {
			t.Fatalf("ParseTimeOfDay(%q) = %v: not a whole second of a day", s, d)
		}
		// Nothing of the input is lost: it is the value written out, the
		// hour possibly without its leading zero.
		h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
		canon := fmt.Sprintf("%02d:%02d", h, m)
		if strings.Count(s, ":") == 2 {
			canon += fmt.Sprintf(":%02d", sec)
		}
		if s != canon && !(h < 10 && s == canon[1:]) {
			t.Fatalf("ParseTimeOfDay(%q) = %v, which reads %q", s, d, canon)
		}
		if back, err := ParseTimeOfDay(canon); err != nil || back != d {
			t.Fatalf("ParseTimeOfDay(%q) = %v; %q reads back as %v, %v", s, d, canon, back, err)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	t0 := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	for _, st := range []*state{
		{Format: stateFormat, Def: Definition{Name: "nightly", Spec: Spec{Cron: "0 30 2 * * *", TimeZone: "Europe/Oslo", Jitter: Duration(time.Minute)},
			Target: "jobs", Message: Message{Subject: "run", Body: []byte("{}"), Properties: map[string]any{"n": 1.5, "s": "x", "b": true}},
			Misfire: MisfireAll, MisfireLimit: 3, Overlap: OverlapQueue, MaxRunTime: Duration(time.Hour)},
			Hash: "abc", Generation: 7, Created: t0, Updated: t0.Add(time.Hour), Next: t0.Add(24 * time.Hour), TickSeq: 12,
			LastFired: t0, Firings: 4, Triggered: 1, Missed: 2, Skipped: 3, Running: []time.Time{t0}, Queued: []time.Time{t0, t0}},
		{Format: stateFormat, Def: Definition{Name: "cal", Spec: Spec{Calendar: &Calendar{Unit: Weekly, Interval: 2, Weekdays: []time.Weekday{time.Monday}, At: []string{"09:30"}}},
			Target: "q"}, Paused: true, Finished: true},
		{Format: stateFormat, Def: Definition{Name: "every", Spec: Spec{Every: Duration(90 * time.Minute), Start: t0, End: t0.AddDate(1, 0, 0), MaxFirings: 10}}},
	} {
		b, err := json.Marshal(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "null", "{}", `{"format":2}`, `{"format":1}`, `{"format":1,"definition":{"every":12345}}`,
		`{"format":1,"definition":{"every":"-9223372036854775808ns"}}`, `{"format":1,"created":"10000-01-01T00:00:00Z"}`,
		`{"format":1,"FORMAT":1,"definition":{"message":{"properties":{"x":1e308}}}}`, `[1]`, `{"format":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if len(b) == 0 {
			if st != nil || err != nil {
				t.Fatalf("no state: %+v, %v; want nil, nil", st, err)
			}
			return
		}
		if err != nil {
			if st != nil || !strings.HasPrefix(err.Error(), "schedule: ") {
				t.Fatalf("rejected state: %+v, %v", st, err)
			}
			return
		}
		if st == nil || st.Format != stateFormat {
			t.Fatalf("accepted state %+v, want format %d", st, stateFormat)
		}
		// What is read can be saved (as saveState does), and saving what is
		// read back again writes the same bytes.
		c1, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("accepted state %q does not encode: %v", b, err)
		}
		again, err := decodeState(c1)
		if err != nil {
			t.Fatalf("re-encoded state %q is rejected: %v", c1, err)
		}
		c2, err := json.Marshal(again)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s (%v)", c1, c2, err)
		}
	})
}
