// Package serveproc runs Busbar as a child process for the end-to-end test
// suites (conformance, crashtest): it builds ./cmd/busbar, starts
// `busbar serve` on free loopback ports over a data directory the caller
// chooses, reads the connection string the child prints on stdout, keeps
// the child's output for error messages, waits until the child accepts
// connections, and stops it with SIGTERM (requiring exit status 0 in time)
// or SIGKILL.
//
// It owns the child process and its output, nothing else: the data
// directory, the config file and the environment variables that choose a
// binary or an external broker belong to the callers. Every function
// returns errors instead of taking a *testing.T, and an error from Start
// carries the child's output.
package serveproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStartTimeout bounds Start when Options.StartTimeout is zero.
const DefaultStartTimeout = 30 * time.Second

// Build builds ./cmd/busbar of the module at moduleRoot into out, passing
// flags (for example "-race") to go build. ctx bounds the build.
func Build(ctx context.Context, moduleRoot, out string, flags ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building ./cmd/busbar: no go command on PATH: %w", err)
	}
	args := append([]string{"build", "-o", out}, flags...)
	args = append(args, "./cmd/busbar")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = moduleRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building ./cmd/busbar (go %s): %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// Options describes one `busbar serve` child.
type Options struct {
	// Binary is the busbar executable.
	Binary string
	// DataDir is the child's --data directory.
	DataDir string
	// Config is the child's --config file; empty: none.
	Config string
	// HTTP gives the child an HTTP listener on a free loopback port;
	// false runs it with --http - (no HTTP listener).
	HTTP bool
	// Args are further flags for `busbar serve`, after the ones above.
	Args []string
	// StartTimeout bounds Start twice over: until the connection string
	// is printed, then until the AMQP port accepts connections. Zero
	// means DefaultStartTimeout.
	StartTimeout time.Duration
	// LogLimit is how many bytes of the child's output Log keeps (the
	// latest); zero keeps everything.
	LogLimit int
	// Verbose, when set, receives a copy of the child's stderr and its
	// stdout lines prefixed with "busbar stdout: ".
	Verbose io.Writer
}

// Process is one running (or exited) `busbar serve`.
type Process struct {
	cmd      *exec.Cmd
	bin      string
	args     []string
	amqpAddr string
	httpAddr string
	connStr  string
	log      *logBuffer
	exited   chan struct{} // closed once the process has exited
	waitErr  error         // valid once exited is closed
}

// Start starts `busbar serve` as opts describes, with this process's
// environment minus its BUSBAR_* variables, and returns once the child
// has printed its connection string and its AMQP port accepts
// connections. On error the child is no longer running and the error
// holds its output.
func Start(opts Options) (*Process, error) {
	if opts.Binary == "" {
		return nil, errors.New("serveproc: no binary")
	}
	if opts.DataDir == "" {
		return nil, errors.New("serveproc: no data directory")
	}
	limit := opts.StartTimeout
	if limit <= 0 {
		limit = DefaultStartTimeout
	}
	amqpAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	httpFlag := "-"
	if opts.HTTP {
		if httpFlag, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--data", opts.DataDir, "--amqp", amqpAddr, "--http", httpFlag}
	if opts.Config != "" {
		args = append(args, "--config", opts.Config)
	}
	args = append(args, opts.Args...)

	p := &Process{
		bin:      opts.Binary,
		args:     args,
		amqpAddr: amqpAddr,
		log:      &logBuffer{max: opts.LogLimit},
		exited:   make(chan struct{}),
	}
	if opts.HTTP {
		p.httpAddr = httpFlag
	}
	p.cmd = exec.Command(opts.Binary, args...)
	p.cmd.Env = withoutBusbarEnv(os.Environ())
	dieWithParent(p.cmd)
	var errOut io.Writer = p.log
	if opts.Verbose != nil {
		errOut = io.MultiWriter(p.log, opts.Verbose)
	}
	p.cmd.Stderr = errOut
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", opts.Binary, err)
	}
	found := make(chan string, 1)
	go p.readStdout(stdout, found, opts.Verbose)
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case p.connStr = <-found:
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before printing a connection string (%v); its output:\n%s",
			p, p.waitErr, p.log.String())
	case <-timer.C:
		p.Close()
		return nil, fmt.Errorf("%s printed no connection string within %v (killed); its output:\n%s",
			p, limit, p.log.String())
	}
	if err := waitForDial(amqpAddr, limit, p.exited); err != nil {
		p.Close()
		return nil, fmt.Errorf("%s does not accept connections on %s: %v; its output:\n%s",
			p, amqpAddr, err, p.log.String())
	}
	return p, nil
}

// String names the child by its command line.
// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

func (p *Process) String() string {
	return p.bin + " " + strings.Join(p.args, " ")
}

// ConnectionString is the connection string the child printed.
func (p *Process) ConnectionString() string { return p.connStr }

// AMQPAddr is the loopback address of the child's AMQP listener.
func (p *Process) AMQPAddr() string { return p.amqpAddr }

// HTTPAddr is the loopback address of the child's HTTP listener, or ""
// when it has none.
func (p *Process) HTTPAddr() string { return p.httpAddr }

// Log returns the child's output kept so far (stderr, and the lines of its
// stdout), at most Options.LogLimit bytes when that is set. Without a
// limit, the length of an earlier Log is a valid offset into a later one.
func (p *Process) Log() string { return p.log.String() }

// LogTail returns at most the last max bytes of Log, marked with "…" when
// cut.
func (p *Process) LogTail(max int) string {
	s := p.log.String()
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}

// Exited is closed once the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM and requires the child to exit with status 0 within
// timeout. A child that had already exited is an error; one still running
// at timeout is killed, and that is an error too.
func (p *Process) Stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return fmt.Errorf("busbar had already exited: %v", p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("busbar did not exit cleanly after SIGTERM: %w", p.waitErr)
		}
		return nil
	case <-t.C:
		p.Close()
		return fmt.Errorf("busbar did not exit within %v of SIGTERM (killed)", timeout)
	}
}

// Kill sends SIGKILL and waits up to timeout for the child to be gone. A
// child that had already exited is an error: it was meant to be running.
func (p *Process) Kill(timeout time.Duration) error {
	select {
	case <-p.exited:
		return fmt.Errorf("busbar exited before it was killed: %v", p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("busbar still running %v after SIGKILL", timeout)
	}
}

// Close kills the child if it still runs and waits for it to exit; it is
// the cleanup for every path, and does nothing once the child has exited.
func (p *Process) Close() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// readStdout copies the child's stdout lines to its log (and to verbose)
// and sends found the first connection string: the text after
// "Connection string:" on the same line, or else the first later line
// that starts with "Endpoint=". It drains stdout to its end.
func (p *Process) readStdout(r io.Reader, found chan<- string, verbose io.Writer) {
	sc := bufio.NewScanner(r)
	next, sent := false, false
	send := func(cs string) {
		if !sent {
			found <- cs // found has room for one
			sent = true
		}
	}
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(p.log, line)
		if verbose != nil {
			fmt.Fprintln(verbose, "busbar stdout:", line)
		}
		trimmed := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(trimmed, "Connection string:"); ok {
			rest = strings.TrimSpace(rest)
			if isConnString(rest) {
				send(rest)
				continue
			}
			next = true
			continue
		}
		if next && isConnString(trimmed) {
			send(trimmed)
			next = false
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func isConnString(s string) bool {
	return strings.HasPrefix(s, "Endpoint=")
}

// FreeAddr returns a loopback address with a port nothing listens on at
// the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// waitForDial polls addr until a TCP connection succeeds, the limit
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

// withoutBusbarEnv drops BUSBAR_* variables, so that a developer's
// settings cannot change the child under test.
func withoutBusbarEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BUSBAR_") {
			out = append(out, kv)
		}
	}
	return out
}

// logBuffer keeps what is written to it, only the last max bytes when max
// is above zero; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; b.max > 0 && over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
