//go:build unix

package crashtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/serveproc"
)

// Environment variables the test reads.
const (
	// envBinary names a prebuilt busbar binary; unset, ./cmd/busbar is built.
	envBinary = "BUSBAR_CRASHTEST_BINARY"
	// envVerbose copies the child's stdout and stderr to the test's stderr.
	envVerbose = "BUSBAR_CRASHTEST_VERBOSE"
)

const (
	buildTimeout = 5 * time.Minute
	startTimeout = 30 * time.Second
	exitTimeout  = 20 * time.Second
	// logLimit is how much of each child's output is kept for messages.
	logLimit = 64 << 10
)

// buildBusbar returns the busbar binary under test: the one envBinary
// names, or ./cmd/busbar of this module built into dir.
func buildBusbar(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(envBinary); bin != "" {
		return bin
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "busbar")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if err := serveproc.Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startChild runs `busbar serve` over dataDir with the config file cfg, on
// a free loopback port and without the HTTP listener, and returns once the
// child has printed its connection string and accepts connections. The
// child is killed when the test ends, if it still runs.
func startChild(t *testing.T, bin, dataDir, cfg string, args ...string) *serveproc.Process {
	t.Helper()
	opts := serveproc.Options{
		Binary:       bin,
		DataDir:      dataDir,
		Config:       cfg,
		StartTimeout: startTimeout,
		LogLimit:     logLimit,
		Args:         args,
	}
	if os.Getenv(envVerbose) != "" {
		opts.Verbose = os.Stderr
	}
	c, err := serveproc.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// kill sends SIGKILL and waits for the process to be gone; the child must
// still have been running.
func kill(t *testing.T, c *serveproc.Process) {
	t.Helper()
	if err := c.Kill(exitTimeout); err != nil {
		t.Fatalf("%v\n%s", err, c.Log())
	}
}

// terminate sends SIGTERM and requires a clean exit (status 0) in time.
func terminate(t *testing.T, c *serveproc.Process) {
	t.Helper()
	if err := c.Stop(exitTimeout); err != nil {
		t.Errorf("%v\n%s", err, c.Log())
	}
}

// sharedAccessKey returns the SharedAccessKey of a connection string.
func sharedAccessKey(connStr string) string {
	for _, part := range strings.Split(connStr, ";") {
		if v, ok := strings.CutPrefix(part, "SharedAccessKey="); ok {
			return v
		}
	}
	return ""
}

// isCtxErr reports whether err is (or wraps) a context cancellation or
// deadline.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
