// Package pgurl owns Busbar's postgres:// URLs: PostgreSQL's connection
// URL carrying query parameters of Busbar's own (busbar_table,
// busbar_queue). It takes those out, each at most once, keeps the rest of
// the URL as written, and writes URLs into error messages without their
// passwords.
package pgurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Split parses raw, a postgres:// or postgresql:// URL, and returns it
// without the query parameters names, and their values in the order of
// names ("" for one absent). The rest of the URL is kept as written
// (url.URL.String would write "postgres://" as "postgres:", which is not a
// URL for PostgreSQL). A URL of another scheme or without "//", a query that
// cannot be read whole, and a query naming one of names twice are refused
// rather than cut; the error shows the URL redacted.
func Split(raw string, names ...string) (dsn string, values []string, err error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || !strings.HasPrefix(raw[len(u.Scheme):], "://") {
		return "", nil, fmt.Errorf("%s is not a postgres:// URL", Redact(raw))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		for _, n := range names {
			if len(q[n]) > 1 {
				err = fmt.Errorf("%s named twice", n)
			}
		}
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: the query is malformed or names %s twice", Redact(raw), strings.Join(names, " or "))
	}
	values = make([]string, len(names))
	for i, n := range names {
		values[i] = q.Get(n)
		q.Del(n)
	}
	rest, frag, hasFrag := strings.Cut(raw, "#")
	rest, _, _ = strings.Cut(rest, "?")
	dsn = u.Scheme + rest[len(u.Scheme):]
	if enc := q.Encode(); enc != "" {
		dsn += "?" + enc
	}
	if hasFrag {
		dsn += "#" + frag
	}
	return dsn, values, nil
}

// Redact writes raw for an error message or a log: without its password,
// and without its query, which may carry one too (password=…).
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.Opaque != "" { // "postgres:user:pass@host": no userinfo to redact
		return u.Scheme + ":(hidden)"
	}
	r := *u
	r.RawQuery, r.ForceQuery, r.Fragment, r.RawFragment = "", false, "", ""
	s := r.Redacted()
	if u.RawQuery != "" {
		s += "?(query hidden)"
	}
	return s
}
