package main

import (
	"bytes"
	"strings"
	"testing"
)

// leafCommands lists every command other than serve.
var leafCommands = []string{
	"queue create", "queue list", "queue show", "queue update", "queue delete",
	"topic create", "topic list", "topic show", "topic update", "topic delete",
	"subscription create", "subscription list", "subscription show", "subscription update", "subscription delete",
	"rule create", "rule list", "rule show", "rule update", "rule delete",
	"send", "receive", "peek",
	"dlq list", "dlq show", "dlq resubmit", "dlq purge",
	"sessions list", "session state get", "session state set",
	"scheduled list", "scheduled cancel",
}

func runArgs(args ...string) result {
	var out, errb bytes.Buffer
	code := runWithInput(args, strings.NewReader(""), &out, &errb)
	return result{out.String(), errb.String(), code}
}

func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	for _, cmd := range leafCommands {
		args := append(strings.Fields(cmd), "--help")
		r := runArgs(args...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("busbar %s --help: exit %d, stderr %q", cmd, r.code, r.stderr)
			continue
		}
		for _, want := range []string{"Usage:\n  busbar " + cmd + " ", "Examples:\n  busbar " + cmd, "-connection-string", "-json", "Exit codes: 0 ok, 1 failure, 2 usage, 3 not found."} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("busbar %s --help lacks %q:\n%s", cmd, want, r.stdout)
			}
		}
	}
}

func TestGroupsListTheirCommands(t *testing.T) {
	for _, g := range []string{"queue", "topic", "subscription", "rule", "dlq", "sessions", "session", "session state", "scheduled"} {
		r := runArgs(append(strings.Fields(g), "--help")...)
		if r.code != exitOK || !strings.Contains(r.stdout, "busbar "+g+" ") {
			t.Errorf("busbar %s --help: exit %d\n%s", g, r.code, r.stdout)
		}
		r = runArgs(strings.Fields(g)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "missing command") {
			t.Errorf("busbar %s: exit %d, stderr %q; want a usage error", g, r.code, r.stderr)
		}
	}
	r := runArgs("--help")
	for _, cmd := range []string{"queue", "topic", "subscription", "rule", "send", "receive", "peek", "dlq", "sessions", "session", "scheduled", "bench"} {
		if !strings.Contains(r.stdout, "busbar "+cmd+" ") {
			t.Errorf("busbar --help does not mention %q", cmd)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	const cs = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
	for _, args := range [][]string{
		{"nosuch"},
		{"queue", "nosuch"},
		{"queue", "create", "--connection-string", cs},
		{"queue", "create", "a", "b", "--connection-string", cs},
		{"queue", "create", "a", "--no-such-flag"},
		{"queue", "create", "a", "--status", "Sleeping", "--connection-string", cs},
		{"queue", "create", "a", "--lock-duration", "soon", "--connection-string", cs},
		{"send", "q", "body", "--file", "x", "--connection-string", cs},
		{"send", "q", "body", "--property", "n:int=x", "--connection-string", cs},
		{"send", "q", "body", "--schedule", "tomorrow", "--connection-string", cs},
		{"send", "t/Subscriptions/s", "body", "--connection-string", cs},
		{"receive", "q", "--mode", "sometimes", "--connection-string", cs},
		{"receive", "q", "--session", "a", "--next-session", "--connection-string", cs},
		{"rule", "create", "t", "s", "r", "--sql", "1=1", "--correlation-id", "x", "--connection-string", cs},
		{"scheduled", "cancel", "q", "seven", "--connection-string", cs},
		{"session", "state", "set", "q", "s", "x", "--clear", "--connection-string", cs},
	} {
		r := runArgs(args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "busbar: ") {
			t.Errorf("busbar %s: exit %d, stderr %q; want exit 2", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// TestUnreachableBrokerIsAFailure checks exit code 1 when nothing listens.
func TestUnreachableBrokerIsAFailure(t *testing.T) {
	const cs = "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
	for _, args := range [][]string{
		{"queue", "list", "--connection-string", cs, "--admin-endpoint", "127.0.0.1:1", "--timeout", "10s"},
		{"peek", "orders", "--connection-string", cs, "--timeout", "10s"},
	} {
		r := runArgs(args...)
		if r.code != exitError || !strings.HasPrefix(r.stderr, "busbar: ") {
			t.Errorf("busbar %s: exit %d, stderr %q; want exit 1", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	c := command{path: "x", args: "A B"}
	fs := newFlagSet(c)
	b := fs.Bool("b", false, "")
	s := fs.String("s", "", "")
	env := &cliEnv{stdout: &bytes.Buffer{}}
	pos, err := parseArgs(env, c, fs, []string{"one", "-b", "two", "--s", "v", "--", "-three"}, 0, -1)
	if err != nil || strings.Join(pos, "|") != "one|two|-three" || !*b || *s != "v" {
		t.Fatalf("parseArgs = %q, %v; b=%v s=%q", pos, err, *b, *s)
	}
}
