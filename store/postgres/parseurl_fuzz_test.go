package postgres

import (
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// passwordOf returns what a reader takes for the password in raw: after
// the first ':' and before the last '@' of what follows "scheme:" or
// "scheme://" up to the first '/', '?' or '#'.
func passwordOf(raw string) string {
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !schemeRE.MatchString(scheme) {
		return ""
	}
	rest = strings.TrimPrefix(rest, "//")
	if k := strings.IndexAny(rest, "/?#"); k >= 0 {
		rest = rest[:k]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// errorWords is the fixed text of ParseURL's errors, lower case.
const errorWords = "store/postgres: is not a postgres:// url: the query is malformed or names busbar_table twice (unparsable url) (hidden) xxxxx"

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://busbar:secret@db.internal/busbar?busbar_table=busbar_kv",
		"postgresql://u@h:5432/db?sslmode=disable&busbar_table=t&application_name=node%201",
		"postgres:///db?host=/var/run/postgresql", "postgres://", "postgres://h/db?busbar_table=a&busbar_table=b",
		"mysql://u:secret@h/db", "postgres:u:secret@h/db?busbar_table=t", "MYSQL://u:p4ssw0rd@h", "mysql:u:secret@h/db", "postgres://u:p@h/db#frag", "://", "", "postgres:u:secret@h/db",
		"postgres://h/db?sslmode=require;x=1", "postgres://h/db?application_name=%zz", "POSTGRES://h/db",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		dsn, opts, err := ParseURL(raw)
		u, uerr := url.Parse(raw)
		if err != nil {
			if dsn != "" || !reflect.DeepEqual(opts, Options{}) || !strings.HasPrefix(err.Error(), "store/postgres: ") {
				t.Fatalf("ParseURL(%q) = %q, %+v, %v: a rejection returns nothing", raw, dsn, opts, err)
			}
			// The password is not in the message (one long enough not to be
			// there by chance).
			pw := strings.ToLower(passwordOf(raw))
			if len(pw) >= 6 && strings.Count(strings.ToLower(raw), pw) == 1 && !strings.Contains(errorWords, pw) &&
				strings.Contains(strings.ToLower(err.Error()), pw) {
				t.Fatalf("ParseURL(%q): error %q shows the password %q", raw, err, pw)
			}
			return
		}
		// An accepted URL is a postgres:// one, and the DSN is that URL
		// without busbar_table: nothing else is dropped or changed.
		if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
			t.Fatalf("ParseURL(%q) = %q: not a postgres:// URL", raw, dsn)
		}
		d, derr := url.Parse(dsn)
		if uerr != nil || derr != nil {
			t.Fatalf("ParseURL(%q) = %q: %v, %v", raw, dsn, uerr, derr)
		}
		want, qerr := url.ParseQuery(u.RawQuery)
		if qerr != nil {
			t.Fatalf("ParseURL(%q) accepted a query it cannot read whole: %v", raw, qerr)
		}
		if opts.Table != want.Get("busbar_table") || len(want["busbar_table"]) > 1 {
			t.Fatalf("ParseURL(%q): table %q from %q", raw, opts.Table, want["busbar_table"])
		}
		delete(want, "busbar_table")
		got, _ := url.ParseQuery(d.RawQuery)
		if len(want) == 0 {
			want = nil
		}
		if len(got) == 0 {
			got = nil
		}
		if d.Scheme != u.Scheme || d.User.String() != u.User.String() || d.Host != u.Host || d.Path != u.Path ||
			d.Fragment != u.Fragment || !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseURL(%q) = %q: changed (query %v, want %v)", raw, dsn, got, want)
		}
		// The DSN parses to itself.
		if again, o, err := ParseURL(dsn); err != nil || again != dsn || o.Table != "" {
			t.Fatalf("ParseURL(%q) = %q; that parses to %q, %+v, %v", raw, dsn, again, o, err)
		}
	})
}
