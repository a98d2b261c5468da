package pgurl

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
// "scheme://" up to the first '/', '?' or '#'; or a password= query
// parameter.
func passwordOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if q, err := url.ParseQuery(u.RawQuery); err == nil && q.Get("password") != "" {
			return q.Get("password")
		}
	}
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

// errorWords is the fixed text of Split's errors, lower case.
const errorWords = "is not a postgres:// url: the query is malformed or names busbar_table or busbar_queue twice (an unparsable url) (hidden) (query hidden) xxxxx"

var names = []string{"busbar_table", "busbar_queue"}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"postgres://busbar:secret@db.internal/busbar?busbar_table=busbar_kv",
		"postgresql://u@h:5432/db?sslmode=disable&busbar_table=t&application_name=node%201",
		"postgres:///db?host=/var/run/postgresql", "postgres://", "postgres://h/db?busbar_table=a&busbar_table=b",
		"mysql://u:secret@h/db", "postgres:u:secret@h/db?busbar_table=t", "MYSQL://u:p4ssw0rd@h", "mysql:u:secret@h/db",
		"postgres://u:p@h/db#frag", "://", "", "postgres:u:secret@h/db", "postgres://h/db?sslmode=require;x=1",
		"postgres://h/db?application_name=%zz", "POSTGRES://h/db", "postgres://db?busbar_queue=q&busbar_table=a",
		"postgres://h/db?password=s3cr3tpw&busbar_table=a&busbar_table=b", "postgres://h/db?password=s3cr3tpw&x=%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		dsn, values, err := Split(raw, names...)
		if err != nil {
			if dsn != "" || values != nil {
				t.Fatalf("Split(%q) = %q, %q, %v: a rejection returns nothing", raw, dsn, values, err)
			}
			// The password is not in the message (one long enough not to be
			// there by chance).
			pw := strings.ToLower(passwordOf(raw))
			if len(pw) >= 6 && strings.Count(strings.ToLower(raw), pw) == 1 && !strings.Contains(errorWords, pw) &&
				strings.Contains(strings.ToLower(err.Error()), pw) {
				t.Fatalf("Split(%q): error %q shows the password %q", raw, err, pw)
			}
			return
		}
		// An accepted URL is a postgres:// one, and the DSN is that URL
		// without the names: nothing else is dropped or changed.
		if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
			t.Fatalf("Split(%q) = %q: not a postgres:// URL", raw, dsn)
		}
		u, uerr := url.Parse(raw)
		d, derr := url.Parse(dsn)
		if uerr != nil || derr != nil {
			t.Fatalf("Split(%q) = %q: %v, %v", raw, dsn, uerr, derr)
		}
		want, qerr := url.ParseQuery(u.RawQuery)
		if qerr != nil {
			t.Fatalf("Split(%q) accepted a query it cannot read whole: %v", raw, qerr)
		}
		for i, n := range names {
			if values[i] != want.Get(n) || len(want[n]) > 1 {
				t.Fatalf("Split(%q): %s = %q from %q", raw, n, values[i], want[n])
			}
			delete(want, n)
		}
		got, _ := url.ParseQuery(d.RawQuery)
		if len(want) == 0 {
			want = nil
		}
		if len(got) == 0 {
			got = nil
		}
		if d.Scheme != u.Scheme || d.User.String() != u.User.String() || d.Host != u.Host || d.Path != u.Path ||
			d.Fragment != u.Fragment || !reflect.DeepEqual(got, want) {
			t.Fatalf("Split(%q) = %q: changed (query %v, want %v)", raw, dsn, got, want)
		}
		// The DSN splits to itself.
		if again, v, err := Split(dsn, names...); err != nil || again != dsn || v[0] != "" || v[1] != "" {
			t.Fatalf("Split(%q) = %q; that splits to %q, %q, %v", raw, dsn, again, v, err)
		}
	})
}

func TestRedactHidesPasswords(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://u:secret@h/db":                  "postgres://u:xxxxx@h/db",
		"postgres://u@h/db?password=secret&x=1#f":   "postgres://u@h/db?(query hidden)",
		"postgres:u:secret@h/db":                    "postgres:(hidden)",
		"postgres://h/db":                           "postgres://h/db",
		"postgres://u:secret@h/db?busbar_table=%zz": "postgres://u:xxxxx@h/db?(query hidden)",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}
