package ops_test

import (
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
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

// errorWords is the fixed text of ParsePipelineDB's errors, lower case.
const errorWords = "not a postgres:// url: name the pipeline's work queue with ?busbar_queue=queue the query is malformed or names busbar_queue or busbar_table twice xxxxx"

// checkPipelineDB checks ParsePipelineDB's answer for raw.
func checkPipelineDB(t *testing.T, raw string, d ops.PipelineDB, err error) {
	t.Helper()
	if err != nil {
		if d != (ops.PipelineDB{}) {
			t.Fatalf("ParsePipelineDB(%q) = %+v, %v: a rejection returns nothing", raw, d, err)
		}
		pw := strings.ToLower(passwordOf(raw))
		if len(pw) >= 6 && strings.Count(strings.ToLower(raw), pw) == 1 && !strings.Contains(errorWords, pw) &&
			strings.Contains(strings.ToLower(err.Error()), pw) {
			t.Fatalf("ParsePipelineDB(%q): error %q shows the password %q", raw, err, pw)
		}
		return
	}
	// An accepted URL names a queue, and its DSN is the postgres:// URL
	// without busbar_queue and busbar_table: nothing else is dropped.
	if d.Queue == "" || (!strings.HasPrefix(d.DSN, "postgres://") && !strings.HasPrefix(d.DSN, "postgresql://")) {
		t.Fatalf("ParsePipelineDB(%q) = %+v", raw, d)
	}
	u, uerr := url.Parse(raw)
	v, verr := url.Parse(d.DSN)
	if uerr != nil || verr != nil {
		t.Fatalf("ParsePipelineDB(%q) = %+v: %v, %v", raw, d, uerr, verr)
	}
	want, qerr := url.ParseQuery(u.RawQuery)
	if qerr != nil {
		t.Fatalf("ParsePipelineDB(%q) accepted a query it cannot read whole: %v", raw, qerr)
	}
	if len(want["busbar_queue"]) != 1 || len(want["busbar_table"]) > 1 || d.Queue != want.Get("busbar_queue") || d.Table != want.Get("busbar_table") {
		t.Fatalf("ParsePipelineDB(%q) = %+v from %v", raw, d, want)
	}
	delete(want, "busbar_queue")
	delete(want, "busbar_table")
	got, _ := url.ParseQuery(v.RawQuery)
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	if v.Scheme != u.Scheme || v.User.String() != u.User.String() || v.Host != u.Host || v.Path != u.Path ||
		v.Fragment != u.Fragment || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParsePipelineDB(%q) = %+v: changed (query %v, want %v)", raw, d, got, want)
	}
	// The queue and table put back into the DSN read the same.
	q := url.Values{"busbar_queue": {d.Queue}}
	if d.Table != "" {
		q.Set("busbar_table", d.Table)
	}
	sep := "?"
	if v.RawQuery != "" {
		sep = "&"
	}
	dsn, frag, hasFrag := strings.Cut(d.DSN, "#")
	back := dsn + sep + q.Encode()
	if hasFrag {
		back += "#" + frag
	}
	if again, err := ops.ParsePipelineDB(back); err != nil || again != d {
		t.Fatalf("ParsePipelineDB(%q) = %+v; %q reads as %+v, %v", raw, d, back, again, err)
	}
}

var pipelineDBSeeds = []string{
	"postgres://u:pw@db/app?sslmode=disable&busbar_queue=imports",
	"postgresql://db/app?busbar_queue=orders&busbar_table=order_failures",
	"postgres://?busbar_queue=q", "postgres:///app?host=/run/postgresql&busbar_queue=q#f",
	"mysql://db/app?busbar_queue=q", "postgres://u:secret@db/app", "postgres:u:secret@db/app?busbar_queue=q",
	"mysql:u:secret@db/app", "postgres://db?busbar_queue=a&busbar_queue=b", "postgres://db?busbar_queue=q&busbar_table=a&busbar_table=b",
	"postgres://db?busbar_queue=q&sslmode=require;x=1", "postgres://db?busbar_queue=q&application_name=%zz",
	"POSTGRES://db?busbar_queue=q", "postgres://db?busbar_queue=", "",
}

func FuzzParsePipelineDB(f *testing.F) {
	for _, s := range pipelineDBSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, err := ops.ParsePipelineDB(raw)
		checkPipelineDB(t, raw, d, err)
	})
}

func FuzzParsePipelineDBs(f *testing.F) {
	f.Add(" postgres://u:pw@db/app?sslmode=disable&busbar_queue=imports\n postgresql://db/app?busbar_queue=orders&busbar_table=order_failures ")
	f.Add("postgres://a?busbar_queue=q postgres://b?busbar_queue=q")
	f.Add("postgres://a?busbar_queue=q postgres://a?busbar_queue=q&busbar_table=" + pipelinepg.DefaultTable)
	f.Add("postgres://a?busbar_queue=q\tpostgres://a?busbar_queue=q&busbar_table=t")
	f.Add("")
	f.Add(strings.Join(pipelineDBSeeds, " "))
	f.Fuzz(func(t *testing.T, list string) {
		dbs, err := ops.ParsePipelineDBs(list)
		if err != nil {
			if dbs != nil {
				t.Fatalf("ParsePipelineDBs(%q) = %+v, %v: a rejection returns nothing", list, dbs, err)
			}
			return
		}
		// Each URL is read as ParsePipelineDB reads it, and a store is
		// named once.
		fields := strings.Fields(list)
		if len(dbs) != len(fields) {
			t.Fatalf("ParsePipelineDBs(%q) = %d stores from %d URLs", list, len(dbs), len(fields))
		}
		seen := map[[2]string]bool{}
		for i, raw := range fields {
			d, err := ops.ParsePipelineDB(raw)
			checkPipelineDB(t, raw, d, err)
			if err != nil || d != dbs[i] {
				t.Fatalf("ParsePipelineDBs(%q)[%d] = %+v; ParsePipelineDB(%q) = %+v, %v", list, i, dbs[i], raw, d, err)
			}
			table := d.Table
			if table == "" {
				table = pipelinepg.DefaultTable
			}
			k := [2]string{d.Queue, table}
			if seen[k] {
				t.Fatalf("ParsePipelineDBs(%q): %v named twice", list, k)
			}
			seen[k] = true
		}
	})
}
