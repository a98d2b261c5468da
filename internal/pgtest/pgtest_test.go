package pgtest

import (
	"strings"
	"testing"
)

type fakeTB struct{ fatal, skip string }

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Fatal(args ...any) { f.fatal = args[0].(string) }
func (f *fakeTB) Skip(args ...any)  { f.skip = args[0].(string) }

func TestDSN(t *testing.T) {
	t.Setenv(EnvDSN, "postgres://x")
	if got := DSN(&fakeTB{}); got != "postgres://x" {
		t.Fatalf("DSN = %q", got)
	}
	t.Setenv(EnvDSN, "")
	t.Setenv(EnvRequire, "")
	var f fakeTB
	DSN(&f)
	if f.skip == "" || f.fatal != "" {
		t.Fatalf("without a server and not required: %+v, want a skip", f)
	}
	t.Setenv(EnvRequire, "1")
	f = fakeTB{}
	DSN(&f)
	if !strings.Contains(f.fatal, EnvRequire) {
		t.Fatalf("required but missing: %+v, want a failure", f)
	}
}
