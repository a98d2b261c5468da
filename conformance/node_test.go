package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// The Node half of the suite: test/node/conformance/*.test.js, written
// with @azure/service-bus 7.9.5 and node:test, run against the same broker.
// The entities they use are created here and passed by name in the
// environment.

// nodeQueues are the Node suite's queues, by the key the scripts use.
var nodeQueues = map[string]*queueSpec{
	"send":         declareQueue("node-send", admin.QueueProperties{}),
	"batch":        declareQueue("node-batch", admin.QueueProperties{}),
	"schedule":     declareQueue("node-schedule", admin.QueueProperties{}),
	"settle":       declareQueue("node-settle", admin.QueueProperties{}),
	"deadLetter":   declareQueue("node-dead-letter", admin.QueueProperties{}),
	"defer":        declareQueue("node-defer", admin.QueueProperties{}),
	"subscribe":    declareQueue("node-subscribe", admin.QueueProperties{}),
	"drain":        declareQueue("node-drain", admin.QueueProperties{}),
	"peek":         declareQueue("node-peek", admin.QueueProperties{}),
	"deleteMode":   declareQueue("node-receive-and-delete", admin.QueueProperties{}),
	"sessions":     sessionQueue("node-sessions", admin.QueueProperties{}),
	"sessionState": sessionQueue("node-session-state", admin.QueueProperties{}),
	"sessionFifo":  sessionQueue("node-session-fifo", admin.QueueProperties{}),
	"emptySession": sessionQueue("node-empty-session", admin.QueueProperties{}),
	"jobs":         sessionQueue("node-jobs", admin.QueueProperties{}),
	"preflight":    declareQueue("node-preflight", admin.QueueProperties{}),
}

// nodeSagaTopic is the Node saga's topic; its subscription is
// "orchestrator", as in the Go saga.
var nodeSagaTopic = declareTopic("node-orchestration", admin.TopicProperties{}, sagaTopic.subs...)

// Time limits of the Node runs.
const (
	nodePreflightTimeout = 30 * time.Second
	nodeSuiteTimeout     = 2 * time.Minute
)

// TestNodeConformance runs the Node suite with `node --test`. Without
// test/node/node_modules (or node) it is skipped, unless
// BUSBAR_REQUIRE_INTEROP=1 makes that a failure.
func TestNodeConformance(t *testing.T) {
	t.Parallel()
	harness(t)
	dir, err := filepath.Abs(filepath.Join("..", "test", "node"))
	if err != nil {
		t.Fatal(err)
	}
	skip := func(why string) {
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but %s", why)
		}
		t.Skip(why)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@azure", "service-bus", "package.json")); err != nil {
		skip("test/node/node_modules has no @azure/service-bus (run npm ci in test/node)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("no node on PATH")
	}
	files, err := filepath.Glob(filepath.Join(dir, "conformance", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test/node/conformance/*.test.js files (%v)", err)
	}

	names := map[string]string{"sagaTopic": nodeSagaTopic.create(t), "sagaSubscription": "orchestrator"}
	for key, q := range nodeQueues {
		names[key] = q.create(t)
	}
	entities, err := json.Marshal(names)
	if err != nil {
		t.Fatal(err)
	}

	env := append(os.Environ(),
		"BUSBAR_CONNECTION_STRING="+suite.connStr,
		"BUSBAR_CONFORMANCE_ENTITY_NAMES="+string(entities),
		"BUSBAR_CONFORMANCE_RUN_ID="+suite.runID,
		"NO_COLOR=1",
	)
	// With an external broker (which outlives this test) the Node suite
	// can be rerun alone with this command.
	t.Logf("Node suite command: cd test/node && BUSBAR_CONNECTION_STRING='%s' BUSBAR_CONFORMANCE_ENTITY_NAMES='%s' node --test conformance/*.test.js", suite.connStr, entities)

	// A quick send and receive first: when the JS SDK cannot talk to the
	// broker at all, say so now rather than after every test times out.
	logMark := brokerLogMark()
	out, err := runProgram(t, dir, env, nodePreflightTimeout, node, filepath.Join("conformance", "preflight.js"))
	if err != nil {
		t.Fatalf("the Node preflight failed (%v), so the Node suite was not run:\n%s\nthe broker's link and connection errors meanwhile:\n%s",
			err, out, brokerErrorsSince(logMark))
	}

	args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=4"}, files...)
	start := time.Now()
	out, err = runProgram(t, dir, env, nodeSuiteTimeout, node, args...)
	t.Logf("node --test ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the Node conformance suite failed (%v); failing tests:\n%s", err, failingNodeTests(out))
	}
}

// runProgram runs prog (node, python) with args in dir and returns its
// combined output.
func runProgram(t *testing.T, dir string, env []string, limit time.Duration, prog string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second // children (pytest-xdist's workers) may hold the output open
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (killed after %v)", err, limit)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && ctx.Err() == nil {
		t.Fatalf("running %s: %v", prog, err)
	}
	return string(out), err
}

// brokerLogMark returns the current length of the child broker's log.
func brokerLogMark() int {
	if suite.child == nil {
		return 0
	}
	return len(suite.child.Log())
}

// brokerErrorsSince returns the lines of the child broker's log written
// after mark that report a detached link, a lost connection or a warning.
func brokerErrorsSince(mark int) string {
	if suite.child == nil {
		return "(no child broker)"
	}
	var lines []string
	for _, line := range strings.Split(suite.child.Log()[mark:], "\n") {
		if strings.Contains(line, "detaching link") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "(none)"
	}
	return strings.Join(lines, "\n")
}

// failingNodeTests picks the failure lines out of spec-reporter output.
func failingNodeTests(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "✖") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "(see the log above)"
	}
	return b.String()
}
