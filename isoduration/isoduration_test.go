package isoduration

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1M":                       time.Minute,
		"PT5S":                       5 * time.Second,
		"PT1H":                       time.Hour,
		"P14D":                       14 * 24 * time.Hour,
		"P1DT2H3M4.5S":               24*time.Hour + 2*time.Hour + 3*time.Minute + 4500*time.Millisecond,
		"PT0.0000001S":               100 * time.Nanosecond,
		"PT0S":                       0,
		"-PT30S":                     -30 * time.Second,
		"P10675199DT2H48M5.4775807S": Max,
		"P99999999D":                 Max,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, why := range map[string]string{
		"":         "must start with P",
		"1M":       "must start with P",
		"P":        "no components",
		"PT":       "T with no time components",
		"P1M":      "not supported",
		"P1Y":      "not supported",
		"PT1D":     "unexpected designator",
		"PT1M1H":   "out of order",
		"P1.5D":    "only seconds",
		"PT1.2.3S": "only seconds",
		"PTS":      "expected a number",
		"PT5":      "expected a number",
		"P1DTT1H":  "T appears twice",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("Parse(%q) error = %v, want one mentioning %q", in, err, why)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for want, d := range map[string]time.Duration{
		"PT1M":                       time.Minute,
		"P14D":                       14 * 24 * time.Hour,
		"PT0S":                       0,
		"P1DT2H3M4.5S":               26*time.Hour + 3*time.Minute + 4500*time.Millisecond,
		"PT10M":                      10 * time.Minute,
		"P10675199DT2H48M5.4775807S": Max,
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Errorf("Parse(Format(%v)) = %v, %v", d, back, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"PT1M", "P10675199DT2H48M5.4775807S", "-P1DT0.5S", "PT", "P1Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil || d == Max || d < 0 {
			return
		}
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Fatalf("Parse(%q) = %v; Format → %q → %v, %v", s, d, Format(d), back, err)
		}
	})
}
