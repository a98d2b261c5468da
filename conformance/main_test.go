package conformance

import (
	"bufio"
	"bytes"
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

// Environment variables the suite reads. docs/conformance.md describes them.
const (
	// envConnectionString points the suite at a running broker instead of
	// a child `busbar serve`.
	envConnectionString = "BUSBAR_CONFORMANCE_CONNECTION_STRING"
	// envAdminEndpoint is the base URL of the ATOM management API of that
	// broker (for example http://localhost:5300). Without it, an emulator
	// connection string's host on port 5300 over plain HTTP is assumed,
	// and any other connection string uses HTTPS on its own host.
	envAdminEndpoint = "BUSBAR_CONFORMANCE_ADMIN_ENDPOINT"
	// envEntities chooses how entities are created: "admin" (through the
	// management API), "config" (declared in a --config file given to the
	// child at start) or "auto" (the default: admin when it works).
	envEntities = "BUSBAR_CONFORMANCE_ENTITIES"
	// envVerbose copies the child's log to the test's stderr when set.
	envVerbose = "BUSBAR_CONFORMANCE_VERBOSE"
	// envRace builds the child broker with -race when set.
	envRace = "BUSBAR_CONFORMANCE_RACE"
	// envLogLevel is the child's --log-level (default info).
	envLogLevel = "BUSBAR_CONFORMANCE_LOG_LEVEL"
)

// Deadlines of the harness.
const (
	buildTimeout    = 5 * time.Minute
	startTimeout    = 30 * time.Second
	stopTimeout     = 20 * time.Second
	adminProbeLimit = 10 * time.Second
)

// suite is what TestMain set up for the tests. When err is set, every test
// fails with it (it names the step that failed and the child's stderr).
var suite struct {
	err      error
	connStr  string // the data-plane connection string
	adminCS  string // the connection string the admin client uses
	adminTLS bool   // false: the admin client's requests are rewritten to plain HTTP
	mode     string // "admin" or "config"
	runID    string // makes entity names unique to this run
	child    *child // nil when testing an external broker
	external bool
	tmp      string // the harness's temporary directory
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// suiteOnce starts the broker when the first test needs it, so that a run
// selecting no test of this package (go test ./... -run X) builds nothing.
var suiteOnce sync.Once

func runSuite(m *testing.M) int {
	suite.runID = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff)
	tmp, err := os.MkdirTemp("", "busbar-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	suite.tmp = tmp

	code := m.Run()
	if suite.child != nil {
		if err := suite.child.stop(stopTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: stopping busbar: %v\n%s", err, suite.child.stderrTail())
			code = 1
		}
	}
	return code
}

// setUp starts (or finds) the broker under test and decides how entities
// are created.
func setUp(tmp string) error {
	mode := strings.ToLower(os.Getenv(envEntities))
	switch mode {
	case "":
		mode = "auto"
	case "auto", "admin", "config":
	default:
		return fmt.Errorf("%s=%q: want auto, admin or config", envEntities, mode)
	}
	if cs := os.Getenv(envConnectionString); cs != "" {
		suite.external = true
		suite.connStr = cs
		suite.mode = "admin"
		if mode == "config" {
			return fmt.Errorf("%s=config needs the child broker; unset %s", envEntities, envConnectionString)
		}
		return configureExternalAdmin(cs)
	}

	bin := filepath.Join(tmp, "busbar")
	if err := buildBusbar(bin); err != nil {
		return err
	}
	if mode != "config" {
		c, err := startChild(bin, filepath.Join(tmp, "data-admin"), "")
		if err != nil {
			return err
		}
		suite.child = c
		suite.connStr = c.connStr
		suite.adminCS = replaceEndpoint(c.connStr, "sb://"+c.httpAddr)
		suite.mode = "admin"
		perr := probeAdmin()
		if perr == nil {
			return nil
		}
		if mode == "admin" {
			return fmt.Errorf("the management API at http://%s does not work: %w\n%s", c.httpAddr, perr, c.stderrTail())
		}
		fmt.Fprintf(os.Stderr, "conformance: the management API does not work (%v); restarting busbar with a --config file declaring the entities\n", perr)
		if err := c.stop(stopTimeout); err != nil {
			return fmt.Errorf("stopping the first busbar: %w\n%s", err, c.stderrTail())
		}
		suite.child = nil
	}
	cfg := filepath.Join(tmp, "Config.json")
	if err := writeConfigFile(cfg); err != nil {
		return err
	}
	c, err := startChild(bin, filepath.Join(tmp, "data-config"), cfg)
	if err != nil {
		return err
	}
	suite.child = c
	suite.connStr = c.connStr
	suite.adminCS = replaceEndpoint(c.connStr, "sb://"+c.httpAddr)
	suite.mode = "config"
	return nil
}

// buildBusbar builds ./cmd/busbar of this module into bin.
func buildBusbar(bin string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building ./cmd/busbar: no go command on PATH: %w", err)
	}
	args := []string{"build", "-o", bin}
	if os.Getenv(envRace) != "" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/busbar")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building ./cmd/busbar (go %s): %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// child is a running `busbar serve`.
type child struct {
	cmd      *exec.Cmd
	amqpAddr string
	httpAddr string
	connStr  string
	stderr   *lockedBuffer
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // valid once exited is closed
}

// startChild starts `busbar serve` on free loopback ports over dataDir
// (with the config file cfg unless it is empty), reads the connection
// string it prints and waits until its AMQP port accepts connections.
func startChild(bin, dataDir, cfg string) (*child, error) {
	amqpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--data", dataDir, "--amqp", amqpAddr, "--http", httpAddr, "--shutdown-timeout", "10s"}
	if cfg != "" {
		args = append(args, "--config", cfg)
	}
	if lv := os.Getenv(envLogLevel); lv != "" {
		args = append(args, "--log-level", lv)
	}
	c := &child{amqpAddr: amqpAddr, httpAddr: httpAddr, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = childEnv()
	dieWithParent(c.cmd)
	var errOut io.Writer = c.stderr
	if os.Getenv(envVerbose) != "" {
		errOut = io.MultiWriter(c.stderr, os.Stderr)
	}
	c.cmd.Stderr = errOut
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting busbar serve: %w", err)
	}
	found := make(chan string, 1)
	go scanConnectionString(stdout, found)
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case cs := <-found:
		c.connStr = cs
	case <-c.exited:
		return nil, fmt.Errorf("busbar serve %s exited before printing a connection string (%v); its stderr:\n%s",
			strings.Join(args, " "), c.waitErr, c.stderr.String())
	case <-deadline.C:
		_ = c.kill()
		return nil, fmt.Errorf("busbar serve %s printed no connection string within %v; its stderr:\n%s",
			strings.Join(args, " "), startTimeout, c.stderr.String())
	}
	if err := waitForDial(amqpAddr, startTimeout, c.exited); err != nil {
		_ = c.kill()
		return nil, fmt.Errorf("busbar serve does not accept connections on %s: %v; its stderr:\n%s", amqpAddr, err, c.stderr.String())
	}
	return c, nil
}

// scanConnectionString reads the child's stdout and sends the line after
// "Connection string:" to found. It keeps draining stdout afterwards.
func scanConnectionString(r io.Reader, found chan<- string) {
	sc := bufio.NewScanner(r)
	next := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if os.Getenv(envVerbose) != "" {
			fmt.Fprintln(os.Stderr, "busbar stdout:", line)
		}
		switch {
		case next && line != "":
			select {
			case found <- line:
			default:
			}
			next = false
		case strings.HasPrefix(line, "Connection string:"):
			if rest := strings.TrimSpace(strings.TrimPrefix(line, "Connection string:")); rest != "" {
				select {
				case found <- rest:
				default:
				}
			} else {
				next = true
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// childEnv is this process's environment without BUSBAR_* variables, so a
// developer's settings cannot change the child under test.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BUSBAR_") {
			env = append(env, kv)
		}
	}
	return env
}

// stop sends SIGTERM and checks that the child exits with status 0 within
// timeout; past it the child is killed and an error returned.
func (c *child) stop(timeout time.Duration) error {
	select {
	case <-c.exited:
		return fmt.Errorf("busbar had already exited: %v", c.waitErr)
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.exited:
		if c.waitErr != nil {
			return fmt.Errorf("busbar did not exit cleanly after SIGTERM: %w", c.waitErr)
		}
		return nil
	case <-t.C:
		_ = c.kill()
		return fmt.Errorf("busbar did not exit within %v of SIGTERM (killed)", timeout)
	}
}

func (c *child) kill() error {
	err := c.cmd.Process.Kill()
	<-c.exited
	return err
}

// stderrTail returns the end of the child's log, for failure messages.
func (c *child) stderrTail() string {
	const max = 8 << 10
	s := c.stderr.String()
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return "busbar stderr:\n" + s
}

// freeAddr returns a loopback address with a port free at the time of the
// call.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitForDial polls addr until a TCP connection succeeds, the deadline
// passes or exited is closed.
func waitForDial(addr string, limit time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return errors.New("the process exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// connStringField returns the value of key in a connection string
// (case-insensitive key), or "".
func connStringField(cs, key string) string {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// replaceEndpoint returns cs with its Endpoint replaced.
func replaceEndpoint(cs, endpoint string) string {
	parts := strings.Split(cs, ";")
	for i, part := range parts {
		if k, _, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), "Endpoint") {
			parts[i] = "Endpoint=" + endpoint
		}
	}
	return strings.Join(parts, ";")
}

// replaceKey returns cs with its SharedAccessKey replaced.
func replaceKey(cs, key string) string {
	parts := strings.Split(cs, ";")
	for i, part := range parts {
		if k, _, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), "SharedAccessKey") {
			parts[i] = "SharedAccessKey=" + key
		}
	}
	return strings.Join(parts, ";")
}

// configureExternalAdmin decides how the admin client reaches an external
// broker's management API.
func configureExternalAdmin(cs string) error {
	if ep := os.Getenv(envAdminEndpoint); ep != "" {
		scheme, host, ok := strings.Cut(ep, "://")
		if !ok {
			return fmt.Errorf("%s=%q: want a URL such as http://localhost:5300", envAdminEndpoint, ep)
		}
		suite.adminCS = replaceEndpoint(cs, "sb://"+strings.TrimSuffix(host, "/"))
		suite.adminTLS = strings.EqualFold(scheme, "https")
		return nil
	}
	if strings.EqualFold(connStringField(cs, "UseDevelopmentEmulator"), "true") {
		ep := connStringField(cs, "Endpoint")
		host := strings.TrimSuffix(strings.TrimPrefix(ep, "sb://"), "/")
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		suite.adminCS = replaceEndpoint(cs, "sb://"+net.JoinHostPort(host, "5300"))
		return nil
	}
	suite.adminCS = cs
	suite.adminTLS = true
	return nil
}

// harnessReported makes only the first failing test print the harness
// error in full.
var harnessReported sync.Once

// harness starts the broker under test on first use, and fails t when the
// suite could not set it up.
func harness(t *testing.T) {
	t.Helper()
	suiteOnce.Do(func() { suite.err = setUp(suite.tmp) })
	if suite.err == nil {
		return
	}
	full := false
	harnessReported.Do(func() { full = true })
	if full {
		t.Fatalf("conformance harness: %v", suite.err)
	}
	first, _, _ := strings.Cut(suite.err.Error(), "\n")
	t.Fatalf("conformance harness: %s (in full in the first failing test's output)", first)
}
