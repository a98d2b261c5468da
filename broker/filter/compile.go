package filter

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"strings"
	"time"
)

// MaxStringLength is the longest string concatenation may produce, in
// bytes: Service Bus limits a message's headers and properties to 64 KB, and
// the cap keeps actions such as "SET a = a + a" repeated from doubling a
// string into gigabytes.
const MaxStringLength = 64 << 10

// evalFn evaluates a compiled expression against a message.
type evalFn func(m Message) (value, error)

// compiler turns an AST into a tree of closures. Parameters are bound at
// compile time, so evaluation never looks them up.
type compiler struct {
	params map[string]any // normalized by normalizeParams; nil when unbound
	newID  func() [16]byte
}

// normalizeParams keys parameters by lower-case name without '@'.
func normalizeParams(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[strings.ToLower(strings.TrimPrefix(k, "@"))] = v
	}
	return out
}

// randomUUID returns a random (version 4) uuid.
func randomUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// evalErr builds an *EvalError for node n.
func evalErr(n node, format string, args ...any) error {
	return &EvalError{Expr: render(n), Msg: fmt.Sprintf(format, args...)}
}

// compilePredicate compiles a filter's root: the result is a bool or NULL.
func compilePredicate(root node, params map[string]any, newID func() [16]byte) evalFn {
	c := &compiler{params: params, newID: newID}
	if c.newID == nil {
		c.newID = randomUUID
	}
	f := c.compile(root)
	return func(m Message) (value, error) {
		v, err := f(m)
		if err != nil {
			return nullValue, err
		}
		if v.k != kBool && v.k != kNull {
			return nullValue, evalErr(root, "filter evaluates to %s, not a boolean", v.k.a())
		}
		return v, nil
	}
}

func (c *compiler) compile(n node) evalFn {
	switch t := n.(type) {
	case *literalNode:
		v := t.v
		return func(Message) (value, error) { return v, nil }
	case *propNode:
		return c.compileProp(t)
	case *paramNode:
		return c.compileParam(t)
	case *unaryNode:
		return c.compileUnary(t)
	case *notNode:
		x := c.compile(t.x)
		return func(m Message) (value, error) {
			v, err := x(m)
			if err != nil || v.k == kNull {
				return nullValue, err
			}
			if v.k != kBool {
				return nullValue, evalErr(t.x, "NOT needs a boolean, found %s", v.k.a())
			}
			return boolValue(v.i == 0), nil
		}
	case *binaryNode:
		switch {
		case t.op == tEOF:
			return c.compileLogic(t)
		case t.prec() == precCompare:
			return c.compileCompare(t)
		}
		return c.compileArith(t)
	case *isNullNode:
		x := c.compile(t.x)
		not := t.not
		return func(m Message) (value, error) {
			v, err := x(m)
			if err != nil {
				return nullValue, err
			}
			return boolValue((v.k == kNull) != not), nil
		}
	case *inNode:
		return c.compileIn(t)
	case *likeNode:
		return c.compileLike(t)
	case *existsNode:
		return c.compileExists(t)
	case *callNode:
		return c.compileCall(t)
	}
	panic(fmt.Sprintf("filter: unknown node %T", n))
}

// lookupSys reads a system property; a name the message does not know and
// that is not a known system property is an error, a known one that is
// missing is NULL.
func lookupSys(m Message, n node, name string) (value, error) {
	a, ok := m.SystemProperty(name)
	if !ok {
		if _, known := systemProperties[strings.ToLower(name)]; known {
			return nullValue, nil
		}
		return nullValue, evalErr(n, "system property %q does not exist", name)
	}
	return fromAny(a), nil
}

func (c *compiler) compileProp(t *propNode) evalFn {
	name := t.name
	if t.sys {
		return func(m Message) (value, error) { return lookupSys(m, t, name) }
	}
	return func(m Message) (value, error) {
		a, ok := m.UserProperty(name)
		if !ok {
			return nullValue, nil
		}
		return fromAny(a), nil
	}
}

func (c *compiler) compileParam(t *paramNode) evalFn {
	a, ok := c.params[strings.ToLower(t.name)]
	if !ok {
		return func(Message) (value, error) {
			return nullValue, evalErr(t, "parameter @%s has no value", t.name)
		}
	}
	v := fromAny(a)
	if v.k == kOther {
		return func(Message) (value, error) {
			return nullValue, evalErr(t, "parameter @%s has unsupported type %T", t.name, a)
		}
	}
	return func(Message) (value, error) { return v, nil }
}

func (c *compiler) compileUnary(t *unaryNode) evalFn {
	x := c.compile(t.x)
	neg := t.op == tMinus
	return func(m Message) (value, error) {
		v, err := x(m)
		if err != nil || v.k == kNull {
			return nullValue, err
		}
		v.x = nil // a new value: SET stores it with its own type
		switch v.k {
		case kInt32:
			if neg {
				v.i = int64(-int32(v.i))
			}
		case kInt64, kDuration:
			if neg {
				v.i = -v.i
			}
		case kUint32:
			if neg { // C# widens -uint to long
				v = value{k: kInt64, i: -v.i}
			}
		case kUint64:
			if neg {
				if u := uint64(v.i); u <= 1<<63 {
					v = value{k: kInt64, i: -int64(u)}
				} else {
					v = value{k: kFloat64, f: -float64(u)}
				}
			}
		case kFloat32, kFloat64:
			if neg {
				v.f = -v.f
			}
		default:
			return nullValue, evalErr(t, "unary %s cannot be applied to %s", punctText[t.op], v.k.a())
		}
		return v, nil
	}
}

// truth reads a boolean operand: 1 true, 0 false, -1 unknown.
func truth(n node, v value) (int, error) {
	switch v.k {
	case kNull:
		return -1, nil
	case kBool:
		return int(v.i), nil
	}
	return 0, evalErr(n, "expected a boolean, found %s", v.k.a())
}

func (c *compiler) compileLogic(t *binaryNode) evalFn {
	l, r := c.compile(t.l), c.compile(t.r)
	isAnd := t.logic == "AND"
	// dominant is the value that decides the result on its own: FALSE for
	// AND, TRUE for OR.
	dominant := 1
	if isAnd {
		dominant = 0
	}
	return func(m Message) (value, error) {
		lv, err := l(m)
		if err != nil {
			return nullValue, err
		}
		a, err := truth(t.l, lv)
		if err != nil {
			return nullValue, err
		}
		if a == dominant {
			return boolValue(a == 1), nil
		}
		rv, err := r(m)
		if err != nil {
			return nullValue, err
		}
		b, err := truth(t.r, rv)
		if err != nil {
			return nullValue, err
		}
		switch {
		case b == dominant:
			return boolValue(b == 1), nil
		case a < 0 || b < 0:
			return nullValue, nil
		}
		return boolValue(a == 1), nil
	}
}

func (c *compiler) compileCompare(t *binaryNode) evalFn {
	if cv, ok := c.constant(t.r); ok {
		// The usual shape, "property op constant", reads the property
		// without a nested closure call.
		if p, isProp := t.l.(*propNode); isProp && !p.sys {
			name := p.name
			return func(m Message) (value, error) {
				a, found := m.UserProperty(name)
				if !found {
					return nullValue, nil
				}
				return compareOp(t, fromAnyNoOrig(a), cv)
			}
		}
		l := c.compile(t.l)
		return func(m Message) (value, error) {
			a, err := l(m)
			if err != nil {
				return nullValue, err
			}
			return compareOp(t, a, cv)
		}
	}
	l, r := c.compile(t.l), c.compile(t.r)
	return func(m Message) (value, error) {
		a, err := l(m)
		if err != nil {
			return nullValue, err
		}
		b, err := r(m)
		if err != nil {
			return nullValue, err
		}
		return compareOp(t, a, b)
	}
}

// compareOp applies the comparison operator of t to evaluated operands.
func compareOp(t *binaryNode, a, b value) (value, error) {
	if a.k == kNull || b.k == kNull {
		return nullValue, nil
	}
	op := t.op
	if op == tEq || op == tNe {
		var eq bool
		if a.k == kString && b.k == kString { // the common case, inline
			eq = a.s == b.s
		} else {
			eq, _ = equalValues(a, b)
		}
		return boolValue(eq == (op == tEq)), nil
	}
	var order int
	if (a.k == kInt32 || a.k == kInt64) && (b.k == kInt32 || b.k == kInt64) {
		order = cmp.Compare(a.i, b.i)
	} else {
		c, ok, err := orderValues(a, b)
		if err != nil {
			return nullValue, evalErr(t, "operator %s %s", punctText[op], err)
		}
		if !ok { // NaN is unordered: every ordering is false
			return boolValue(false), nil
		}
		order = c
	}
	switch op {
	case tLt:
		return boolValue(order < 0), nil
	case tLe:
		return boolValue(order <= 0), nil
	case tGt:
		return boolValue(order > 0), nil
	}
	return boolValue(order >= 0), nil
}

func (c *compiler) compileArith(t *binaryNode) evalFn {
	l, r := c.compile(t.l), c.compile(t.r)
	op := t.op
	return func(m Message) (value, error) {
		a, err := l(m)
		if err != nil {
			return nullValue, err
		}
		b, err := r(m)
		if err != nil {
			return nullValue, err
		}
		if a.k == kNull || b.k == kNull {
			return nullValue, nil
		}
		v, err := arithValues(op, a, b)
		if err != nil {
			return nullValue, evalErr(t, "%s", err)
		}
		return v, nil
	}
}

// arithValues applies an arithmetic operator to two non-null values:
// numbers, string concatenation with +, and DateTime/TimeSpan arithmetic.
func arithValues(op tokKind, a, b value) (value, error) {
	switch {
	case a.isNumeric() && b.isNumeric():
		return arith(op, a, b)
	case op == tPlus && (a.k == kString || b.k == kString):
		x, err := a.toText()
		if err != nil {
			return nullValue, err
		}
		y, err := b.toText()
		if err != nil {
			return nullValue, err
		}
		if len(x)+len(y) > MaxStringLength {
			return nullValue, fmt.Errorf("string concatenation result is longer than %d bytes", MaxStringLength)
		}
		return value{k: kString, s: x + y}, nil
	case a.k == kDuration && b.k == kDuration && (op == tPlus || op == tMinus):
		if op == tMinus {
			return value{k: kDuration, i: a.i - b.i}, nil
		}
		return value{k: kDuration, i: a.i + b.i}, nil
	case a.k == kTime && b.k == kDuration && (op == tPlus || op == tMinus):
		d := time.Duration(b.i)
		if op == tMinus {
			d = -d
		}
		return value{k: kTime, x: a.x.(time.Time).Add(d)}, nil
	case a.k == kDuration && b.k == kTime && op == tPlus:
		return value{k: kTime, x: b.x.(time.Time).Add(time.Duration(a.i))}, nil
	case a.k == kTime && b.k == kTime && op == tMinus:
		return value{k: kDuration, i: int64(a.x.(time.Time).Sub(b.x.(time.Time)))}, nil
	}
	return nullValue, fmt.Errorf("operator %s cannot be applied to %s and %s", punctText[op], a.k.a(), b.k.a())
}

func (c *compiler) compileIn(t *inNode) evalFn {
	x := c.compile(t.x)
	not := t.not
	// A list of constants (the usual case) is evaluated once.
	consts := make([]value, 0, len(t.list))
	items := make([]evalFn, len(t.list))
	for i, e := range t.list {
		items[i] = c.compile(e)
		if consts != nil {
			if v, ok := c.constant(e); ok {
				consts = append(consts, v)
				continue
			}
			consts = nil
		}
	}
	// A long list of constant strings is looked up in a set.
	var set map[string]bool
	if len(consts) >= 8 {
		set = make(map[string]bool, len(consts))
		for _, e := range consts {
			if e.k != kString {
				set = nil
				break
			}
			set[e.s] = true
		}
	}
	return func(m Message) (value, error) {
		v, err := x(m)
		if err != nil || v.k == kNull {
			return nullValue, err
		}
		if set != nil && v.k == kString {
			return boolValue(set[v.s] != not), nil
		}
		if consts != nil {
			for _, e := range consts {
				if eq, _ := equalValues(v, e); eq {
					return boolValue(!not), nil
				}
			}
			return boolValue(not), nil
		}
		for _, f := range items {
			e, err := f(m)
			if err != nil {
				return nullValue, err
			}
			if e.k == kNull {
				continue
			}
			if eq, _ := equalValues(v, e); eq {
				return boolValue(!not), nil
			}
		}
		return boolValue(not), nil
	}
}

// constant returns the value of a literal or bound parameter.
func (c *compiler) constant(n node) (value, bool) {
	switch t := n.(type) {
	case *literalNode:
		return t.v, true
	case *paramNode:
		a, ok := c.params[strings.ToLower(t.name)]
		if !ok {
			return nullValue, false
		}
		if v := fromAny(a); v.k != kOther {
			return v, true
		}
	}
	return nullValue, false
}

func (c *compiler) compileLike(t *likeNode) evalFn {
	x := c.compile(t.x)
	not := t.not
	if pat, ok, err := c.constantPattern(t); ok {
		if err != nil {
			e := evalErr(t, "%s", err)
			return func(Message) (value, error) { return nullValue, e }
		}
		return func(m Message) (value, error) {
			v, err := x(m)
			if err != nil || v.k == kNull {
				return nullValue, err
			}
			if v.k != kString {
				return nullValue, evalErr(t, "LIKE needs a string, found %s", v.k.a())
			}
			return boolValue(pat.match(v.s) != not), nil
		}
	}
	// The pattern or escape depends on the message: compile per evaluation.
	pf := c.compile(t.pattern)
	var ef evalFn
	if t.escape != nil {
		ef = c.compile(t.escape)
	}
	return func(m Message) (value, error) {
		v, err := x(m)
		if err != nil {
			return nullValue, err
		}
		pv, err := pf(m)
		if err != nil {
			return nullValue, err
		}
		var esc rune
		if ef != nil {
			ev, err := ef(m)
			if err != nil {
				return nullValue, err
			}
			if ev.k == kNull {
				return nullValue, nil
			}
			if ev.k != kString {
				return nullValue, evalErr(t, "%s", errLikeEscapeLength)
			}
			if esc, err = escapeRune(ev.s); err != nil {
				return nullValue, evalErr(t, "%s", err)
			}
		}
		if v.k == kNull || pv.k == kNull {
			return nullValue, nil
		}
		if v.k != kString || pv.k != kString {
			return nullValue, evalErr(t, "LIKE needs strings, found %s and %s", v.k.a(), pv.k.a())
		}
		pat, err := compileLike(pv.s, esc, ef != nil)
		if err != nil {
			return nullValue, evalErr(t, "%s", err)
		}
		return boolValue(pat.match(v.s) != not), nil
	}
}

// constantPattern compiles t's pattern once when it and its escape are
// constant strings; ok is false when they are not.
func (c *compiler) constantPattern(t *likeNode) (pat likePattern, ok bool, err error) {
	pv, isConst := c.constant(t.pattern)
	if !isConst || pv.k != kString {
		return nil, false, nil
	}
	if t.escape == nil {
		pat, err = compileLike(pv.s, 0, false)
		return pat, true, err
	}
	ev, isConst := c.constant(t.escape)
	if !isConst || ev.k != kString {
		return nil, false, nil
	}
	esc, err := escapeRune(ev.s)
	if err != nil {
		return nil, true, err
	}
	pat, err = compileLike(pv.s, esc, true)
	return pat, true, err
}

// checkConstantLike rejects, at parse time, constant LIKE patterns and
// escapes that can never be valid.
func checkConstantLike(src string, n *likeNode) error {
	pl, ok := n.pattern.(*literalNode)
	if !ok {
		return nil
	}
	if pl.v.k != kString && pl.v.k != kNull {
		return errorAt(src, pl.pos, "LIKE pattern must be a string, found %s", render(pl))
	}
	var esc rune
	if n.escape != nil {
		el, ok := n.escape.(*literalNode)
		if !ok {
			return nil
		}
		if el.v.k == kNull {
			return nil
		}
		var err error
		if el.v.k != kString {
			err = errLikeEscapeLength
		} else {
			esc, err = escapeRune(el.v.s)
		}
		if err != nil {
			return errorAt(src, el.pos, "%s", err)
		}
	}
	if pl.v.k == kString {
		if _, err := compileLike(pl.v.s, esc, n.escape != nil); err != nil {
			return errorAt(src, pl.pos, "%s", err)
		}
	}
	return nil
}

func (c *compiler) compileExists(t *existsNode) evalFn {
	name, sys := t.prop.name, t.prop.sys
	return func(m Message) (value, error) {
		if sys {
			a, ok := m.SystemProperty(name)
			return boolValue(ok && a != nil), nil
		}
		_, ok := m.UserProperty(name)
		return boolValue(ok), nil
	}
}

func (c *compiler) compileCall(t *callNode) evalFn {
	if t.name == "newid" {
		gen := c.newID
		return func(Message) (value, error) { return value{k: kUUID, x: gen()}, nil }
	}
	arg := c.compile(t.args[0])
	return func(m Message) (value, error) {
		v, err := arg(m)
		if err != nil || v.k == kNull {
			return nullValue, err
		}
		if v.k != kString {
			return nullValue, evalErr(t, "property() needs a string name, found %s", v.k.a())
		}
		sys, name := splitScope(v.s)
		if sys {
			if canon, ok := CanonicalSystemProperty(name); ok {
				name = canon
			}
			return lookupSys(m, t, name)
		}
		a, ok := m.UserProperty(name)
		if !ok {
			return nullValue, nil
		}
		return fromAny(a), nil
	}
}

// splitScope splits "sys.Name" or "user.Name" (scope case-insensitive);
// anything else is a user property name.
func splitScope(s string) (sys bool, name string) {
	if i := strings.IndexByte(s, '.'); i > 0 {
		switch strings.ToLower(s[:i]) {
		case "sys":
			return true, s[i+1:]
		case "user":
			return false, s[i+1:]
		}
	}
	return false, s
}
