package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxActionStatements is the most SET/REMOVE statements one action may hold
// (Service Bus allows 32 expressions per action).
const MaxActionStatements = 32

// Action is a parsed SQL rule action, obtained from ParseAction: SET and
// REMOVE statements applied in order to a message a rule's filter selected.
// It is immutable and safe for concurrent use.
type Action struct {
	text   string
	stmts  []*statement
	params map[string]any
	newID  func() [16]byte
	exprs  []evalFn // compiled SET expressions, by statement; nil for REMOVE
}

// statement is one SET or REMOVE.
type statement struct {
	remove bool
	target *propNode
	expr   node // SET only
}

// ParseAction parses a SQL rule action: statements "SET property =
// expression" and "REMOVE property", optionally separated or terminated by
// ';' (or ','). Syntax errors, and targets that are read-only or unknown
// system properties, are *ParseError.
func ParseAction(expr string) (*Action, error) {
	p, err := newParser(expr)
	if err != nil {
		return nil, err
	}
	a := &Action{text: expr}
	for {
		for p.tok.kind == tSemicolon || p.tok.kind == tComma && len(a.stmts) > 0 {
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		if p.tok.kind == tEOF {
			break
		}
		if len(a.stmts) == MaxActionStatements {
			return nil, p.errorf("an action holds at most %d statements", MaxActionStatements)
		}
		s, err := p.parseStatement()
		if err != nil {
			return nil, err
		}
		a.stmts = append(a.stmts, s)
		if k := p.tok.kind; k != tEOF && k != tSemicolon && k != tComma && !p.tok.isKeyword("SET") && !p.tok.isKeyword("REMOVE") {
			return nil, p.expected("';', SET, REMOVE or end of action")
		}
	}
	if len(a.stmts) == 0 {
		return nil, p.expected("SET or REMOVE")
	}
	a.compile()
	return a, nil
}

func (p *parser) parseStatement() (*statement, error) {
	s := &statement{}
	switch {
	case p.tok.isKeyword("SET"):
	case p.tok.isKeyword("REMOVE"):
		s.remove = true
	default:
		return nil, p.expected("SET or REMOVE")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tIdent && p.tok.kind != tDelimIdent {
		return nil, p.expected("a property name")
	}
	target, err := p.parseProperty()
	if err != nil {
		return nil, err
	}
	if target.sys {
		sp, ok := systemProperties[strings.ToLower(target.name)]
		if !ok {
			return nil, errorAt(p.lex.src, target.pos, "unknown system property %q", target.name)
		}
		if !sp.settable {
			return nil, errorAt(p.lex.src, target.pos, "system property %s cannot be changed by a rule action", sp.name)
		}
	}
	s.target = target
	if s.remove {
		return s, nil
	}
	if err := p.expect(tEq); err != nil {
		return nil, err
	}
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	s.expr = x
	return s, nil
}

func (a *Action) compile() {
	c := &compiler{params: a.params, newID: a.newID}
	if c.newID == nil {
		c.newID = randomUUID
	}
	a.exprs = make([]evalFn, len(a.stmts))
	for i, s := range a.stmts {
		if s.expr != nil {
			a.exprs[i] = c.compile(s.expr)
		}
	}
}

// WithParameters returns a copy of a whose @name parameters take their
// values from p, as SQLFilter.WithParameters.
func (a *Action) WithParameters(p map[string]any) *Action {
	b := &Action{text: a.text, stmts: a.stmts, params: normalizeParams(p), newID: a.newID}
	b.compile()
	return b
}

// WithNewID returns a copy of a whose newid() calls take their values from
// gen instead of crypto/rand.
func (a *Action) WithNewID(gen func() [16]byte) *Action {
	b := &Action{text: a.text, stmts: a.stmts, params: a.params, newID: gen}
	b.compile()
	return b
}

// Parameters returns the names (without '@') of the parameters the action
// uses, in order of first appearance.
func (a *Action) Parameters() []string {
	var roots []node
	for _, s := range a.stmts {
		if s.expr != nil {
			roots = append(roots, s.expr)
		}
	}
	return paramNames(roots...)
}

// Apply runs the statements in order; each sees the effects of those
// before it. SET on an existing application property converts the new
// value to the property's current numeric type when that loses nothing;
// SET on a string system property converts the value to its text. A NULL
// value sets the property to nil. Apply stops at the first failing
// statement with an *EvalError; the statements before it stay applied, so a
// caller that needs all-or-nothing applies the action to a copy.
func (a *Action) Apply(m MutableMessage) error {
	for i, s := range a.stmts {
		if s.remove {
			if err := a.remove(m, s); err != nil {
				return err
			}
			continue
		}
		v, err := a.exprs[i](m)
		if err != nil {
			return err
		}
		if err := a.set(m, s, v); err != nil {
			return err
		}
	}
	return nil
}

func (a *Action) remove(m MutableMessage, s *statement) error {
	if !s.target.sys {
		m.DeleteUserProperty(s.target.name)
		return nil
	}
	if err := m.SetSystemProperty(s.target.name, nil); err != nil {
		return &EvalError{Expr: s.render(), Msg: err.Error()}
	}
	return nil
}

func (a *Action) set(m MutableMessage, s *statement, v value) error {
	name := s.target.name
	if !s.target.sys {
		if v.k == kNull {
			m.SetUserProperty(name, nil)
			return nil
		}
		if v.k == kOther {
			return &EvalError{Expr: s.render(), Msg: fmt.Sprintf("cannot store a value of type %T", v.x)}
		}
		if old, ok := m.UserProperty(name); ok && old != nil {
			m.SetUserProperty(name, convertLike(v, old))
			return nil
		}
		m.SetUserProperty(name, v.toAny())
		return nil
	}
	var out any
	if v.k != kNull {
		switch systemProperties[strings.ToLower(name)].typ {
		case kString:
			text, err := v.toText()
			if err != nil {
				return &EvalError{Expr: s.render(), Msg: err.Error()}
			}
			out = text
		case kDuration:
			if v.k != kDuration {
				return &EvalError{Expr: s.render(), Msg: fmt.Sprintf("sys.%s needs a TimeSpan, found %s", name, v.k.a())}
			}
			out = time.Duration(v.i)
		case kTime:
			if v.k != kTime {
				return &EvalError{Expr: s.render(), Msg: fmt.Sprintf("sys.%s needs a DateTime, found %s", name, v.k.a())}
			}
			out = v.x
		}
	}
	if err := m.SetSystemProperty(name, out); err != nil {
		return &EvalError{Expr: s.render(), Msg: err.Error()}
	}
	return nil
}

// convertLike converts v to the Go numeric type of old when both are
// numbers and the conversion is exact; otherwise v keeps its own type.
func convertLike(v value, old any) any {
	if !v.isNumeric() {
		return v.toAny()
	}
	// The exact integer view of v: sign and magnitude, when v is integral.
	var mag uint64
	neg, integral := false, false
	switch v.k {
	case kInt32, kInt64:
		integral, neg = true, v.i < 0
		mag = uint64(v.i)
		if neg {
			mag = -mag
		}
	case kUint32, kUint64:
		integral, mag = true, uint64(v.i)
	default:
		if a := math.Abs(v.f); v.f == math.Trunc(v.f) && a < 1<<64 {
			integral, neg, mag = true, v.f < 0, uint64(a)
		}
	}
	signed := func(bits uint) (int64, bool) {
		limit := uint64(1) << (bits - 1)
		if !integral || !neg && mag >= limit || neg && mag > limit {
			return 0, false
		}
		if neg {
			return int64(-mag), true
		}
		return int64(mag), true
	}
	unsigned := func(bits uint) (uint64, bool) {
		ok := integral && (!neg || mag == 0) && (bits == 64 || mag < 1<<bits)
		return mag, ok
	}
	isFloat := v.k == kFloat32 || v.k == kFloat64
	switch old.(type) {
	case int8:
		if i, ok := signed(8); ok {
			return int8(i)
		}
	case int16:
		if i, ok := signed(16); ok {
			return int16(i)
		}
	case int32:
		if i, ok := signed(32); ok {
			return int32(i)
		}
	case int64:
		if i, ok := signed(64); ok {
			return i
		}
	case int:
		if i, ok := signed(strconv.IntSize); ok {
			return int(i)
		}
	case uint8:
		if u, ok := unsigned(8); ok {
			return uint8(u)
		}
	case uint16:
		if u, ok := unsigned(16); ok {
			return uint16(u)
		}
	case uint32:
		if u, ok := unsigned(32); ok {
			return uint32(u)
		}
	case uint64:
		if u, ok := unsigned(64); ok {
			return u
		}
	case uint:
		if u, ok := unsigned(strconv.IntSize); ok {
			return uint(u)
		}
	case float64:
		if isFloat || mag <= 1<<53 {
			return v.asFloat()
		}
	case float32:
		f := v.asFloat()
		if isFloat && (float64(float32(f)) == f || math.IsNaN(f)) || !isFloat && mag <= 1<<24 {
			return float32(f)
		}
	}
	return v.toAny()
}

// render returns the normalized text of the statement.
func (s *statement) render() string {
	var b strings.Builder
	s.write(&b)
	return b.String()
}

func (s *statement) write(b *strings.Builder) {
	if s.remove {
		b.WriteString("REMOVE ")
		s.target.write(b)
		return
	}
	b.WriteString("SET ")
	s.target.write(b)
	b.WriteString(" = ")
	s.expr.write(b)
}

// String renders the action as normalized SQL: one statement after another,
// separated by "; ".
func (a *Action) String() string {
	var b strings.Builder
	for i, s := range a.stmts {
		if i > 0 {
			b.WriteString("; ")
		}
		s.write(&b)
	}
	return b.String()
}

// Text returns the action exactly as it was given to ParseAction.
func (a *Action) Text() string { return a.text }
