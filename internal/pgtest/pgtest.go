// Package pgtest finds the PostgreSQL that tests may use. scripts/test.sh
// starts a throwaway server (scripts/postgres.sh) and exports its DSN in
// BUSBAR_TEST_POSTGRES_DSN; BUSBAR_REQUIRE_POSTGRES=1 turns a missing server
// into a failure instead of a skip, so CI cannot pass by skipping. It owns
// nothing else.
package pgtest

import "os"

// Environment variables read by DSN.
const (
	EnvDSN     = "BUSBAR_TEST_POSTGRES_DSN"
	EnvRequire = "BUSBAR_REQUIRE_POSTGRES"
)

// TB is the part of testing.TB that DSN needs.
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// DSN returns the test server's connection string, or skips the test (fails
// it when BUSBAR_REQUIRE_POSTGRES is set).
func DSN(t TB) string {
	t.Helper()
	d := os.Getenv(EnvDSN)
	if d == "" {
		if os.Getenv(EnvRequire) != "" {
			t.Fatal(EnvRequire + " is set but " + EnvDSN + " is empty: start scripts/postgres.sh")
		}
		t.Skip("no PostgreSQL: eval \"$(scripts/postgres.sh start)\" sets " + EnvDSN)
	}
	return d
}
