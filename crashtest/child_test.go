//go:build unix

package crashtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/sas"
)

// Environment variables the test reads.
const (
	// envBinary names a prebuilt busbar binary; unset, ./cmd/busbar is built.
	envBinary = "BUSBAR_CRASHTEST_BINARY"
	// envVerbose copies the child's stdout and stderr to the test's stderr.
	envVerbose = "BUSBAR_CRASHTEST_VERBOSE"
	// envRounds overrides the number of rounds (crash, restart, verify) of
	// every crash test: the long campaign runs 100.
	envRounds = "BUSBAR_CRASHTEST_ROUNDS"
	// envSeed seeds the random kill moments; unset, a random seed is
	// taken and logged.
	envSeed = "BUSBAR_CRASHTEST_SEED"
)

// roundsOr returns the number of rounds envRounds asks for, or def.
func roundsOr(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv(envRounds)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of rounds", envRounds, v)
	}
	return n
}

// newRand returns the source of the test's random choices, seeded from
// envSeed or at random; the seed is logged so a run can be repeated.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", envSeed, v)
		}
	}
	t.Logf("random seed %d (set %s to repeat)", seed, envSeed)
	return rand.New(rand.NewPCG(seed, seed))
}

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
// a free loopback port, with the HTTP listener (management API), and returns once the
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
		HTTP:         true, // the management API, whose counts are checked
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
func sharedAccessKey(connStr string) string { return sas.ParseConnectionString(connStr).Key }

// isCtxErr reports whether err is (or wraps) a context cancellation or
// deadline.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
