package config

import "fmt"

// stripComments removes // line comments and /* */ block comments from JSON
// text, leaving string literals untouched, so the emulator's commented
// Config.json parses with encoding/json. Offsets are preserved (comments
// become spaces, newlines are kept) so JSON syntax errors still point at the
// right line.
func stripComments(src []byte) ([]byte, error) {
	out := make([]byte, len(src))
	copy(out, src)
	inString := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for i < len(out) && out[i] != '\n' {
				out[i] = ' '
				i++
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			start := i
			for i < len(out) && !(out[i] == '*' && i+1 < len(out) && out[i+1] == '/') {
				if out[i] != '\n' {
					out[i] = ' '
				}
				i++
			}
			if i >= len(out) {
				return nil, fmt.Errorf("unterminated /* comment starting at byte %d", start)
			}
			out[i], out[i+1] = ' ', ' '
			i++
		}
	}
	return out, nil
}
