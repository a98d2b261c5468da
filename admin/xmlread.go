package admin

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/busbar-io/busbar/isoduration"
)

// XML namespaces of the management API.
const (
	nsAtom     = "http://www.w3.org/2005/Atom"
	nsConnect  = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	nsInstance = "http://www.w3.org/2001/XMLSchema-instance"
	nsSchema   = "http://www.w3.org/2001/XMLSchema"
	nsCounts   = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
	nsSerial   = "http://schemas.microsoft.com/2003/10/Serialization/"
)

// errBadRequest marks a request body or parameter the client must fix (400).
var errBadRequest = errors.New("bad request")

// badRequest is a 400 error; its message is the description alone.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }
func (e *badRequest) Unwrap() error { return errBadRequest }

// badRequestf returns an error wrapping errBadRequest.
func badRequestf(format string, args ...any) error {
	return &badRequest{msg: fmt.Sprintf(format, args...)}
}

// reader walks an XML document token by token. It is the one place that
// turns encoding/xml errors into 400s.
type reader struct {
	d *xml.Decoder
}

func newReader(r io.Reader) *reader {
	d := xml.NewDecoder(r)
	d.Strict = true
	return &reader{d: d}
}

// token returns the next start or end element, skipping character data
// that is only whitespace, comments, processing instructions and directives.
// Non-blank text where an element was expected is an error.
func (r *reader) token(where string) (xml.Token, error) {
	for {
		t, err := r.d.Token()
		if err == io.EOF {
			return nil, badRequestf("the XML document ends inside %s", where)
		}
		if err != nil {
			return nil, badRequestf("malformed XML: %v", err)
		}
		switch x := t.(type) {
		case xml.StartElement, xml.EndElement:
			return x, nil
		case xml.CharData:
			if strings.TrimSpace(string(x)) != "" {
				return nil, badRequestf("unexpected text %q in %s", truncate(string(x), 40), where)
			}
		}
	}
}

// root returns the document's root element.
func (r *reader) root() (xml.StartElement, error) {
	t, err := r.token("the document")
	if err != nil {
		return xml.StartElement{}, err
	}
	se, ok := t.(xml.StartElement)
	if !ok {
		return xml.StartElement{}, badRequestf("malformed XML: no root element")
	}
	return se, nil
}

// child returns the next child element of the element named parent, or
// ok=false at its end.
func (r *reader) child(parent string) (se xml.StartElement, ok bool, err error) {
	t, err := r.token(parent)
	if err != nil {
		return xml.StartElement{}, false, err
	}
	if se, isStart := t.(xml.StartElement); isStart {
		return se, true, nil
	}
	return xml.StartElement{}, false, nil
}

// text reads the character data of a simple element up to its end; a nested
// element is an error naming the property.
func (r *reader) text(prop string) (string, error) {
	var b strings.Builder
	for {
		t, err := r.d.Token()
		if err == io.EOF {
			return "", badRequestf("the XML document ends inside %s", prop)
		}
		if err != nil {
			return "", badRequestf("malformed XML: %v", err)
		}
		switch x := t.(type) {
		case xml.CharData:
			if b.Len()+len(x) > maxTextLen {
				return "", badRequestf("property %s is longer than %d characters", prop, maxTextLen)
			}
			b.Write(x)
		case xml.StartElement:
			return "", badRequestf("property %s must be a simple value, found element <%s>", prop, x.Name.Local)
		case xml.EndElement:
			return b.String(), nil
		}
	}
}

// skip skips the rest of the current element.
func (r *reader) skip() error {
	if err := r.d.Skip(); err != nil {
		return badRequestf("malformed XML: %v", err)
	}
	return nil
}

// maxTextLen bounds one property's text (the body limit bounds the total).
const maxTextLen = 64 << 10

// attr returns the value of the attribute space:local.
func attr(se xml.StartElement, space, local string) (string, bool) {
	for _, a := range se.Attr {
		if a.Name.Local == local && a.Name.Space == space {
			return a.Value, true
		}
	}
	return "", false
}

// instanceType returns the element's xsi:type without its prefix, as the
// clients write it ("l28:string", "SqlFilter").
func instanceType(se xml.StartElement) (string, bool) {
	v, ok := attr(se, nsInstance, "type")
	if !ok {
		return "", false
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	return v, true
}

// fieldSet records which properties a description carried, to refuse
// duplicates and to know what an update changes.
type fieldSet map[string]bool

func (s fieldSet) add(name string) error {
	if s[name] {
		return badRequestf("property %s appears more than once", name)
	}
	s[name] = true
	return nil
}

// Value parsers. Each names the property in its error.

func parseBool(prop, s string) (bool, error) {
	switch strings.TrimSpace(s) {
	case "true", "1", "True":
		return true, nil
	case "false", "0", "False":
		return false, nil
	}
	return false, badRequestf("property %s: %q is not a boolean (true or false)", prop, truncate(s, 40))
}

func parseInt(prop, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, badRequestf("property %s: %q is not an integer", prop, truncate(s, 40))
	}
	if n < lo || n > hi {
		return 0, badRequestf("property %s: %d is outside [%d, %d]", prop, n, lo, hi)
	}
	return n, nil
}

func parseDuration(prop, s string) (time.Duration, error) {
	d, err := isoduration.Parse(strings.TrimSpace(s))
	if err != nil {
		return 0, badRequestf("property %s: %v", prop, err)
	}
	if d <= 0 {
		return 0, badRequestf("property %s: %q is not a positive duration", prop, s)
	}
	return d, nil
}

func parseInt32(prop, s string) (int32, error) {
	n, err := parseInt(prop, s, 1, math.MaxInt32)
	return int32(n), err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
