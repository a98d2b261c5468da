package main

import (
	"strings"
	"testing"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
)

// Peek and receive on a session-enabled queue, by session id and next
// session, including the session "".
func TestPeekAndReceiveSessions(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("jobs", broker.QueueProperties{RequiresSession: true}))
	c.ok("send", "jobs", "--session", "a", "a1")
	c.ok("send", "jobs", "--session", "a", "a2")
	c.ok("send", "jobs", "--session", "b", "b1")

	if out := c.ok("peek", "jobs", "--session", "b", "--body-only"); out != "b1\n" {
		t.Fatalf("peek --session b printed %q, want b1", out)
	}
	out := c.ok("peek", "jobs", "--next-session", "--body-only")
	if out != "a1\na2\n" && out != "b1\n" {
		t.Fatalf("peek --next-session printed %q, want one session's messages", out)
	}
	if out := c.ok("receive", "jobs", "--session", "a", "--count", "2", "--body-only"); out != "a1\na2\n" {
		t.Fatalf("receive --session a printed %q", out)
	}
	if out := c.ok("peek", "jobs", "--session", "a", "--body-only"); out != "" {
		t.Fatalf("peek --session a after receiving printed %q, want nothing", out)
	}
	r := c.expect(exitUsage, "peek", "jobs", "--session", "a", "--next-session")
	if !strings.Contains(r.stderr, "give one") {
		t.Fatalf("both flags: %q", r.stderr)
	}
}

// An error from the broker is printed as a sentence with the Service Bus
// condition, not as the AMQP library's error struct.
func TestErrorsAreSentences(t *testing.T) {
	c := newCLI(t, busbartest.WithQueue("jobs", broker.QueueProperties{RequiresSession: true}))
	r := c.run("peek", "jobs")
	if r.code == exitOK {
		t.Fatalf("peek of a session-enabled queue without a session succeeded: %q", r.stdout)
	}
	if strings.Contains(r.stderr, "*Error{") || strings.Contains(r.stderr, "Info: map") {
		t.Fatalf("error printed as a struct: %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "(Service Bus condition amqp:not-allowed)") {
		t.Fatalf("error without its condition: %q", r.stderr)
	}
}
