package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/busbartest"
)

// cli runs busbar commands in-process against one broker.
type cli struct {
	t    *testing.T
	srv  *busbartest.Server
	conn []string
}

// newCLI starts a broker with opts for the test.
func newCLI(t *testing.T, opts ...busbartest.Option) *cli {
	t.Helper()
	srv := busbartest.Start(t, opts...)
	return &cli{t: t, srv: srv, conn: []string{"--connection-string", srv.ConnectionString(), "--admin-endpoint", srv.HTTPAddr().String()}}
}

// result is the outcome of one command.
type result struct {
	stdout, stderr string
	code           int
}

// runIn runs args, with the connection flags appended, reading stdin.
func (c *cli) runIn(stdin string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := runWithInput(append(append([]string{}, args...), c.conn...), strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// run runs args with the connection flags appended and an empty stdin.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

// ok runs args and fails the test unless the exit code is 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("busbar %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// expect runs args and fails the test unless it exits with code.
func (c *cli) expect(code int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code {
		c.t.Fatalf("busbar %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}
