// Command busbar is the Busbar message broker: `busbar serve` runs it, and
// the other commands administer a running broker.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `busbar — a message broker with Azure Service Bus semantics

Usage:
  busbar serve [flags]     run the broker (busbar serve --help for flags)
  busbar version           print the version
  busbar bench [flags]     measure a broker's throughput and latency

Entities (through the management API, port 5300):
  busbar queue        create|list|show|update|delete
  busbar topic        create|list|show|update|delete
  busbar subscription create|list|show|update|delete
  busbar rule         create|list|show|update|delete

Messages (through AMQP, with the official Go SDK):
  busbar send         send messages to a queue or topic
  busbar receive      receive (and complete or delete) messages
  busbar peek         look at messages without locking them
  busbar dlq          list|show|resubmit|purge dead-lettered messages
  busbar sessions     list the sessions of an entity
  busbar session      state get|set
  busbar scheduled    list|cancel scheduled messages
  busbar schedule     create|list|show|update|pause|resume|trigger|delete|run recurring schedules
  busbar job          list|show|failed|resubmit|purge|sweep pipeline jobs

The broker is found with --connection-string, $BUSBAR_CONNECTION_STRING or a
profile in ~/.config/busbar/profiles.json (--profile NAME); the management
endpoint is the AMQP host on port 5300 unless --admin-endpoint or
$BUSBAR_ADMIN_ENDPOINT says otherwise.

Exit codes: 0 ok, 1 failure, 2 usage, 3 not found.

Run 'busbar <command> --help' for a command's flags and examples.
`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes scripts can rely on.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad flags or arguments
)

func run(args []string, stdout, stderr io.Writer) int {
	return runWithInput(args, os.Stdin, stdout, stderr)
}

// runWithInput is run with an explicit standard input (send and session
// state set read it).
func runWithInput(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "busbar", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "schedule":
		return runScheduleCommand(args[1:], stdin, stdout, stderr)
	case "bench":
		// busbar bench is its own piece of work (bench.go).
		return benchCommand(args[1:], stdout, stderr)
	}
	if _, ok := commandGroups[args[0]]; ok {
		return runCLI(args, stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "busbar: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
