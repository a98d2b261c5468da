package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNestingLimit(t *testing.T) {
	// 10,000 nested parentheses: rejected with a position, not a crash.
	deep := strings.Repeat("(", 10000) + "a = 1" + strings.Repeat(")", 10000)
	_, err := ParseSQL(deep)
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("ParseSQL(10,000 parentheses) = %v, want *ParseError", err)
	}
	if pe.Pos != MaxExpressionLength || !strings.Contains(pe.Msg, "longer than 1024 characters") {
		t.Errorf("error = %+v, want the length limit at offset %d", pe, MaxExpressionLength)
	}

	nested := func(n int) string {
		return strings.Repeat("(", n) + "a = 1" + strings.Repeat(")", n)
	}
	// The top level counts as one level.
	f, err := ParseSQL(nested(MaxNesting - 1))
	if err != nil {
		t.Fatalf("ParseSQL(%d parentheses): %v", MaxNesting-1, err)
	}
	if ok, err := f.Match(mapMsg{"a": int32(1)}); !ok || err != nil {
		t.Errorf("deepest accepted filter: Match = %v, %v; want true", ok, err)
	}
	_, err = ParseSQL(nested(MaxNesting))
	if !errors.As(err, &pe) || pe.Pos != MaxNesting || !strings.Contains(pe.Msg, "nests deeper") {
		t.Errorf("ParseSQL(%d parentheses) = %v, want nesting error at offset %d", MaxNesting, err, MaxNesting)
	}

	for _, expr := range []string{
		strings.Repeat("NOT ", 200) + "a = 1",
		"a = " + strings.Repeat("-", 500) + "1",
		"a = " + strings.Repeat("- ", 300) + "1",
		"a IN (" + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + ")",
		"p(" + strings.Repeat("p(", 150) + "'a'" + strings.Repeat(")", 151) + " = 1",
	} {
		if _, err := ParseSQL(expr); !errors.As(err, &pe) || !strings.Contains(pe.Msg, "nests deeper") {
			t.Errorf("ParseSQL(%.30q...) = %v, want a nesting error", expr, err)
		}
		action := "SET x = " + strings.TrimPrefix(expr, "a = ")
		if _, err := ParseAction(action); !errors.As(err, &pe) {
			t.Errorf("ParseAction(%.30q...) = %v, want a *ParseError", action, err)
		}
	}
}

func TestLengthLimit(t *testing.T) {
	ok := "a = '" + strings.Repeat("x", MaxExpressionLength-6) + "'"
	if len(ok) != MaxExpressionLength {
		t.Fatalf("test setup: len = %d", len(ok))
	}
	if _, err := ParseSQL(ok); err != nil {
		t.Errorf("ParseSQL(%d bytes): %v", len(ok), err)
	}
	if _, err := ParseSQL(ok + " "); err == nil {
		t.Errorf("ParseSQL(%d bytes) succeeded, want an error", len(ok)+1)
	}
	if _, err := ParseAction("SET " + ok); err == nil {
		t.Errorf("ParseAction(%d bytes) succeeded, want an error", len(ok)+4)
	}
	// The limit counts characters, not bytes.
	wide := "a = '" + strings.Repeat("é", MaxExpressionLength-6) + "'"
	if _, err := ParseSQL(wide); err != nil {
		t.Errorf("ParseSQL(%d characters, %d bytes): %v", MaxExpressionLength, len(wide), err)
	}
	_, err := ParseSQL(wide + "  ")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Pos != len(wide) || pe.Column != MaxExpressionLength+1 {
		t.Errorf("ParseSQL(%d characters) = %+v, want an error at the first character past the limit", MaxExpressionLength+2, err)
	}
}

func TestActionStatementLimit(t *testing.T) {
	stmts := strings.Repeat("SET a = 1;", MaxActionStatements)
	if _, err := ParseAction(stmts); err != nil {
		t.Fatalf("ParseAction(%d statements): %v", MaxActionStatements, err)
	}
	_, err := ParseAction(stmts + "SET b = 2")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Pos != len(stmts) {
		t.Errorf("ParseAction(%d statements) = %v, want an error at offset %d", MaxActionStatements+1, err, len(stmts))
	}
}

// mapMsg is a Message of user properties only.
type mapMsg map[string]any

func (m mapMsg) SystemProperty(string) (any, bool) { return nil, false }
func (m mapMsg) UserProperty(name string) (any, bool) {
	v, ok := m[name]
	return v, ok
}

func TestTrueFalseFilters(t *testing.T) {
	for _, tc := range []struct {
		f    Filter
		want bool
		text string
	}{
		{TrueFilter{}, true, "1=1"},
		{FalseFilter{}, false, "1=0"},
	} {
		got, err := tc.f.Match(mapMsg{})
		if got != tc.want || err != nil {
			t.Errorf("%T.Match = %v, %v; want %v", tc.f, got, err, tc.want)
		}
		if s := tc.f.(fmt.Stringer).String(); s != tc.text {
			t.Errorf("%T.String() = %q, want %q", tc.f, s, tc.text)
		}
		// The SQL text they echo means the same thing.
		sf, err := ParseSQL(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := sf.Match(mapMsg{}); got != tc.want {
			t.Errorf("ParseSQL(%q).Match = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestCorrelationFilter(t *testing.T) {
	msg := newTestMsg()
	msg.sys["CorrelationId"] = "c-1"
	msg.sys["MessageId"] = "m-1"
	msg.sys["To"] = "to"
	msg.sys["ReplyTo"] = "reply"
	msg.sys["Label"] = "subject"
	msg.sys["SessionId"] = "s-1"
	msg.sys["ReplyToSessionId"] = "rs-1"
	msg.sys["ContentType"] = "text/plain"
	msg.user["color"] = "red"
	msg.user["n"] = int32(5)
	msg.user["nul"] = nil

	for _, tc := range []struct {
		name string
		f    CorrelationFilter
		want bool
	}{
		{"empty matches all", CorrelationFilter{}, true},
		{"correlation id", CorrelationFilter{CorrelationID: "c-1"}, true},
		{"correlation id differs", CorrelationFilter{CorrelationID: "c-2"}, false},
		{"case-sensitive", CorrelationFilter{CorrelationID: "C-1"}, false},
		{"every system field", CorrelationFilter{
			CorrelationID: "c-1", MessageID: "m-1", To: "to", ReplyTo: "reply", Subject: "subject",
			SessionID: "s-1", ReplyToSessionID: "rs-1", ContentType: "text/plain",
		}, true},
		{"message id differs", CorrelationFilter{MessageID: "x"}, false},
		{"to differs", CorrelationFilter{To: "x"}, false},
		{"reply to differs", CorrelationFilter{ReplyTo: "x"}, false},
		{"subject differs", CorrelationFilter{Subject: "x"}, false},
		{"session differs", CorrelationFilter{SessionID: "x"}, false},
		{"reply session differs", CorrelationFilter{ReplyToSessionID: "x"}, false},
		{"content type differs", CorrelationFilter{ContentType: "x"}, false},
		{"property", CorrelationFilter{Properties: map[string]any{"color": "red"}}, true},
		{"property differs", CorrelationFilter{Properties: map[string]any{"color": "blue"}}, false},
		{"property missing", CorrelationFilter{Properties: map[string]any{"size": "L"}}, false},
		{"property name case-sensitive", CorrelationFilter{Properties: map[string]any{"Color": "red"}}, false},
		{"numeric promotion", CorrelationFilter{Properties: map[string]any{"n": int64(5)}}, true},
		{"numeric promotion double", CorrelationFilter{Properties: map[string]any{"n": 5.0}}, true},
		{"numeric differs", CorrelationFilter{Properties: map[string]any{"n": 6}}, false},
		{"string vs number", CorrelationFilter{Properties: map[string]any{"n": "5"}}, false},
		{"nil matches nil", CorrelationFilter{Properties: map[string]any{"nul": nil}}, true},
		{"nil does not match value", CorrelationFilter{Properties: map[string]any{"color": nil}}, false},
		{"field and property", CorrelationFilter{Subject: "subject", Properties: map[string]any{"color": "red", "n": 5}}, true},
	} {
		got, err := tc.f.Match(msg)
		if err != nil || got != tc.want {
			t.Errorf("%s: Match = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// A message lacking the system property does not match.
	if got, _ := (&CorrelationFilter{To: "to"}).Match(newTestMsg()); got {
		t.Error("filter on To matched a message without To")
	}
}

func TestErrorTypes(t *testing.T) {
	_, err := ParseSQL("a = = 1")
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("ParseSQL error %T, want *ParseError", err)
	}
	if pe.Pos != 4 || pe.Line != 1 || pe.Column != 5 || pe.Msg != `expected an expression, found "="` {
		t.Errorf("ParseError = %+v", pe)
	}
	if got, want := pe.Error(), `line 1, column 5 (offset 4): expected an expression, found "="`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	f, err := ParseSQL("a / 0 = 1")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.Match(mapMsg{"a": 1})
	var ee *EvalError
	if ok || !errors.As(err, &ee) {
		t.Fatalf("Match = %v, %v; want false and *EvalError", ok, err)
	}
	if ee.Expr != "a / 0" || ee.Msg != "attempted to divide by zero" {
		t.Errorf("EvalError = %+v", ee)
	}
	if (&EvalError{Msg: "m"}).Error() != "m" {
		t.Error("EvalError without Expr should print just the message")
	}
}

func TestParameters(t *testing.T) {
	f, err := ParseSQL("a = @x OR b = @Y OR c = @X OR d = @z")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(f.Parameters()), "[x Y z]"; got != want {
		t.Errorf("Parameters() = %s, want %s", got, want)
	}
	// WithParameters does not change the receiver.
	g := f.WithParameters(map[string]any{"@x": 1, "y": 2, "Z": 3})
	if _, err := f.Match(mapMsg{"a": 1}); err == nil {
		t.Error("unbound filter evaluated without error")
	}
	if ok, err := g.Match(mapMsg{"d": int16(3)}); !ok || err != nil {
		t.Errorf("bound filter: Match = %v, %v; want true", ok, err)
	}
	if g.String() != f.String() {
		t.Errorf("String() changed by binding: %q vs %q", g.String(), f.String())
	}
	bad := f.WithParameters(map[string]any{"x": struct{}{}, "y": 1, "z": 1})
	if _, err := bad.Match(mapMsg{"a": 1}); err == nil || !strings.Contains(err.Error(), "unsupported type") {
		t.Errorf("parameter of unsupported type: err = %v", err)
	}

	a, err := ParseAction("SET a = @v; SET b = @w + @v")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(a.Parameters()); got != "[v w]" {
		t.Errorf("Action.Parameters() = %s", got)
	}
}

func TestNewIDDefaultIsRandomV4(t *testing.T) {
	a, err := ParseAction("SET a = newid(); SET b = newid()")
	if err != nil {
		t.Fatal(err)
	}
	m := newTestMsg()
	if err := a.Apply(m); err != nil {
		t.Fatal(err)
	}
	x, y := m.user["a"].([16]byte), m.user["b"].([16]byte)
	if x == y {
		t.Error("two newid() calls returned the same uuid")
	}
	if x[6]>>4 != 4 || x[8]>>6 != 2 {
		t.Errorf("newid() = %s, want a version 4 variant 1 uuid", formatUUID(x))
	}
}

func TestUnsupportedPropertyType(t *testing.T) {
	f, err := ParseSQL("a = 1")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Match(mapMsg{"a": struct{}{}}); ok || err != nil {
		t.Errorf("Match on a struct property = %v, %v; want false, nil", ok, err)
	}
	a, err := ParseAction("SET b = a")
	if err != nil {
		t.Fatal(err)
	}
	m := newTestMsg()
	m.user["a"] = struct{}{}
	if err := a.Apply(m); err == nil {
		t.Error("SET of an unsupported type succeeded")
	}
}

func TestConcurrentMatch(t *testing.T) {
	f, err := ParseSQL("color = 'red' AND quantity > 10 AND name LIKE 'a%z' AND n IN (1, 2, 3)")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				m := mapMsg{"color": "red", "quantity": int32(10 + i%3), "name": "abz", "n": int64(g%4 + 1)}
				got, err := f.Match(m)
				want := i%3 != 0 && g%4 != 3
				if err != nil || got != want {
					t.Errorf("goroutine %d iteration %d: Match = %v, %v; want %v", g, i, got, err, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestCanonicalSystemProperty(t *testing.T) {
	for in, want := range map[string]string{
		"label": "Label", "SUBJECT": "Label", "messageid": "MessageId",
		"enqueuedtimeutc": "EnqueuedTimeUtc", "ScheduledEnqueueTimeUtc": "ScheduledEnqueueTimeUtc",
	} {
		if got, ok := CanonicalSystemProperty(in); !ok || got != want {
			t.Errorf("CanonicalSystemProperty(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := CanonicalSystemProperty("Bogus"); ok || got != "Bogus" {
		t.Errorf("CanonicalSystemProperty(Bogus) = %q, %v", got, ok)
	}
}

func TestTextConversions(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{1.5, "1.5"}, {1e15, "1E+15"}, {1e14, "100000000000000"}, {0.0001, "0.0001"},
		{0.00001, "1E-05"}, {float32(0.1), "0.1"}, {-2.0, "-2"}, {0.0, "0"},
		{int8(-3), "-3"}, {uint64(18446744073709551615), "18446744073709551615"},
		{true, "True"}, {false, "False"},
		{90 * time.Second, "00:01:30"}, {-(26*time.Hour + 1500*time.Millisecond), "-1.02:00:01.5000000"},
		{time.Date(2024, 5, 1, 12, 0, 0, 500, time.UTC), "2024-05-01T12:00:00.0000005Z"},
		{[16]byte{0xab, 1}, "ab010000-0000-0000-0000-000000000000"},
	} {
		got, err := fromAny(tc.v).toText()
		if err != nil || got != tc.want {
			t.Errorf("toText(%T %v) = %q, %v; want %q", tc.v, tc.v, got, err, tc.want)
		}
	}
	if _, err := fromAny([]byte{1}).toText(); err == nil {
		t.Error("toText([]byte) succeeded")
	}
}

func TestConcatenationLimit(t *testing.T) {
	a, err := ParseAction(strings.Repeat("SET s = s + s;", 20))
	if err != nil {
		t.Fatal(err)
	}
	m := newTestMsg()
	m.user["s"] = "x"
	err = a.Apply(m)
	var ee *EvalError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "longer than 65536 bytes") {
		t.Fatalf("Apply = %v, want the concatenation limit", err)
	}
	// 16 doublings reach exactly 64 KiB, which is allowed.
	if got := len(m.user["s"].(string)); got != MaxStringLength {
		t.Errorf("string grew to %d bytes before the error, want %d", got, MaxStringLength)
	}
}

func TestTextKeepsOriginal(t *testing.T) {
	const expr = "color='red'  and [n]>1"
	f, err := ParseSQL(expr)
	if err != nil {
		t.Fatal(err)
	}
	g := f.WithParameters(nil).WithNewID(fixedID)
	if f.Text() != expr || g.Text() != expr {
		t.Errorf("Text() = %q / %q, want %q", f.Text(), g.Text(), expr)
	}
	if got := f.String(); got != "color = 'red' AND n > 1" {
		t.Errorf("String() = %q", got)
	}
	const act = "set a=1;remove b"
	a, err := ParseAction(act)
	if err != nil {
		t.Fatal(err)
	}
	if a.Text() != act || a.WithParameters(nil).Text() != act || a.String() != "SET a = 1; REMOVE b" {
		t.Errorf("Text() = %q, String() = %q", a.Text(), a.String())
	}
}
