package filter

import "fmt"

// ParseError reports a syntax error in a filter or action expression.
type ParseError struct {
	// Pos is the byte offset of the offending token in the expression.
	Pos int
	// Line is the 1-based line of Pos.
	Line int
	// Column is the 1-based column (in runes) of Pos within its line.
	Column int
	// Msg says what was found and what was expected.
	Msg string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d, column %d (offset %d): %s", e.Line, e.Column, e.Pos, e.Msg)
}

// EvalError reports a failure while evaluating a filter or applying an
// action: a missing system property, a type mismatch, a division by zero and
// the like. Service Bus calls these filter exceptions: the rule does not
// match, and a subscription with dead-lettering on filter evaluation
// exceptions dead-letters the message with Error() as the description.
type EvalError struct {
	// Expr is the normalized text of the sub-expression that failed.
	Expr string
	// Msg describes the failure.
	Msg string
}

// Error implements error.
func (e *EvalError) Error() string {
	if e.Expr == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", e.Msg, e.Expr)
}
