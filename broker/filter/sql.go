package filter

// MaxExpressionLength is the longest filter or action text accepted, in
// characters, as in Service Bus.
const MaxExpressionLength = 1024

// MaxNesting is the deepest nesting of parentheses, NOT and unary signs
// accepted; deeper expressions are rejected with a *ParseError.
const MaxNesting = 128

// SQLFilter is a parsed Service Bus SQL filter, obtained from ParseSQL. It
// is immutable and safe for concurrent use.
type SQLFilter struct {
	text   string
	root   node
	params map[string]any
	newID  func() [16]byte
	eval   evalFn
}

// ParseSQL parses a SQL filter expression. Syntax errors are *ParseError.
// Parameters (@name) are unbound until WithParameters; evaluating an
// unbound one is an *EvalError.
func ParseSQL(expr string) (*SQLFilter, error) {
	root, err := parseFilter(expr)
	if err != nil {
		return nil, err
	}
	f := &SQLFilter{text: expr, root: root}
	f.eval = compilePredicate(root, nil, nil)
	return f, nil
}

// WithParameters returns a copy of f whose @name parameters take their values
// from p. Keys may be written with or without the leading '@' and match
// case-insensitively. Values have the Go types of property values.
func (f *SQLFilter) WithParameters(p map[string]any) *SQLFilter {
	g := &SQLFilter{text: f.text, root: f.root, params: normalizeParams(p), newID: f.newID}
	g.eval = compilePredicate(g.root, g.params, g.newID)
	return g
}

// WithNewID returns a copy of f whose newid() calls take their values from
// gen instead of crypto/rand (for deterministic tests).
func (f *SQLFilter) WithNewID(gen func() [16]byte) *SQLFilter {
	g := &SQLFilter{text: f.text, root: f.root, params: f.params, newID: gen}
	g.eval = compilePredicate(g.root, g.params, g.newID)
	return g
}

// Parameters returns the names (without '@') of the parameters the filter
// uses, in order of first appearance.
func (f *SQLFilter) Parameters() []string { return paramNames(f.root) }

// Match implements Filter: it reports whether the filter evaluates to TRUE
// for m. FALSE and unknown (NULL) do not match. Evaluation failures are
// returned as *EvalError.
func (f *SQLFilter) Match(m Message) (bool, error) {
	v, err := f.eval(m)
	if err != nil {
		return false, err
	}
	return v.k == kBool && v.i != 0, nil
}

// Eval evaluates the filter in three-valued logic: known is false when the
// result is unknown (NULL), in which case result is false.
func (f *SQLFilter) Eval(m Message) (result, known bool, err error) {
	v, err := f.eval(m)
	if err != nil {
		return false, false, err
	}
	return v.k == kBool && v.i != 0, v.k == kBool, nil
}

// String renders the filter as normalized SQL text: keywords in upper case,
// single spaces, only the parentheses that precedence needs. Parsing the
// result yields an equivalent filter.
func (f *SQLFilter) String() string { return render(f.root) }

// Text returns the expression exactly as it was given to ParseSQL.
func (f *SQLFilter) Text() string { return f.text }
