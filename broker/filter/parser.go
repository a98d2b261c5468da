package filter

import (
	"math"
	"strconv"
	"strings"
)

// parser is a recursive-descent parser over a lexer with two tokens of
// lookahead. Precedence, loosest first: OR, AND, NOT, comparison (= <> != <
// <= > >= [NOT] LIKE, [NOT] IN, IS [NOT] NULL), + -, * / %, unary + -.
type parser struct {
	lex   lexer
	tok   token // current token
	ahead []token
	depth int
}

func newParser(src string) (*parser, error) {
	p := &parser{lex: lexer{src: src}}
	if len(src) > MaxExpressionLength {
		// Count characters only when the bytes exceed the limit.
		n := 0
		for i := range src {
			if n == MaxExpressionLength {
				return nil, errorAt(src, i, "expression is longer than %d characters", MaxExpressionLength)
			}
			n++
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return p, nil
}

// advance moves to the next token.
func (p *parser) advance() error {
	if len(p.ahead) > 0 {
		p.tok = p.ahead[0]
		p.ahead = p.ahead[1:]
		return nil
	}
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// peek returns the token after the current one.
func (p *parser) peek() (token, error) {
	if len(p.ahead) == 0 {
		t, err := p.lex.next()
		if err != nil {
			return token{}, err
		}
		p.ahead = append(p.ahead, t)
	}
	return p.ahead[0], nil
}

// errorf reports an error at the current token.
func (p *parser) errorf(format string, args ...any) error {
	return errorAt(p.lex.src, p.tok.pos, format, args...)
}

// expected reports that what was expected but the current token was found.
func (p *parser) expected(what string) error {
	return p.errorf("expected %s, found %s", what, p.tok.describe())
}

// expect consumes a token of kind k or fails.
func (p *parser) expect(k tokKind) error {
	if p.tok.kind != k {
		return p.expected("'" + punctText[k] + "'")
	}
	return p.advance()
}

// enter counts one level of nesting and fails beyond MaxNesting.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxNesting {
		return p.errorf("expression nests deeper than %d levels", MaxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseFilter parses a complete SQL filter.
func parseFilter(src string) (node, error) {
	p, err := newParser(src)
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.expected("a predicate")
	}
	n, err := p.parsePredicate()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.expected("an operator or end of expression")
	}
	return n, nil
}

// parsePredicate parses an expression that must yield a boolean.
func (p *parser) parsePredicate() (node, error) {
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	return n, checkPredicate(p.lex.src, n)
}

// isPredicate reports whether n yields a boolean (or may, for references).
func isPredicate(n node) bool {
	switch t := n.(type) {
	case *binaryNode:
		return t.prec() == precCompare || t.op == tEOF
	case *notNode, *isNullNode, *inNode, *likeNode, *existsNode, *propNode, *paramNode:
		return true
	case *literalNode:
		return t.v.k == kBool || t.v.k == kNull
	case *callNode:
		return t.name == "property"
	}
	return false
}

// isValue reports whether n can be an operand of arithmetic or comparison.
func isValue(n node) bool {
	switch t := n.(type) {
	case *binaryNode:
		return t.op != tEOF && t.prec() != precCompare
	case *notNode, *isNullNode, *inNode, *likeNode, *existsNode:
		return false
	}
	return true
}

func checkPredicate(src string, n node) error {
	if !isPredicate(n) {
		return errorAt(src, n.position(), "expected a predicate, found the value expression %s", render(n))
	}
	return nil
}

func checkValue(src string, n node) error {
	if !isValue(n) {
		return errorAt(src, n.position(), "expected a value expression, found the predicate %s", render(n))
	}
	return nil
}

// rightOperand consumes a binary operator, parses its right operand with
// next and checks that both operands are of the kind the operator takes
// (checkPredicate or checkValue).
func (p *parser) rightOperand(l node, next func() (node, error), check func(string, node) error) (node, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	r, err := next()
	if err != nil {
		return nil, err
	}
	if err := check(p.lex.src, l); err != nil {
		return nil, err
	}
	if err := check(p.lex.src, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (p *parser) parseOr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.tok.isKeyword("OR") {
		r, err := p.rightOperand(l, p.parseAnd, checkPredicate)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{logic: "OR", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (node, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.tok.isKeyword("AND") {
		r, err := p.rightOperand(l, p.parseNot, checkPredicate)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{logic: "AND", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (node, error) {
	if !p.tok.isKeyword("NOT") {
		return p.parseComparison()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	if err := checkPredicate(p.lex.src, x); err != nil {
		return nil, err
	}
	return &notNode{pos: pos, x: x}, nil
}

var compareOps = map[tokKind]bool{tEq: true, tNe: true, tLt: true, tLe: true, tGt: true, tGe: true}

func (p *parser) parseComparison() (node, error) {
	l, err := p.parseAdditive()
	if err != nil {
		return nil, err
	}
	src := p.lex.src
	switch {
	case compareOps[p.tok.kind]:
		op := p.tok.kind
		r, err := p.rightOperand(l, p.parseAdditive, checkValue)
		if err != nil {
			return nil, err
		}
		return &binaryNode{op: op, l: l, r: r}, nil
	case p.tok.isKeyword("IS"):
		if err := checkValue(src, l); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		n := &isNullNode{x: l}
		if p.tok.isKeyword("NOT") {
			n.not = true
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		if !p.tok.isKeyword("NULL") {
			return nil, p.expected("NULL")
		}
		return n, p.advance()
	case p.tok.isKeyword("NOT"), p.tok.isKeyword("IN"), p.tok.isKeyword("LIKE"):
		if err := checkValue(src, l); err != nil {
			return nil, err
		}
		not := false
		if p.tok.isKeyword("NOT") {
			not = true
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		switch {
		case p.tok.isKeyword("IN"):
			if err := p.advance(); err != nil {
				return nil, err
			}
			list, err := p.parseInList()
			if err != nil {
				return nil, err
			}
			return &inNode{x: l, not: not, list: list}, nil
		case p.tok.isKeyword("LIKE"):
			if err := p.advance(); err != nil {
				return nil, err
			}
			return p.parseLikeRest(l, not)
		}
		return nil, p.expected("IN or LIKE after NOT")
	}
	return l, nil
}

func (p *parser) parseInList() ([]node, error) {
	if err := p.expect(tLParen); err != nil {
		return nil, err
	}
	var list []node
	for {
		e, err := p.parseAdditive()
		if err != nil {
			return nil, err
		}
		if err := checkValue(p.lex.src, e); err != nil {
			return nil, err
		}
		list = append(list, e)
		if p.tok.kind == tComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind != tRParen {
			return nil, p.expected("',' or ')' in the IN list")
		}
		return list, p.advance()
	}
}

func (p *parser) parseLikeRest(x node, not bool) (node, error) {
	pat, err := p.parseAdditive()
	if err != nil {
		return nil, err
	}
	if err := checkValue(p.lex.src, pat); err != nil {
		return nil, err
	}
	n := &likeNode{x: x, not: not, pattern: pat}
	if p.tok.isKeyword("ESCAPE") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		esc, err := p.parseAdditive()
		if err != nil {
			return nil, err
		}
		if err := checkValue(p.lex.src, esc); err != nil {
			return nil, err
		}
		n.escape = esc
	}
	if err := checkConstantLike(p.lex.src, n); err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) parseAdditive() (node, error) {
	l, err := p.parseMultiplicative()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tPlus || p.tok.kind == tMinus {
		op := p.tok.kind
		r, err := p.rightOperand(l, p.parseMultiplicative, checkValue)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseMultiplicative() (node, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tStar || p.tok.kind == tSlash || p.tok.kind == tPercent {
		op := p.tok.kind
		r, err := p.rightOperand(l, p.parseUnary, checkValue)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseUnary() (node, error) {
	if p.tok.kind != tPlus && p.tok.kind != tMinus {
		return p.parsePrimary()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	op, pos := p.tok.kind, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if op == tMinus && (p.tok.kind == tInt || p.tok.kind == tFloat) {
		// Fold the sign into the literal so that -9223372036854775808 is
		// representable.
		lit, err := p.number(pos, "-"+p.tok.text)
		if err != nil {
			return nil, err
		}
		return lit, p.advance()
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	if err := checkValue(p.lex.src, x); err != nil {
		return nil, err
	}
	// A negated numeric literal is itself a literal, so that the text it
	// renders as ("-5") parses back to the same tree.
	if lit, ok := x.(*literalNode); ok && op == tMinus {
		switch {
		case lit.v.k == kInt64 && lit.v.i != math.MinInt64:
			return &literalNode{pos: pos, v: value{k: kInt64, i: -lit.v.i}}, nil
		case lit.v.k == kFloat64:
			return &literalNode{pos: pos, v: value{k: kFloat64, f: -lit.v.f}}, nil
		}
	}
	return &unaryNode{pos: pos, op: op, x: x}, nil
}

// number converts the current numeric token (with an optional sign folded
// into text) to a literal: integers are long, the others double.
func (p *parser) number(pos int, text string) (node, error) {
	if p.tok.kind == tInt {
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, errorAt(p.lex.src, pos, "integer %s is out of the range of a long", text)
		}
		return &literalNode{pos: pos, v: value{k: kInt64, i: i}}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, errorAt(p.lex.src, pos, "number %s is out of the range of a double", text)
	}
	return &literalNode{pos: pos, v: value{k: kFloat64, f: f}}, nil
}

func (p *parser) parsePrimary() (node, error) {
	t := p.tok
	switch t.kind {
	case tInt, tFloat:
		lit, err := p.number(t.pos, t.text)
		if err != nil {
			return nil, err
		}
		return lit, p.advance()
	case tString:
		return &literalNode{pos: t.pos, v: value{k: kString, s: t.text}}, p.advance()
	case tParam:
		return &paramNode{pos: t.pos, name: t.text}, p.advance()
	case tLParen:
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		return n, p.expect(tRParen)
	case tDelimIdent:
		return p.parseProperty()
	case tIdent:
		switch strings.ToUpper(t.text) {
		case "TRUE":
			return &literalNode{pos: t.pos, v: boolValue(true)}, p.advance()
		case "FALSE":
			return &literalNode{pos: t.pos, v: boolValue(false)}, p.advance()
		case "NULL":
			return &literalNode{pos: t.pos, v: nullValue}, p.advance()
		case "EXISTS":
			return p.parseExists()
		}
		if keywords[strings.ToUpper(t.text)] {
			return nil, p.expected("an expression")
		}
		next, err := p.peek()
		if err != nil {
			return nil, err
		}
		if next.kind == tLParen {
			return p.parseCall()
		}
		return p.parseProperty()
	}
	return nil, p.expected("an expression")
}

func (p *parser) parseExists() (node, error) {
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tLParen); err != nil {
		return nil, err
	}
	if p.tok.kind != tIdent && p.tok.kind != tDelimIdent {
		return nil, p.expected("a property name")
	}
	prop, err := p.parseProperty()
	if err != nil {
		return nil, err
	}
	if err := p.expect(tRParen); err != nil {
		return nil, err
	}
	return &existsNode{pos: pos, prop: prop}, nil
}

func (p *parser) parseCall() (node, error) {
	t := p.tok
	var name string
	var arity int
	switch strings.ToLower(t.text) {
	case "newid":
		name, arity = "newid", 0
	case "property", "p":
		name, arity = "property", 1
	default:
		return nil, p.errorf("unknown function %s (expected newid or property)", t.text)
	}
	if err := p.advance(); err != nil { // name
		return nil, err
	}
	if err := p.advance(); err != nil { // (
		return nil, err
	}
	n := &callNode{pos: t.pos, name: name}
	for p.tok.kind != tRParen {
		if len(n.args) > 0 {
			if err := p.expect(tComma); err != nil {
				return nil, err
			}
		}
		a, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if err := checkValue(p.lex.src, a); err != nil {
			return nil, err
		}
		n.args = append(n.args, a)
	}
	if len(n.args) != arity {
		return nil, p.errorf("function %s takes %d argument(s), found %d", name, arity, len(n.args))
	}
	return n, p.advance()
}

// parseProperty parses [sys. | user.] name.
func (p *parser) parseProperty() (*propNode, error) {
	t := p.tok
	if t.kind == tIdent && keywords[strings.ToUpper(t.text)] {
		return nil, p.expected("a property name")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tDot {
		return &propNode{pos: t.pos, name: t.text}, nil
	}
	scope := strings.ToLower(t.text)
	if t.kind != tIdent || scope != "sys" && scope != "user" {
		return nil, errorAt(p.lex.src, t.pos, "unknown property scope %q (expected sys or user)", t.text)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	nt := p.tok
	if nt.kind != tDelimIdent && (nt.kind != tIdent || keywords[strings.ToUpper(nt.text)]) {
		return nil, p.expected("a property name after " + scope + ".")
	}
	n := &propNode{pos: t.pos, name: nt.text, quals: true, sys: scope == "sys"}
	if n.sys {
		if c, ok := CanonicalSystemProperty(nt.text); ok {
			n.name = c
		}
	}
	return n, p.advance()
}
