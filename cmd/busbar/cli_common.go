package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// exitNotFound is the exit code of a command whose entity, rule, session or
// message does not exist.
const exitNotFound = 3

// cliEnv is what a command reads and writes: the process's standard streams
// (tests substitute buffers) and the context that ends on Ctrl-C.
type cliEnv struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runCLI runs one administration command with the given streams and returns
// the process exit code.
func runCLI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env := &cliEnv{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	err := dispatch(env, args)
	return report(stderr, err)
}

// commandGroups maps a first word to the function handling it; run consults
// it for every command other than serve, version and help.
var commandGroups = map[string]func(*cliEnv, []string) error{
	"queue":        queueCommand,
	"topic":        topicCommand,
	"subscription": subscriptionCommand,
	"rule":         ruleCommand,
	"send":         sendCommand,
	"receive":      receiveCommand,
	"peek":         peekCommand,
	"dlq":          dlqCommand,
	"sessions":     sessionsCommand,
	"session":      sessionCommand,
	"scheduled":    scheduledCommand,
}

func dispatch(env *cliEnv, args []string) error {
	h, ok := commandGroups[args[0]]
	if !ok {
		return usageErrorf("unknown command %q", args[0])
	}
	return h(env, args[1:])
}

// report prints err (if any) to stderr and returns the exit code for it.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var h helpShown
	if errors.As(err, &h) {
		return exitOK
	}
	code := exitCodeOf(err)
	fmt.Fprintf(stderr, "busbar: %s\n", describe(err))
	var ue *cliError
	if errors.As(err, &ue) && ue.hint != "" {
		fmt.Fprintln(stderr, ue.hint)
	}
	return code
}

// detailRE finds the human part of a management API error body.
var detailRE = regexp.MustCompile(`(?s)<Detail>(.*?)</Detail>`)

// describe renders err on one line. The management API's errors come from
// azcore with the whole HTTP exchange; they are cut down to the status and
// the broker's explanation.
func describe(err error) string {
	msg := err.Error()
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) && amqpErr != nil {
		return strings.Replace(msg, amqpErr.Error(), amqpSentence(amqpErr), 1)
	}
	var respErr *azcore.ResponseError
	if !errors.As(err, &respErr) || respErr.RawResponse == nil {
		return msg
	}
	short := respErr.RawResponse.Status
	if body, rerr := io.ReadAll(respErr.RawResponse.Body); rerr == nil {
		if m := detailRE.FindSubmatch(body); m != nil {
			short += ": " + html.UnescapeString(string(m[1]))
		}
	}
	return strings.Replace(msg, respErr.Error(), short, 1)
}

// amqpSentence renders a broker's AMQP error as its description, a
// sentence, followed by the Service Bus condition, instead of the AMQP
// library's rendering of the error struct.
func amqpSentence(e *amqp.Error) string {
	d := strings.TrimSpace(e.Description)
	switch {
	case d == "":
		d = "The broker refused the operation."
	case !strings.HasSuffix(d, ".") && !strings.HasSuffix(d, "!") && !strings.HasSuffix(d, "?"):
		d += "."
	}
	return fmt.Sprintf("%s (Service Bus condition %s)", d, e.Condition)
}

// cliError carries an exit code (and, for usage errors, a hint naming the
// help to read) with an error.
type cliError struct {
	code int
	err  error
	hint string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

// helpShown is returned by a command whose --help was printed: exit 0.
type helpShown struct{}

func (helpShown) Error() string { return "help shown" }

func usageErrorf(format string, a ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func notFoundf(format string, a ...any) error {
	return &cliError{code: exitNotFound, err: fmt.Errorf(format, a...)}
}

// exitCodeOf maps an error to an exit code: usage and not-found errors of the
// CLI itself, the SDK's not-found code, and HTTP 404 from the management API
// give 2 and 3; everything else 1.
func exitCodeOf(err error) int {
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound {
		return exitNotFound
	}
	var respErr *azcore.ResponseError
	if errors.As(err, &respErr) && respErr.StatusCode == http.StatusNotFound {
		return exitNotFound
	}
	return exitError
}

// command describes one leaf command for its --help text.
type command struct {
	path     string // "queue create"
	args     string // "NAME [flags]"
	summary  string // one paragraph
	examples string // lines of examples, without indentation
}

// helpText renders the --help of c with the flags of fs.
func (c command) helpText(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage:\n  busbar %s %s\n", c.summary, c.path, c.args)
	if c.examples != "" {
		b.WriteString("\nExamples:\n")
		for _, l := range strings.Split(strings.TrimSpace(c.examples), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("\nFlags:\n")
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	b.WriteString("\nExit codes: 0 ok, 1 failure, 2 usage, 3 not found.\n")
	return b.String()
}

// newFlagSet returns a flag set for c that prints nothing by itself.
func newFlagSet(c command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses args against fs, allowing flags and positional arguments
// in any order ("queue create orders --sessions" as well as "queue create
// --sessions orders"); everything after "--" is positional. It prints the
// help to stdout and returns helpShown for -h/--help, and a usage error when
// the number of positional arguments is outside [minArgs, maxArgs] (maxArgs
// < 0: no limit).
func parseArgs(env *cliEnv, c command, fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(env.stdout, c.helpText(fs))
				return nil, helpShown{}
			}
			return nil, &cliError{code: exitUsage, err: fmt.Errorf("%s: %w", c.path, err), hint: fmt.Sprintf("Run 'busbar %s --help' for usage.", c.path)}
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		return nil, &cliError{code: exitUsage, err: fmt.Errorf("%s: wrong number of arguments (usage: busbar %s %s)", c.path, c.path, c.args),
			hint: fmt.Sprintf("Run 'busbar %s --help' for usage.", c.path)}
	}
	return pos, nil
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

// group is a command with subcommands ("queue create", "queue list" …).
type group struct {
	name    string
	summary string
	subs    []subcommand
}

type subcommand struct {
	name    string
	summary string
	run     func(*cliEnv, []string) error
}

func (g group) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage:\n", g.summary)
	for _, s := range g.subs {
		fmt.Fprintf(&b, "  busbar %s %-8s %s\n", g.name, s.name, s.summary)
	}
	fmt.Fprintf(&b, "\nRun 'busbar %s <command> --help' for flags and examples.\n", g.name)
	return b.String()
}

// dispatch runs the subcommand named by args[0].
func (g group) dispatch(env *cliEnv, args []string) error {
	if len(args) == 0 {
		return &cliError{code: exitUsage, err: fmt.Errorf("%s: missing command", g.name), hint: g.usage()}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(env.stdout, g.usage())
		return helpShown{}
	}
	for _, s := range g.subs {
		if s.name == args[0] {
			return s.run(env, args[1:])
		}
	}
	return &cliError{code: exitUsage, err: fmt.Errorf("%s: unknown command %q", g.name, args[0]), hint: g.usage()}
}

// output renders a command's result as a table or as JSON.
type output struct {
	w    io.Writer
	json bool
}

// emit writes v as indented JSON with --json, and otherwise calls table
// with a tab-aligned writer.
func (o output) emit(v any, table func(w io.Writer)) error {
	if o.json {
		enc := json.NewEncoder(o.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// row writes tab-separated cells and a newline.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}

// orDash renders an optional value, "-" when absent.
func orDash[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func ptr[T any](v T) *T { return &v }

// formatTime renders t in RFC 3339 UTC with milliseconds, "-" for nil.
func formatTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
