package filter

import (
	"math"
	"strconv"
	"strings"
)

// node is an expression of the abstract syntax tree. Every node knows its
// source offset and can render itself as normalized SQL.
type node interface {
	// position is the byte offset of the node's first token.
	position() int
	// prec is the binding strength used to decide on parentheses when
	// rendering; higher binds tighter.
	prec() int
	// write appends the normalized SQL text of the node.
	write(b *strings.Builder)
}

// Precedence levels, loosest first.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCompare // = <> < <= > >= LIKE IN IS
	precAdd     // + -
	precMul     // * / %
	precUnary   // unary + -
	precPrimary
)

// literalNode is a constant: number, string, TRUE, FALSE or NULL.
type literalNode struct {
	pos int
	v   value
}

// propNode is a property reference.
type propNode struct {
	pos   int
	sys   bool
	name  string // canonical name for known system properties
	quals bool   // written with an explicit scope
}

// paramNode is a @name parameter.
type paramNode struct {
	pos  int
	name string // without '@', as written
}

// unaryNode is unary + or -.
type unaryNode struct {
	pos int
	op  tokKind
	x   node
}

// notNode is logical NOT.
type notNode struct {
	pos int
	x   node
}

// binaryNode is a binary operator: arithmetic or comparison (op), or
// logical (op is tEOF and logic says which).
type binaryNode struct {
	op    tokKind
	logic string // "AND" or "OR" when op is tEOF
	l, r  node
}

// isNullNode is x IS [NOT] NULL.
type isNullNode struct {
	x   node
	not bool
}

// inNode is x [NOT] IN (list).
type inNode struct {
	x    node
	not  bool
	list []node
}

// likeNode is x [NOT] LIKE pattern [ESCAPE escape].
type likeNode struct {
	x       node
	not     bool
	pattern node
	escape  node // nil when absent
}

// existsNode is EXISTS(property).
type existsNode struct {
	pos  int
	prop *propNode
}

// callNode is a function call: newid() or property(name).
type callNode struct {
	pos  int
	name string // "newid" or "property"
	args []node
}

func (n *literalNode) position() int { return n.pos }
func (n *propNode) position() int    { return n.pos }
func (n *paramNode) position() int   { return n.pos }
func (n *unaryNode) position() int   { return n.pos }
func (n *notNode) position() int     { return n.pos }
func (n *binaryNode) position() int  { return n.l.position() }
func (n *isNullNode) position() int  { return n.x.position() }
func (n *inNode) position() int      { return n.x.position() }
func (n *likeNode) position() int    { return n.x.position() }
func (n *existsNode) position() int  { return n.pos }
func (n *callNode) position() int    { return n.pos }

func (n *literalNode) prec() int {
	if n.v.k == kInt64 && n.v.i < 0 || n.v.k == kFloat64 && math.Signbit(n.v.f) {
		return precUnary // a negative number renders with its sign
	}
	return precPrimary
}
func (n *propNode) prec() int   { return precPrimary }
func (n *paramNode) prec() int  { return precPrimary }
func (n *unaryNode) prec() int  { return precUnary }
func (n *notNode) prec() int    { return precNot }
func (n *isNullNode) prec() int { return precCompare }
func (n *inNode) prec() int     { return precCompare }
func (n *likeNode) prec() int   { return precCompare }
func (n *existsNode) prec() int { return precPrimary }
func (n *callNode) prec() int   { return precPrimary }
func (n *binaryNode) prec() int {
	switch n.op {
	case tEOF:
		if n.logic == "AND" {
			return precAnd
		}
		return precOr
	case tPlus, tMinus:
		return precAdd
	case tStar, tSlash, tPercent:
		return precMul
	}
	return precCompare
}

// render returns the normalized SQL text of n.
func render(n node) string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

// writeOperand writes x, parenthesized when it binds looser than min.
func writeOperand(b *strings.Builder, x node, min int) {
	if x.prec() < min {
		b.WriteByte('(')
		x.write(b)
		b.WriteByte(')')
		return
	}
	x.write(b)
}

func (n *literalNode) write(b *strings.Builder) { b.WriteString(literalText(n.v)) }

// literalText renders a constant as SQL.
func literalText(v value) string {
	switch v.k {
	case kNull:
		return "NULL"
	case kBool:
		if v.i != 0 {
			return "TRUE"
		}
		return "FALSE"
	case kString:
		return quoteString(v.s)
	case kInt64:
		return strconv.FormatInt(v.i, 10)
	case kFloat64:
		s := strconv.FormatFloat(v.f, 'G', -1, 64)
		if !strings.ContainsAny(s, ".E") {
			s += ".0"
		}
		return s
	}
	s, _ := v.toText()
	return quoteString(s)
}

// quoteString renders s as a SQL string literal.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// identText renders a property or parameter name, bracketing it when it is
// not a regular identifier.
func identText(name string) string {
	if isRegularIdent(name) {
		return name
	}
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
}

// isRegularIdent reports whether name lexes as one non-keyword identifier.
func isRegularIdent(name string) bool {
	if name == "" || keywords[strings.ToUpper(name)] {
		return false
	}
	for i, r := range name {
		if i == 0 && !isIdentStart(r) || !isIdentPart(r) {
			return false
		}
	}
	return true
}

func (n *propNode) write(b *strings.Builder) {
	if n.sys {
		b.WriteString("sys.")
	} else if n.quals || strings.EqualFold(n.name, "sys") || strings.EqualFold(n.name, "user") {
		b.WriteString("user.")
	}
	b.WriteString(identText(n.name))
}

func (n *paramNode) write(b *strings.Builder) {
	b.WriteByte('@')
	b.WriteString(n.name)
}

func (n *unaryNode) write(b *strings.Builder) {
	b.WriteString(punctText[n.op])
	// "- -1" must not render as "--1"; a space keeps signs apart.
	if n.x.prec() == precUnary {
		b.WriteByte(' ')
	}
	writeOperand(b, n.x, precUnary)
}

func (n *notNode) write(b *strings.Builder) {
	b.WriteString("NOT ")
	writeOperand(b, n.x, precNot)
}

func (n *binaryNode) write(b *strings.Builder) {
	p := n.prec()
	// Left-associative operators: the right operand needs parentheses at
	// equal precedence, the left one does not. Comparisons do not chain.
	leftMin, rightMin := p, p+1
	if p == precCompare {
		leftMin = precAdd
		rightMin = precAdd
	}
	writeOperand(b, n.l, leftMin)
	b.WriteByte(' ')
	if n.op == tEOF {
		b.WriteString(n.logic)
	} else {
		b.WriteString(punctText[n.op])
	}
	b.WriteByte(' ')
	writeOperand(b, n.r, rightMin)
}

func (n *isNullNode) write(b *strings.Builder) {
	writeOperand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" IS NOT NULL")
	} else {
		b.WriteString(" IS NULL")
	}
}

func (n *inNode) write(b *strings.Builder) {
	writeOperand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, e := range n.list {
		if i > 0 {
			b.WriteString(", ")
		}
		writeOperand(b, e, precAdd)
	}
	b.WriteByte(')')
}

func (n *likeNode) write(b *strings.Builder) {
	writeOperand(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" LIKE ")
	writeOperand(b, n.pattern, precAdd)
	if n.escape != nil {
		b.WriteString(" ESCAPE ")
		writeOperand(b, n.escape, precAdd)
	}
}

func (n *existsNode) write(b *strings.Builder) {
	b.WriteString("EXISTS(")
	n.prop.write(b)
	b.WriteByte(')')
}

func (n *callNode) write(b *strings.Builder) {
	b.WriteString(n.name)
	b.WriteByte('(')
	for i, a := range n.args {
		if i > 0 {
			b.WriteString(", ")
		}
		writeOperand(b, a, precOr)
	}
	b.WriteByte(')')
}

// children returns the direct sub-expressions of n.
func children(n node) []node {
	switch t := n.(type) {
	case *unaryNode:
		return []node{t.x}
	case *notNode:
		return []node{t.x}
	case *binaryNode:
		return []node{t.l, t.r}
	case *isNullNode:
		return []node{t.x}
	case *inNode:
		return append([]node{t.x}, t.list...)
	case *likeNode:
		if t.escape != nil {
			return []node{t.x, t.pattern, t.escape}
		}
		return []node{t.x, t.pattern}
	case *existsNode:
		return []node{t.prop}
	case *callNode:
		return t.args
	}
	return nil
}

// paramNames lists the parameters used in the trees, first appearance first,
// without duplicates (compared case-insensitively).
func paramNames(roots ...node) []string {
	var names []string
	seen := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		if p, ok := n.(*paramNode); ok {
			if k := strings.ToLower(p.name); !seen[k] {
				seen[k] = true
				names = append(names, p.name)
			}
		}
		for _, c := range children(n) {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return names
}
