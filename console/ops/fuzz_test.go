package ops_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/console/ops"
	"github.com/busbar-io/busbar/internal/pgurl"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
)

// checkPipelineDB checks ParsePipelineDB's answer for raw against
// pgurl.Split (internal/pgurl fuzzes the splitting itself): the same DSN,
// busbar_queue required, and the queue and table, put back, read the same.
func checkPipelineDB(t *testing.T, raw string, d ops.PipelineDB, err error) {
	t.Helper()
	dsn, v, werr := pgurl.Split(raw, "busbar_queue", "busbar_table")
	if err != nil {
		if d != (ops.PipelineDB{}) || (werr == nil && v[0] != "") {
			t.Fatalf("ParsePipelineDB(%q) = %+v, %v; Split says %q, %v", raw, d, err, v, werr)
		}
		return
	}
	if werr != nil || d.DSN != dsn || d.Queue == "" || d.Queue != v[0] || d.Table != v[1] {
		t.Fatalf("ParsePipelineDB(%q) = %+v; Split says %q, %q, %v", raw, d, dsn, v, werr)
	}
	q := url.Values{"busbar_queue": {d.Queue}}
	if d.Table != "" {
		q.Set("busbar_table", d.Table)
	}
	rest, frag, hasFrag := strings.Cut(d.DSN, "#")
	sep := "?"
	if strings.Contains(rest, "?") {
		sep = "&"
	}
	back := rest + sep + q.Encode()
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
