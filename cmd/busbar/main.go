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
	}
	fmt.Fprintf(stderr, "busbar: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
