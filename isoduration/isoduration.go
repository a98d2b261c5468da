// Package isoduration parses and formats the ISO 8601 / XML Schema durations
// Service Bus uses for entity properties ("PT1M", "P14D", "P10675199DT2H48M5.4775807S"),
// in the emulator's Config.json and in the ATOM management API.
//
// Years and months are not fixed lengths of time; Service Bus never emits
// them, so they are rejected rather than guessed.
package isoduration

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Max is the duration Service Bus reports for "never" (TimeSpan.MaxValue,
// P10675199DT2H48M5.4775807S); it is also the largest time.Duration.
const Max = time.Duration(math.MaxInt64)

// Parse parses an ISO 8601 duration of days, hours, minutes and seconds
// (fractional seconds allowed, up to 7 digits as .NET writes them). A value
// beyond time.Duration's range, such as .NET's TimeSpan.MaxValue, saturates to Max.
func Parse(s string) (time.Duration, error) {
	in := s
	fail := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("invalid ISO 8601 duration %q: %s", in, why)
	}
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	if !strings.HasPrefix(s, "P") {
		return fail("must start with P")
	}
	s = s[1:]
	if s == "" {
		return fail("no components")
	}
	var total int64 // nanoseconds
	overflow := false
	inTime, seen := false, false
	var last byte
	order := map[byte]int{'D': 1, 'H': 2, 'M': 3, 'S': 4}
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime {
				return fail("T appears twice")
			}
			inTime = true
			s = s[1:]
			if s == "" {
				return fail("T with no time components")
			}
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return fail("expected a number followed by a designator")
		}
		num, unit := s[:i], s[i]
		s = s[i+1:]
		whole, frac, hasFrac := strings.Cut(num, ".")
		if hasFrac && (unit != 'S' || strings.Contains(frac, ".")) {
			return fail("only seconds may have a fraction")
		}
		if whole == "" && frac == "" {
			return fail("bad number " + num)
		}
		var unitNanos int64
		switch {
		case !inTime && unit == 'D':
			unitNanos = int64(24 * time.Hour)
		case !inTime && (unit == 'Y' || unit == 'M' || unit == 'W'):
			return fail("years, months and weeks are not supported")
		case inTime && unit == 'H':
			unitNanos = int64(time.Hour)
		case inTime && unit == 'M':
			unitNanos = int64(time.Minute)
		case inTime && unit == 'S':
			unitNanos = int64(time.Second)
		default:
			return fail(fmt.Sprintf("unexpected designator %q", unit))
		}
		if last != 0 && order[unit] <= order[last] {
			return fail("components out of order")
		}
		last, seen = unit, true
		w := int64(0)
		if whole != "" {
			v, err := strconv.ParseUint(whole, 10, 63)
			switch {
			case err != nil && strings.Contains(err.Error(), "range"):
				overflow = true
			case err != nil:
				return fail("bad number " + num)
			default:
				w = int64(v)
			}
		}
		if w > (math.MaxInt64-total)/unitNanos {
			overflow = true
		} else {
			total += w * unitNanos
		}
		if frac != "" {
			if len(frac) > 9 {
				frac = frac[:9] // below a nanosecond
			}
			f, err := strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
			if err != nil {
				return fail("bad number " + num)
			}
			if int64(f) > math.MaxInt64-total {
				overflow = true
			} else {
				total += int64(f)
			}
		}
	}
	if !seen {
		return fail("no components")
	}
	if overflow {
		if neg {
			return fail("negative overflow")
		}
		return Max, nil
	}
	if neg {
		total = -total
	}
	return time.Duration(total), nil
}

// Format writes d as Service Bus does: "P<days>DT<h>H<m>M<s>S", omitting zero
// components ("PT1M", "P14D", "PT0S"); Max is written as .NET's TimeSpan.MaxValue.
func Format(d time.Duration) string {
	if d == Max {
		return "P10675199DT2H48M5.4775807S"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	b.WriteByte('P')
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	if days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "D")
	}
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	sec := d % time.Minute
	if h == 0 && m == 0 && sec == 0 {
		if days == 0 {
			b.WriteString("T0S")
		}
		return b.String()
	}
	b.WriteByte('T')
	if h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10) + "H")
	}
	if m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10) + "M")
	}
	if sec > 0 {
		whole, frac := sec/time.Second, sec%time.Second
		b.WriteString(strconv.FormatInt(int64(whole), 10))
		if frac > 0 {
			f := strings.TrimRight(fmt.Sprintf("%09d", int64(frac)), "0")
			b.WriteString("." + f)
		}
		b.WriteByte('S')
	}
	return b.String()
}
