package admin

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"time"

	"github.com/busbar-io/busbar/isoduration"
)

// writer builds an XML document. Element names are constants of this
// package; every text and attribute value goes through escaping.
type writer struct {
	b bytes.Buffer
}

// open writes a start tag; attrs are name, value pairs.
func (w *writer) open(name string, attrs ...string) {
	w.b.WriteByte('<')
	w.b.WriteString(name)
	w.attrs(attrs)
	w.b.WriteByte('>')
}

// empty writes a self-closing element.
func (w *writer) empty(name string, attrs ...string) {
	w.b.WriteByte('<')
	w.b.WriteString(name)
	w.attrs(attrs)
	w.b.WriteString("/>")
}

func (w *writer) attrs(attrs []string) {
	for i := 0; i+1 < len(attrs); i += 2 {
		w.b.WriteByte(' ')
		w.b.WriteString(attrs[i])
		w.b.WriteString(`="`)
		_ = xml.EscapeText(&w.b, []byte(attrs[i+1]))
		w.b.WriteByte('"')
	}
}

func (w *writer) close(name string) {
	w.b.WriteString("</")
	w.b.WriteString(name)
	w.b.WriteByte('>')
}

// text writes <name>escaped s</name>.
func (w *writer) text(name, s string) {
	w.open(name)
	w.escape(s)
	w.close(name)
}

// textAttr writes <name attrs>escaped s</name>.
func (w *writer) textAttr(name, s string, attrs ...string) {
	w.open(name, attrs...)
	w.escape(s)
	w.close(name)
}

// escape writes character data: '&', '<', '>' and '\r' are escaped (quotes
// need not be, outside attributes); characters XML cannot carry become
// U+FFFD.
func (w *writer) escape(s string) {
	for _, r := range s {
		switch {
		case r == '&':
			w.b.WriteString("&amp;")
		case r == '<':
			w.b.WriteString("&lt;")
		case r == '>':
			w.b.WriteString("&gt;")
		case r == '\r':
			w.b.WriteString("&#xD;")
		case r == '\t' || r == '\n' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF:
			w.b.WriteRune(r)
		default:
			w.b.WriteRune('\uFFFD')
		}
	}
}

func (w *writer) boolean(name string, v bool) { w.text(name, strconv.FormatBool(v)) }

func (w *writer) int(name string, v int64) { w.text(name, strconv.FormatInt(v, 10)) }

func (w *writer) duration(name string, d time.Duration) { w.text(name, isoduration.Format(d)) }

func (w *writer) time(name string, t time.Time) { w.text(name, formatTime(t)) }

// optional writes <name>s</name> only when s is not empty.
func (w *writer) optional(name, s string) {
	if s != "" {
		w.text(name, s)
	}
}

// formatTime writes a timestamp as the service does (UTC, up to 7
// fractional digits); the zero time is .NET's DateTime.MinValue.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.UTC().Format("2006-01-02T15:04:05.9999999Z")
}

// clamp32 clamps a count to the int32 the clients parse.
func clamp32(n int64) int64 {
	const maxInt32 = 1<<31 - 1
	switch {
	case n > maxInt32:
		return maxInt32
	case n < 0:
		return 0
	}
	return n
}
