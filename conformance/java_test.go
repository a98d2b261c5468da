package conformance

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/sas"
)

// The Java half of the suite: conformance/java, a Maven project of JUnit 5
// tests written with com.azure:azure-messaging-servicebus, run against the
// same broker. Its tests create their own entities through the management
// API (ServiceBusAdministrationClient), which they also test.

// javaSuiteTimeout bounds the Maven run (the suite takes about a minute).
const javaSuiteTimeout = 4 * time.Minute

// envJavaTests selects Java tests (Maven's -Dtest syntax, e.g.
// "SessionsTest" or "MessagingTest#peek").
const envJavaTests = "BUSBAR_CONFORMANCE_JAVA_TESTS"

// TestJavaConformance runs the Java suite with `mvn test`. Without mvn (or
// a JDK's javac) it is skipped, unless BUSBAR_REQUIRE_INTEROP=1 makes that a
// failure. Maven takes its artifacts from ~/.m2, where scripts/test.sh
// fetched them.
func TestJavaConformance(t *testing.T) {
	t.Parallel()
	harness(t)
	skip := func(why string) {
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but %s", why)
		}
		t.Skip(why)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		skip("no mvn on PATH")
	}
	if _, err := exec.LookPath("javac"); err != nil {
		skip("no javac (a JDK) on PATH")
	}
	if suite.mode != "admin" {
		t.Skip("the Java suite creates its entities through the management API, which this broker does not serve")
	}
	dir, err := filepath.Abs("java")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if suite.adminTLS {
		scheme = "https"
	}
	adminEndpoint := scheme + "://" + strings.TrimPrefix(sas.ParseConnectionString(suite.adminCS).Endpoint, "sb://")

	args := []string{"-B", "-ntp", "test"}
	if sel := os.Getenv(envJavaTests); sel != "" {
		args = append(args, "-Dtest="+sel)
	}
	env := append(os.Environ(),
		"BUSBAR_CONNECTION_STRING="+suite.connStr,
		"BUSBAR_ADMIN_ENDPOINT="+adminEndpoint,
		"BUSBAR_CONFORMANCE_RUN_ID="+suite.runID,
	)
	t.Logf("Java suite command: cd conformance/java && BUSBAR_CONNECTION_STRING='%s' BUSBAR_ADMIN_ENDPOINT=%s mvn %s",
		suite.connStr, adminEndpoint, strings.Join(args, " "))

	ctx, cancel := context.WithTimeout(context.Background(), javaSuiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Dir = dir
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("mvn test ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the Java conformance suite was killed after %v", javaSuiteTimeout)
	case errors.As(err, &exitErr):
		t.Fatalf("the Java conformance suite failed (%v); failing tests:\n%s", err, failingJavaTests(string(out)))
	case err != nil:
		t.Fatalf("running mvn: %v", err)
	}
	if !strings.Contains(string(out), "Tests run:") {
		t.Fatal("mvn test ran no test")
	}
}

// failingJavaTests picks Surefire's failure lines out of Maven's output.
func failingJavaTests(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "<<< FAIL") || strings.Contains(line, "<<< ERROR") || strings.HasPrefix(line, "[ERROR]   ") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "(see the log above)"
	}
	return b.String()
}
