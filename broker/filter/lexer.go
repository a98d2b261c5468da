package filter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind classifies a token.
type tokKind uint8

const (
	tEOF        tokKind = iota
	tIdent              // regular identifier (keywords included; see keyword)
	tDelimIdent         // [bracketed] or "quoted" identifier; text is unescaped
	tString             // 'string'; text is unescaped
	tInt                // integer literal; text is the digits
	tFloat              // decimal or approximate literal; text as written
	tParam              // @name; text is the name without '@'
	tEq                 // =
	tNe                 // <> or !=
	tLt                 // <
	tLe                 // <=
	tGt                 // >
	tGe                 // >=
	tPlus               // +
	tMinus              // -
	tStar               // *
	tSlash              // /
	tPercent            // %
	tLParen             // (
	tRParen             // )
	tComma              // ,
	tDot                // .
	tSemicolon          // ;
)

// token is one lexeme with its byte offset in the source.
type token struct {
	kind tokKind
	pos  int
	end  int
	text string
}

// keywords are reserved: they cannot be used as regular identifiers.
var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true,
	"LIKE": true, "ESCAPE": true, "EXISTS": true, "TRUE": true, "FALSE": true,
}

// isKeyword reports whether t is the (case-insensitive) keyword kw.
func (t token) isKeyword(kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

// describe names the token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tIdent:
		if keywords[strings.ToUpper(t.text)] {
			return "keyword " + strings.ToUpper(t.text)
		}
		return fmt.Sprintf("identifier %q", t.text)
	case tDelimIdent:
		return fmt.Sprintf("identifier %q", t.text)
	case tString:
		return "string literal"
	case tInt, tFloat:
		return "number " + t.text
	case tParam:
		return "parameter @" + t.text
	}
	return fmt.Sprintf("%q", punctText[t.kind])
}

var punctText = map[tokKind]string{
	tEq: "=", tNe: "<>", tLt: "<", tLe: "<=", tGt: ">", tGe: ">=", tPlus: "+",
	tMinus: "-", tStar: "*", tSlash: "/", tPercent: "%", tLParen: "(",
	tRParen: ")", tComma: ",", tDot: ".", tSemicolon: ";",
}

// lexer turns source text into tokens on demand.
type lexer struct {
	src string
	off int
}

// errorAt builds a *ParseError for byte offset pos of src.
func errorAt(src string, pos int, format string, args ...any) *ParseError {
	if pos > len(src) {
		pos = len(src)
	}
	line, col := 1, 1
	for _, r := range src[:pos] {
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &ParseError{Pos: pos, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// isIdentStart reports whether r may begin a regular identifier.
func isIdentStart(r rune) bool { return unicode.IsLetter(r) || r == '_' }

// isIdentPart reports whether r may continue a regular identifier.
func isIdentPart(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// next returns the next token or a *ParseError.
func (l *lexer) next() (token, error) {
	src := l.src
	for l.off < len(src) {
		r, n := utf8.DecodeRuneInString(src[l.off:])
		if !unicode.IsSpace(r) {
			break
		}
		l.off += n
	}
	start := l.off
	if start >= len(src) {
		return token{kind: tEOF, pos: start, end: start}, nil
	}
	c := src[start]
	tok := func(k tokKind, n int) (token, error) {
		l.off = start + n
		return token{kind: k, pos: start, end: l.off, text: src[start:l.off]}, nil
	}
	switch c {
	case '=':
		return tok(tEq, 1)
	case '<':
		if strings.HasPrefix(src[start:], "<>") {
			return tok(tNe, 2)
		}
		if strings.HasPrefix(src[start:], "<=") {
			return tok(tLe, 2)
		}
		return tok(tLt, 1)
	case '>':
		if strings.HasPrefix(src[start:], ">=") {
			return tok(tGe, 2)
		}
		return tok(tGt, 1)
	case '!':
		if strings.HasPrefix(src[start:], "!=") {
			return tok(tNe, 2)
		}
		return token{}, errorAt(src, start, "unexpected character '!' (did you mean '!='?)")
	case '+':
		return tok(tPlus, 1)
	case '-':
		return tok(tMinus, 1)
	case '*':
		return tok(tStar, 1)
	case '/':
		return tok(tSlash, 1)
	case '%':
		return tok(tPercent, 1)
	case '(':
		return tok(tLParen, 1)
	case ')':
		return tok(tRParen, 1)
	case ',':
		return tok(tComma, 1)
	case ';':
		return tok(tSemicolon, 1)
	case '.':
		if start+1 < len(src) && isDigit(src[start+1]) {
			return l.number(start)
		}
		return tok(tDot, 1)
	case '\'':
		return l.quoted(start, '\'', tString, "string literal")
	case '"':
		return l.quoted(start, '"', tDelimIdent, "quoted identifier")
	case '[':
		return l.quoted(start, ']', tDelimIdent, "delimited identifier")
	case '@':
		end := start + 1
		for end < len(src) {
			r, n := utf8.DecodeRuneInString(src[end:])
			if !isIdentPart(r) {
				break
			}
			end += n
		}
		if end == start+1 {
			return token{}, errorAt(src, start, "expected a parameter name after '@'")
		}
		l.off = end
		return token{kind: tParam, pos: start, end: end, text: src[start+1 : end]}, nil
	}
	if isDigit(c) {
		return l.number(start)
	}
	r, n := utf8.DecodeRuneInString(src[start:])
	if isIdentStart(r) {
		end := start + n
		for end < len(src) {
			r, n := utf8.DecodeRuneInString(src[end:])
			if !isIdentPart(r) {
				break
			}
			end += n
		}
		return tok(tIdent, end-start)
	}
	if r == utf8.RuneError && n == 1 {
		return token{}, errorAt(src, start, "invalid UTF-8 byte 0x%02x", c)
	}
	return token{}, errorAt(src, start, "unexpected character %q", r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number lexes digits [. digits] [(e|E) [+|-] digits].
func (l *lexer) number(start int) (token, error) {
	src := l.src
	end := start
	kind := tInt
	for end < len(src) && isDigit(src[end]) {
		end++
	}
	if end < len(src) && src[end] == '.' {
		kind = tFloat
		end++
		for end < len(src) && isDigit(src[end]) {
			end++
		}
	}
	if end < len(src) && (src[end] == 'e' || src[end] == 'E') {
		kind = tFloat
		end++
		if end < len(src) && (src[end] == '+' || src[end] == '-') {
			end++
		}
		digits := end
		for end < len(src) && isDigit(src[end]) {
			end++
		}
		if end == digits {
			return token{}, errorAt(src, end, "expected digits in the exponent of number %s", src[start:end])
		}
	}
	l.off = end
	return token{kind: kind, pos: start, end: end, text: src[start:end]}, nil
}

// quoted lexes text from the opening quote at start up to close, where a doubled close stands
// for itself.
func (l *lexer) quoted(start int, close byte, kind tokKind, what string) (token, error) {
	src := l.src
	var b strings.Builder
	i := start + 1
	seg := i
	for {
		j := strings.IndexByte(src[i:], close)
		if j < 0 {
			return token{}, errorAt(src, start, "unterminated %s", what)
		}
		i += j
		if i+1 < len(src) && src[i+1] == close {
			b.WriteString(src[seg : i+1])
			i += 2
			seg = i
			continue
		}
		b.WriteString(src[seg:i])
		break
	}
	l.off = i + 1
	text := b.String()
	if !utf8.ValidString(text) {
		return token{}, errorAt(src, start, "%s is not valid UTF-8", what)
	}
	if kind == tDelimIdent && text == "" {
		return token{}, errorAt(src, start, "empty %s", what)
	}
	return token{kind: kind, pos: start, end: l.off, text: text}, nil
}
