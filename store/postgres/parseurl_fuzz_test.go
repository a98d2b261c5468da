package postgres

import (
	"reflect"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/internal/pgurl"
)

// ParseURL is pgurl.Split with busbar_table taken out as Options.Table
// (internal/pgurl fuzzes the splitting itself).
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://busbar:secret@db.internal/busbar?busbar_table=busbar_kv",
		"postgresql://u@h:5432/db?sslmode=disable&busbar_table=t&application_name=node%201",
		"postgres://h/db?busbar_table=a&busbar_table=b", "mysql://u:secret@h/db", "postgres:u:secret@h/db", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		dsn, opts, err := ParseURL(raw)
		wdsn, v, werr := pgurl.Split(raw, "busbar_table")
		if err != nil {
			if werr == nil || dsn != "" || !reflect.DeepEqual(opts, Options{}) || err.Error() != "store/postgres: "+werr.Error() {
				t.Fatalf("ParseURL(%q) = %q, %+v, %v; Split says %v", raw, dsn, opts, err, werr)
			}
			return
		}
		if werr != nil || dsn != wdsn || opts.Table != v[0] || !reflect.DeepEqual(opts, Options{Table: v[0]}) {
			t.Fatalf("ParseURL(%q) = %q, %+v; Split says %q, %q, %v", raw, dsn, opts, wdsn, v, werr)
		}
		if again, o, err := ParseURL(dsn); err != nil || again != dsn || o.Table != "" || strings.Contains(dsn, "busbar_table=") {
			t.Fatalf("ParseURL(%q) = %q; that parses to %q, %+v, %v", raw, dsn, again, o, err)
		}
	})
}
