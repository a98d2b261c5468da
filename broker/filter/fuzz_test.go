package filter

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzMsg returns the fixed message fuzzed expressions run against.
func fuzzMsg() *testMsg {
	m := newTestMsg()
	m.user["color"] = "red"
	m.user["a"] = int32(5)
	m.user["b"] = int64(-7)
	m.user["c"] = 2.5
	m.user["u"] = uint64(1 << 63)
	m.user["f"] = float32(0.5)
	m.user["t"] = true
	m.user["nul"] = nil
	m.user["d"] = time.Minute
	m.user["when"] = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	m.user["id"] = fixedID()
	m.user["raw"] = []byte{1, 2}
	m.user["my prop"] = "x"
	m.sys["MessageId"] = "m-1"
	m.sys["Label"] = "lbl"
	m.sys["SequenceNumber"] = int64(42)
	m.sys["TimeToLive"] = time.Hour
	return m
}

var fuzzParams = map[string]any{"p": "red", "n": int64(3), "x": 1.5, "flag": false}

var fuzzSeeds = []string{
	"color = 'red' AND a > 10",
	"NOT (a = 1 OR b <> 2) AND c >= -1.5E-3",
	"color LIKE 'r!%_' ESCAPE '!' OR [my prop] NOT LIKE '%x'",
	"a IN (1, 2.0, '3', @n) AND nul IS NULL AND EXISTS(sys.Label)",
	"sys.SequenceNumber % 2 = 0 AND property('sys.Label') + newid() <> ''",
	"when - d < when AND -u < 0 AND f * 2 = 1",
	"((((a))))/0 = 1",
}

func FuzzParseSQL(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	msg := fuzzMsg()
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := ParseSQL(expr)
		if err != nil {
			checkParseError(t, expr, err)
			return
		}
		flt = flt.WithParameters(fuzzParams).WithNewID(fixedID)
		res, known, evalErr := flt.Eval(msg)
		if evalErr != nil {
			var ee *EvalError
			if !errors.As(evalErr, &ee) {
				t.Fatalf("Eval(%q) error %T %v, want *EvalError", expr, evalErr, evalErr)
			}
		}
		// The normalized text parses to itself and means the same thing.
		s := flt.String()
		if len(s) > MaxExpressionLength {
			return
		}
		g, err := ParseSQL(s)
		if err != nil {
			t.Fatalf("normalized %q (from %q) does not parse: %v", s, expr, err)
		}
		if g.String() != s {
			t.Fatalf("normalized %q renders again as %q", s, g.String())
		}
		g = g.WithParameters(fuzzParams).WithNewID(fixedID)
		res2, known2, evalErr2 := g.Eval(msg)
		if res != res2 || known != known2 || (evalErr == nil) != (evalErr2 == nil) {
			t.Fatalf("%q gives (%v, %v, %v) but its normalized %q gives (%v, %v, %v)",
				expr, res, known, evalErr, s, res2, known2, evalErr2)
		}
	})
}

func FuzzParseAction(f *testing.F) {
	for _, s := range []string{
		"SET a = a + 1; REMOVE color",
		"SET sys.Label = sys.Label + '-' + @p SET [new prop] = newid()",
		"REMOVE sys.To; SET sys.TimeToLive = d + d, SET x = a > 1",
		"set q = property('sys.messageid') ; set r = -b * c / 0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		a, err := ParseAction(expr)
		if err != nil {
			checkParseError(t, expr, err)
			return
		}
		a = a.WithParameters(fuzzParams).WithNewID(fixedID)
		m1 := fuzzMsg()
		err1 := a.Apply(m1)
		if err1 != nil {
			var ee *EvalError
			if !errors.As(err1, &ee) {
				t.Fatalf("Apply(%q) error %T %v, want *EvalError", expr, err1, err1)
			}
		}
		s := a.String()
		if len(s) > MaxExpressionLength {
			return
		}
		b, err := ParseAction(s)
		if err != nil {
			t.Fatalf("normalized %q (from %q) does not parse: %v", s, expr, err)
		}
		if b.String() != s {
			t.Fatalf("normalized %q renders again as %q", s, b.String())
		}
		m2 := fuzzMsg()
		err2 := b.WithParameters(fuzzParams).WithNewID(fixedID).Apply(m2)
		d1, d2 := strings.Join(m1.dump(), "\n"), strings.Join(m2.dump(), "\n")
		if (err1 == nil) != (err2 == nil) || d1 != d2 {
			t.Fatalf("%q and its normalized %q disagree:\n%v\n%s\nvs\n%v\n%s", expr, s, err1, d1, err2, d2)
		}
	})
}

// checkParseError asserts that err is a *ParseError inside expr.
func checkParseError(t *testing.T, expr string, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("parse error %T %v, want *ParseError", err, err)
	}
	if pe.Pos < 0 || pe.Pos > len(expr) || pe.Line < 1 || pe.Column < 1 || pe.Msg == "" {
		t.Fatalf("parse error %+v out of range for %d-byte input", pe, len(expr))
	}
	if want := strings.Count(expr[:pe.Pos], "\n") + 1; pe.Line != want {
		t.Fatalf("parse error line %d, want %d", pe.Line, want)
	}
}

// likeRegexp is an independent LIKE implementation to check against.
func likeRegexp(pattern string, esc rune, hasEsc bool) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	escaped := false
	for _, r := range pattern {
		switch {
		case escaped:
			b.WriteString(regexp.QuoteMeta(string(r)))
			escaped = false
		case hasEsc && r == esc:
			escaped = true
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

func FuzzLike(f *testing.F) {
	for _, c := range [][3]string{
		{"abc", "a%c", ""}, {"50%", "50!%", "!"}, {"aaaaab", "%a%a%b", ""},
		{"héllo", "h_llo", ""}, {"a_c", "a__c", "_"}, {"", "%", ""}, {"x\ny", "x_y", ""},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, s, pattern, escape string) {
		if !utf8.ValidString(s) || !utf8.ValidString(pattern) || !utf8.ValidString(escape) {
			return
		}
		esc, hasEsc := rune(0), escape != ""
		if hasEsc {
			var err error
			if esc, err = escapeRune(escape); err != nil {
				return
			}
		}
		p, err := compileLike(pattern, esc, hasEsc)
		if err != nil {
			if !errors.Is(err, errLikeTrailingEscape) {
				t.Fatalf("compileLike(%q, %q): %v", pattern, escape, err)
			}
			return
		}
		if got, want := p.match(s), likeRegexp(pattern, esc, hasEsc).MatchString(s); got != want {
			t.Fatalf("%q LIKE %q ESCAPE %q = %v, want %v", s, pattern, escape, got, want)
		}
	})
}
