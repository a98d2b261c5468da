package filter

import (
	"errors"
	"unicode/utf8"
)

// likeOp is one element of a compiled LIKE pattern.
type likeOp uint8

const (
	likeLit  likeOp = iota // one literal rune
	likeOne                // _ : exactly one rune
	likeMany               // % : any run of runes, possibly empty
)

// likeElem is a compiled pattern element.
type likeElem struct {
	op likeOp
	r  rune
}

// likePattern is a compiled LIKE pattern.
type likePattern []likeElem

var (
	errLikeTrailingEscape = errors.New("LIKE pattern ends with the escape character")
	errLikeEscapeLength   = errors.New("ESCAPE must be a string of exactly one character")
)

// escapeRune validates an ESCAPE operand.
func escapeRune(s string) (rune, error) {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || n != len(s) {
		return 0, errLikeEscapeLength
	}
	return r, nil
}

// compileLike compiles pattern, where % matches any run of characters, _
// one character, and (when hasEsc) esc makes the next character literal.
func compileLike(pattern string, esc rune, hasEsc bool) (likePattern, error) {
	p := make(likePattern, 0, len(pattern))
	escaped := false
	for _, r := range pattern {
		switch {
		case escaped:
			p = append(p, likeElem{op: likeLit, r: r})
			escaped = false
		case hasEsc && r == esc:
			escaped = true
		case r == '%':
			if len(p) == 0 || p[len(p)-1].op != likeMany {
				p = append(p, likeElem{op: likeMany})
			}
		case r == '_':
			p = append(p, likeElem{op: likeOne})
		default:
			p = append(p, likeElem{op: likeLit, r: r})
		}
	}
	if escaped {
		return nil, errLikeTrailingEscape
	}
	return p, nil
}

// match reports whether s matches the whole pattern. It backtracks only to
// the most recent %, so it runs in O(len(s)·len(p)) without recursion.
func (p likePattern) match(s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch e := p[pi]; e.op {
			case likeMany:
				starP, starS = pi, si
				pi++
				continue
			case likeOne:
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				pi++
				continue
			default:
				r, n := utf8.DecodeRuneInString(s[si:])
				if r == e.r {
					si += n
					pi++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		si = starS
		pi = starP + 1
	}
	for pi < len(p) && p[pi].op == likeMany {
		pi++
	}
	return pi == len(p)
}
