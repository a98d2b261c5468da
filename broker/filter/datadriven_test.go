package filter

import (
	"bufio"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The data-driven tests read testdata/*.txt. A file is a sequence of cases:
//
//	# comments and blank lines between cases are ignored
//	<command>
//	<input lines>
//	----
//	<expected output lines>
//	<blank line ends the case>
//
// Commands:
//
//	msg     input: properties, one "name type value" a line ("sys.Label string
//	        x", "[my prop] int32 5", "n nil"); replaces the current message.
//	params  input: parameters, "name type value" lines; replaces the bound
//	        parameters (no lines: parameters unbound).
//	eval    input: a filter; output: true, false, unknown, "error: ..." or
//	        "parse error: ...". Evaluated against the current message.
//	parse   input: a filter; output: its normalized text or "parse error: ...".
//	action  input: an action; applied to a copy of the current message;
//	        output: the message's properties after, or an error.
//	parse-action  input: an action; output: its normalized text or error.
//
// Types: string, bool, int, int8, int16, int32, int64, uint, uint8, uint16,
// uint32, uint64, float32, float64, time (RFC 3339), duration (Go syntax),
// uuid, bytes (hex), nil. Run with -rewrite to print the actual outputs
// into the files (review the diff before committing).

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations with actual outputs")

type ddCase struct {
	line     int
	cmd      string
	input    []string
	expected []string
}

func readCases(t *testing.T, path string) (cases []ddCase, lines []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := ddCase{line: i + 1, cmd: strings.TrimSpace(l)}
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case has no ---- separator", path, c.line)
		}
		for i++; i < len(lines) && lines[i] != ""; i++ {
			c.expected = append(c.expected, lines[i])
		}
		cases = append(cases, c)
	}
	return cases, lines
}

// testMsg is the Message the data-driven tests evaluate against.
type testMsg struct {
	sys  map[string]any // by canonical name
	user map[string]any
}

func newTestMsg() *testMsg { return &testMsg{sys: map[string]any{}, user: map[string]any{}} }

func (m *testMsg) SystemProperty(name string) (any, bool) {
	canon, _ := CanonicalSystemProperty(name)
	v, ok := m.sys[canon]
	return v, ok
}

func (m *testMsg) UserProperty(name string) (any, bool) {
	v, ok := m.user[name]
	return v, ok
}

func (m *testMsg) SetUserProperty(name string, v any) { m.user[name] = v }
func (m *testMsg) DeleteUserProperty(name string)     { delete(m.user, name) }

func (m *testMsg) SetSystemProperty(name string, v any) error {
	canon, known := CanonicalSystemProperty(name)
	if !known || !systemProperties[strings.ToLower(canon)].settable {
		return fmt.Errorf("system property %s is read-only", name)
	}
	if canon == "SessionId" && v == "reject" { // lets tests exercise broker errors
		return errors.New("session id rejected by broker")
	}
	m.sys[canon] = v
	return nil
}

func (m *testMsg) clone() *testMsg {
	c := newTestMsg()
	for k, v := range m.sys {
		c.sys[k] = v
	}
	for k, v := range m.user {
		c.user[k] = v
	}
	return c
}

// dump renders the properties sorted, one "name type value" a line.
func (m *testMsg) dump() []string {
	var out []string
	for k, v := range m.sys {
		out = append(out, "sys."+k+" "+formatTyped(v))
	}
	for k, v := range m.user {
		name := k
		if strings.ContainsAny(k, " \t[]") || k == "" {
			name = "[" + k + "]"
		}
		out = append(out, name+" "+formatTyped(v))
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = []string{"(no properties)"}
	}
	return out
}

func formatTyped(v any) string {
	switch t := v.(type) {
	case nil:
		return "nil"
	case string:
		return "string " + t
	case time.Time:
		return "time " + t.Format(time.RFC3339Nano)
	case time.Duration:
		return "duration " + t.String()
	case [16]byte:
		return "uuid " + formatUUID(t)
	case []byte:
		return "bytes " + hex.EncodeToString(t)
	case float32:
		return "float32 " + strconv.FormatFloat(float64(t), 'g', -1, 32)
	case float64:
		return "float64 " + strconv.FormatFloat(t, 'g', -1, 64)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// parseProp parses "name type value".
func parseProp(line string) (name string, v any, err error) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "[") {
		end := strings.IndexByte(line, ']')
		if end < 0 {
			return "", nil, fmt.Errorf("unterminated [name]")
		}
		name, line = line[1:end], strings.TrimSpace(line[end+1:])
	} else {
		sp := strings.IndexByte(line, ' ')
		if sp < 0 {
			return "", nil, fmt.Errorf("want name type value: %q", line)
		}
		name, line = line[:sp], line[sp+1:]
	}
	typ, text, _ := strings.Cut(line, " ")
	v, err = parseTyped(typ, text)
	return name, v, err
}

func parseTyped(typ, text string) (any, error) {
	num := func(bits int) (int64, error) { return strconv.ParseInt(text, 10, bits) }
	unum := func(bits int) (uint64, error) { return strconv.ParseUint(text, 10, bits) }
	switch typ {
	case "nil":
		return nil, nil
	case "string":
		return text, nil
	case "bool":
		return strconv.ParseBool(text)
	case "int":
		i, err := num(64)
		return int(i), err
	case "int8":
		i, err := num(8)
		return int8(i), err
	case "int16":
		i, err := num(16)
		return int16(i), err
	case "int32":
		i, err := num(32)
		return int32(i), err
	case "int64":
		return num(64)
	case "uint":
		u, err := unum(64)
		return uint(u), err
	case "uint8":
		u, err := unum(8)
		return uint8(u), err
	case "uint16":
		u, err := unum(16)
		return uint16(u), err
	case "uint32":
		u, err := unum(32)
		return uint32(u), err
	case "uint64":
		return unum(64)
	case "float32":
		f, err := strconv.ParseFloat(text, 32)
		return float32(f), err
	case "float64":
		return strconv.ParseFloat(text, 64)
	case "time":
		return time.Parse(time.RFC3339Nano, text)
	case "duration":
		return time.ParseDuration(text)
	case "uuid":
		b, err := hex.DecodeString(strings.ReplaceAll(text, "-", ""))
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("bad uuid %q", text)
		}
		return [16]byte(b), nil
	case "bytes":
		return hex.DecodeString(text)
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

func formatErr(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return "parse error: " + pe.Error()
	}
	var ee *EvalError
	if errors.As(err, &ee) {
		return "error: " + ee.Error()
	}
	return "unexpected error type " + fmt.Sprintf("%T", err) + ": " + err.Error()
}

// fixedID is the generator newid() uses in data-driven tests.
func fixedID() [16]byte {
	return [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4d, 0xef, 0x80, 1, 2, 3, 4, 5, 6, 7}
}

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) { runFile(t, path) })
	}
}

func runFile(t *testing.T, path string) {
	cases, lines := readCases(t, path)
	msg := newTestMsg()
	var params map[string]any
	replace := map[int][]string{} // case line -> actual output, for -rewrite
	for _, c := range cases {
		got := runCase(t, path, c, &msg, &params)
		if strings.Join(got, "\n") != strings.Join(c.expected, "\n") {
			if *rewrite {
				replace[c.line] = got
				continue
			}
			t.Errorf("%s:%d: %s\n%s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd,
				strings.Join(c.input, "\n"), strings.Join(got, "\n"), strings.Join(c.expected, "\n"))
		}
	}
	if *rewrite && len(replace) > 0 {
		rewriteFile(t, path, lines, replace)
	}
}

func rewriteFile(t *testing.T, path string, lines []string, replace map[int][]string) {
	var out []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		got, ok := replace[i+1]
		if !ok {
			continue
		}
		for i++; lines[i] != "----"; i++ {
			out = append(out, lines[i])
		}
		out = append(out, "----")
		out = append(out, got...)
		for i++; i < len(lines) && lines[i] != ""; i++ {
		}
		if i < len(lines) {
			out = append(out, "")
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runCase(t *testing.T, path string, c ddCase, msg **testMsg, params *map[string]any) []string {
	text := strings.Join(c.input, "\n")
	switch c.cmd {
	case "msg":
		m := newTestMsg()
		for _, l := range c.input {
			name, v, err := parseProp(l)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.line, err)
			}
			if s, ok := strings.CutPrefix(name, "sys."); ok {
				canon, _ := CanonicalSystemProperty(s)
				m.sys[canon] = v
			} else {
				m.user[name] = v
			}
		}
		*msg = m
		return nil
	case "params":
		if len(c.input) == 0 {
			*params = nil
			return nil
		}
		p := map[string]any{}
		for _, l := range c.input {
			name, v, err := parseProp(l)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.line, err)
			}
			p[name] = v
		}
		*params = p
		return nil
	case "eval":
		f, err := ParseSQL(text)
		if err != nil {
			return []string{formatErr(err)}
		}
		checkRoundTrip(t, path, c, f.String())
		f = f.WithNewID(fixedID)
		if *params != nil {
			f = f.WithParameters(*params)
		}
		res, known, err := f.Eval(*msg)
		matched, merr := f.Match(*msg)
		if (err == nil) != (merr == nil) || matched != (res && known) {
			t.Errorf("%s:%d: Match (%v, %v) disagrees with Eval (%v, %v, %v)", path, c.line, matched, merr, res, known, err)
		}
		switch {
		case err != nil:
			return []string{formatErr(err)}
		case !known:
			return []string{"unknown"}
		}
		return []string{strconv.FormatBool(res)}
	case "parse":
		f, err := ParseSQL(text)
		if err != nil {
			return []string{formatErr(err)}
		}
		checkRoundTrip(t, path, c, f.String())
		return []string{f.String()}
	case "parse-action", "action":
		a, err := ParseAction(text)
		if err != nil {
			return []string{formatErr(err)}
		}
		if b, err := ParseAction(a.String()); err != nil || b.String() != a.String() {
			t.Errorf("%s:%d: action %q does not round-trip: %v", path, c.line, a.String(), err)
		}
		if c.cmd == "parse-action" {
			return []string{a.String()}
		}
		a = a.WithNewID(fixedID)
		if *params != nil {
			a = a.WithParameters(*params)
		}
		m := (*msg).clone()
		if err := a.Apply(m); err != nil {
			return append([]string{formatErr(err)}, m.dump()...)
		}
		return m.dump()
	}
	t.Fatalf("%s:%d: unknown command %q", path, c.line, c.cmd)
	return nil
}

// checkRoundTrip asserts that the normalized text parses to itself.
func checkRoundTrip(t *testing.T, path string, c ddCase, s string) {
	t.Helper()
	g, err := ParseSQL(s)
	if err != nil {
		t.Errorf("%s:%d: normalized text %q does not parse: %v", path, c.line, s, err)
		return
	}
	if g.String() != s {
		t.Errorf("%s:%d: normalized text %q renders again as %q", path, c.line, s, g.String())
	}
}
