package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Python half of the suite: conformance/python/test_*.py, written with
// azure-servicebus 7.15.0 and pytest (conformance/python/requirements.txt),
// run against the same broker. The tests create their entities themselves
// with ServiceBusAdministrationClient.

// Time limits of the Python runs.
const (
	pythonPreflightTimeout = 45 * time.Second
	pythonSuiteTimeout     = 4 * time.Minute
	// pythonWorkers is pytest-xdist's process count: the SDK's own AMQP
	// stack polls in 50 ms steps, so the tests wait far more than they
	// compute.
	pythonWorkers = "4"
)

// TestPythonConformance runs the Python suite with pytest from
// conformance/python/.venv (made by conformance/python/setup.sh). Without
// the venv it is skipped, unless BUSBAR_REQUIRE_INTEROP=1 makes that a
// failure.
func TestPythonConformance(t *testing.T) {
	t.Parallel()
	harness(t)
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(dir, ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		why := "conformance/python/.venv is missing (run conformance/python/setup.sh)"
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but %s", why)
		}
		t.Skip(why)
	}
	if suite.mode != "admin" {
		t.Skip("the Python suite creates its entities through the management API, which does not work here")
	}
	env := append(os.Environ(),
		"BUSBAR_CONNECTION_STRING="+suite.connStr,
		"BUSBAR_ADMIN_CONNECTION_STRING="+suite.adminCS,
		"BUSBAR_CONFORMANCE_RUN_ID="+suite.runID,
		"PYTHONDONTWRITEBYTECODE=1",
	)
	if suite.adminTLS {
		env = append(env, "BUSBAR_ADMIN_TLS=1")
	}
	t.Logf("Python suite command: cd conformance/python && BUSBAR_CONNECTION_STRING='%s' BUSBAR_ADMIN_CONNECTION_STRING='%s' .venv/bin/python -m pytest -n %s", suite.connStr, suite.adminCS, pythonWorkers)

	logMark := brokerLogMark()
	out, err := runProgram(t, dir, env, pythonPreflightTimeout, python, "preflight.py")
	if err != nil {
		t.Fatalf("the Python preflight failed (%v), so the Python suite was not run:\n%s\nthe broker's link and connection errors meanwhile:\n%s",
			err, out, brokerErrorsSince(logMark))
	}

	start := time.Now()
	out, err = runProgram(t, dir, env, pythonSuiteTimeout, python,
		"-m", "pytest", "-n", pythonWorkers, "-p", "no:cacheprovider", "-rfE", "--tb=short", "-q")
	t.Logf("pytest ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the Python conformance suite failed (%v); failing tests:\n%s", err, failingPythonTests(out))
	}
}

// failingPythonTests picks pytest's summary lines of failed tests.
func failingPythonTests(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAILED ") || strings.HasPrefix(line, "ERROR ") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "(see the log above)"
	}
	return b.String()
}
