//go:build unix

package crashtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/busbar")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/busbar: %v\n%s", err, out)
	}
	return bin
}

// child is one running `busbar serve`.
type child struct {
	cmd     *exec.Cmd
	connStr string
	log     *tailBuffer
	exited  chan struct{} // closed once the process has exited
	waitErr error         // valid after exited is closed
}

// startChild runs `busbar serve` over dataDir with the config file cfg, on
// a free loopback port and without the HTTP listener, and returns once the
// child has printed its connection string (which it does when it accepts
// connections).
func startChild(t *testing.T, bin, dataDir, cfg string) *child {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"serve", "--data", dataDir, "--config", cfg, "--amqp", addr, "--http", "-"}
	c := &child{log: &tailBuffer{max: 64 << 10}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = withoutBusbarEnv(os.Environ())
	var errOut io.Writer = c.log
	if os.Getenv(envVerbose) != "" {
		errOut = io.MultiWriter(c.log, os.Stderr)
	}
	c.cmd.Stderr = errOut
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() { c.killNow() })
	found := make(chan string, 1)
	go c.readStdout(stdout, found)
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case c.connStr = <-found:
		return c
	case <-c.exited:
		t.Fatalf("busbar %s exited before printing its connection string: %v\n%s",
			strings.Join(args, " "), c.waitErr, c.log.String())
	case <-timer.C:
		t.Fatalf("busbar %s printed no connection string in %v\n%s",
			strings.Join(args, " "), startTimeout, c.log.String())
	}
	return nil
}

// readStdout copies the child's stdout to its log and sends the first
// connection string it prints (the line after "Connection string:").
func (c *child) readStdout(r io.Reader, found chan<- string) {
	sc := bufio.NewScanner(r)
	next := false
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(c.log, line)
		if os.Getenv(envVerbose) != "" {
			fmt.Fprintln(os.Stderr, "busbar stdout:", line)
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case next && strings.HasPrefix(trimmed, "Endpoint="):
			select {
			case found <- trimmed:
			default:
			}
			next = false
		case strings.HasPrefix(trimmed, "Connection string:"):
			next = true
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		t.Fatalf("busbar exited before it was killed: %v\n%s", c.waitErr, c.log.String())
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-c.exited:
	case <-time.After(exitTimeout):
		t.Fatalf("busbar still running %v after SIGKILL", exitTimeout)
	}
}

// terminate sends SIGTERM and requires a clean exit (status 0) in time.
func (c *child) terminate(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-c.exited:
		if c.waitErr != nil {
			t.Errorf("busbar exited with %v after SIGTERM\n%s", c.waitErr, c.log.String())
		}
	case <-time.After(exitTimeout):
		t.Errorf("busbar still running %v after SIGTERM\n%s", exitTimeout, c.log.String())
	}
}

// killNow is the cleanup: it kills the child if it still runs.
func (c *child) killNow() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
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

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// withoutBusbarEnv drops BUSBAR_* variables, so that a developer's settings
// cannot change the child under test.
func withoutBusbarEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BUSBAR_") {
			out = append(out, kv)
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// isCtxErr reports whether err is (or wraps) a context cancellation or
// deadline.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
