package serveproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envFake makes the test binary play a fake `busbar serve` (see fakeServe)
// instead of running the tests. It does not start with BUSBAR_, so Start
// passes it on to the child.
const envFake = "SERVEPROC_TEST_FAKE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFake); mode != "" {
		os.Exit(fakeServe(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeServe behaves as mode says, given the arguments Start passes:
//
//   - serve: listens on --amqp, prints a connection string, exits 0 on
//     SIGTERM;
//   - fail: writes an error to stderr and exits 3 at once;
//   - silent: prints nothing and waits;
//   - nolisten: prints a connection string but listens on nothing;
//   - badterm: as serve, but exits 1 on SIGTERM;
//   - ignoreterm: as serve, but ignores SIGTERM.
func fakeServe(mode string, args []string) int {
	flag := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	amqp := flag("--amqp")
	fmt.Fprintf(os.Stderr, "level=INFO msg=\"fake busbar\" mode=%s args=%q\n", mode, strings.Join(args, " "))
	if v, ok := os.LookupEnv("BUSBAR_SERVEPROC_LEAK"); ok {
		fmt.Fprintf(os.Stderr, "leaked BUSBAR_SERVEPROC_LEAK=%s\n", v)
	}
	term := make(chan os.Signal, 1)
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "busbar serve: unknown flag --frobnicate")
		return 3
	case "silent":
		time.Sleep(time.Hour)
		return 0
	case "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
	default:
		signal.Notify(term, syscall.SIGTERM)
	}
	if mode != "nolisten" {
		l, err := net.Listen("tcp", amqp)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			return 1
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	fmt.Println("Generated a root key, kept in somewhere.")
	fmt.Printf("Connection string:\n  %s\n", fakeConnString(amqp))
	<-term
	fmt.Fprintln(os.Stderr, "level=INFO msg=\"shutting down\"")
	if mode == "badterm" {
		return 1
	}
	return 0
}

func fakeConnString(amqp string) string {
	return "Endpoint=sb://" + amqp + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=k3y;UseDevelopmentEmulator=true"
}

// startFake starts the test binary as a fake busbar in mode.
func startFake(t *testing.T, mode string, opts Options) (*Process, error) {
	t.Helper()
	t.Setenv(envFake, mode)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.Binary = bin
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	p, err := Start(opts)
	if p != nil {
		t.Cleanup(p.Close)
	}
	return p, err
}

func TestStartAndStop(t *testing.T) {
	t.Setenv("BUSBAR_SERVEPROC_LEAK", "yes")
	p, err := startFake(t, "serve", Options{Args: []string{"--log-level", "debug"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.ConnectionString(), fakeConnString(p.AMQPAddr()); got != want {
		t.Errorf("connection string %q, want %q", got, want)
	}
	if !strings.HasPrefix(p.AMQPAddr(), "127.0.0.1:") {
		t.Errorf("AMQP address %q, want a loopback one", p.AMQPAddr())
	}
	if p.HTTPAddr() != "" {
		t.Errorf("HTTP address %q without Options.HTTP", p.HTTPAddr())
	}
	conn, err := net.DialTimeout("tcp", p.AMQPAddr(), time.Second)
	if err != nil {
		t.Fatalf("the child does not accept connections after Start: %v", err)
	}
	conn.Close()
	log := p.Log()
	for _, want := range []string{"--http -", "--amqp " + p.AMQPAddr(), "--log-level debug", "Connection string:", "Generated a root key"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "leaked") {
		t.Errorf("a BUSBAR_ variable reached the child:\n%s", log)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: %v\n%s", err, p.Log())
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited is open after Stop")
	}
	if !strings.Contains(p.Log(), "shutting down") {
		t.Errorf("the child did not see SIGTERM:\n%s", p.Log())
	}
	if err := p.Stop(time.Second); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("a second Stop returned %v, want an error saying it had already exited", err)
	}
	if err := p.Kill(time.Second); err == nil || !strings.Contains(err.Error(), "exited before it was killed") {
		t.Errorf("Kill after Stop returned %v, want an error", err)
	}
}

func TestHTTPListener(t *testing.T) {
	p, err := startFake(t, "serve", Options{HTTP: true, Config: "/some/Config.json"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.HTTPAddr(), "127.0.0.1:") || p.HTTPAddr() == p.AMQPAddr() {
		t.Errorf("HTTP address %q (AMQP %q)", p.HTTPAddr(), p.AMQPAddr())
	}
	for _, want := range []string{"--http " + p.HTTPAddr(), "--config /some/Config.json"} {
		if !strings.Contains(p.Log(), want) {
			t.Errorf("the log lacks %q:\n%s", want, p.Log())
		}
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestExitAtOnce(t *testing.T) {
	p, err := startFake(t, "fail", Options{})
	if err == nil {
		t.Fatalf("Start succeeded: %v", p)
	}
	for _, want := range []string{"exited before printing a connection string", "exit status 3", "unknown flag --frobnicate", "serve --data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

func TestNoConnectionString(t *testing.T) {
	began := time.Now()
	_, err := startFake(t, "silent", Options{StartTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "printed no connection string within 500ms") || !strings.Contains(err.Error(), "fake busbar") {
		t.Fatalf("Start returned %v, want a timeout error with the child's output", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("Start took %v with a 500ms limit", d)
	}
}

func TestNotAccepting(t *testing.T) {
	_, err := startFake(t, "nolisten", Options{StartTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "does not accept connections") {
		t.Fatalf("Start returned %v, want an error saying the child accepts no connections", err)
	}
}

func TestStopUnclean(t *testing.T) {
	p, err := startFake(t, "badterm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Stop(10 * time.Second)
	var exit *exec.ExitError
	if err == nil || !strings.Contains(err.Error(), "did not exit cleanly") || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("Stop returned %v, want an error carrying exit status 1", err)
	}
}

func TestStopTimeout(t *testing.T) {
	p, err := startFake(t, "ignoreterm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Stop(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not exit within 300ms of SIGTERM (killed)") {
		t.Fatalf("Stop returned %v, want a timeout error", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("the child still runs after Stop timed out")
	}
}

func TestKill(t *testing.T) {
	p, err := startFake(t, "ignoreterm", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited is open after Kill")
	}
	if err := p.Kill(time.Second); err == nil {
		t.Error("a second Kill succeeded")
	}
	p.Close() // harmless once exited
}

func TestMissingBinary(t *testing.T) {
	_, err := Start(Options{Binary: filepath.Join(t.TempDir(), "nonexistent"), DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("Start returned %v, want an error naming the binary", err)
	}
	if _, err := Start(Options{DataDir: t.TempDir()}); err == nil {
		t.Error("Start without a binary succeeded")
	}
	if _, err := Start(Options{Binary: "busbar"}); err == nil {
		t.Error("Start without a data directory succeeded")
	}
}

func TestLogLimit(t *testing.T) {
	b := &logBuffer{max: 8}
	fmt.Fprint(b, "0123456789")
	fmt.Fprint(b, "ab")
	if got := b.String(); got != "456789ab" {
		t.Errorf("limited log %q, want %q", got, "456789ab")
	}
	u := &logBuffer{}
	for range 100 {
		fmt.Fprint(u, "0123456789")
	}
	if n := len(u.String()); n != 1000 {
		t.Errorf("unlimited log kept %d bytes, want 1000", n)
	}
	p := &Process{log: u}
	if got := p.LogTail(4); got != "…6789" {
		t.Errorf("LogTail(4) = %q", got)
	}
}

func TestReadStdout(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"Connection string:\n  Endpoint=sb://a/;K=v\n", "Endpoint=sb://a/;K=v"},
		{"Connection string: Endpoint=sb://b/\n", "Endpoint=sb://b/"},
		{"Endpoint=sb://early/\nConnection string:\n\nnot one\n  Endpoint=sb://c/\nEndpoint=sb://d/\n", "Endpoint=sb://c/"},
		{"Connection string:\nnothing\n", ""},
	} {
		p := &Process{log: &logBuffer{}}
		found := make(chan string, 1)
		p.readStdout(strings.NewReader(tc.out), found, nil)
		got := ""
		select {
		case got = <-found:
		default:
		}
		if got != tc.want {
			t.Errorf("from %q: connection string %q, want %q", tc.out, got, tc.want)
		}
		if p.Log() != tc.out {
			t.Errorf("log %q, want the stdout %q", p.Log(), tc.out)
		}
	}
}

// TestRealBusbar builds ./cmd/busbar and runs it: start, SIGTERM, restart
// over the same data directory, SIGKILL, restart again.
func TestRealBusbar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds busbar")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "busbar")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Build(ctx, "../..", bin); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(tmp, "data")
	start := func() *Process {
		t.Helper()
		p, err := Start(Options{Binary: bin, DataDir: data, HTTP: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	p := start()
	cs := p.ConnectionString()
	if !strings.Contains(cs, p.AMQPAddr()) || !strings.Contains(cs, "SharedAccessKey=") {
		t.Errorf("connection string %q (AMQP on %s)", cs, p.AMQPAddr())
	}
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.LogTail(8<<10))
	}
	p = start()
	key := func(cs string) string {
		_, k, _ := strings.Cut(cs, "SharedAccessKey=")
		k, _, _ = strings.Cut(k, ";")
		return k
	}
	if key(p.ConnectionString()) != key(cs) {
		t.Errorf("the root key changed across a restart: %q, then %q", cs, p.ConnectionString())
	}
	if err := p.Kill(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = start()
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.LogTail(8<<10))
	}
}

func TestBuildError(t *testing.T) {
	err := Build(context.Background(), t.TempDir(), filepath.Join(t.TempDir(), "busbar"))
	if err == nil || !strings.Contains(err.Error(), "building ./cmd/busbar") {
		t.Fatalf("Build outside the module returned %v", err)
	}
}
