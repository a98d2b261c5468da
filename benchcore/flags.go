package benchcore

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/busbar-io/busbar/internal/gctune"
)

// CommonFlags are the flags every benchmark command shares: the workload,
// output and CPU accounting. Register them on a FlagSet with Register.
type CommonFlags struct {
	W          Workload
	JSON       bool
	Quiet      bool
	BrokerPIDs string
	IdlePIDs   string
	// LatencyLog is a file for Options.LatencyLog ("" for none).
	LatencyLog string
	// GCHeadroomMB is the load generator's own garbage-collector headroom
	// (gctune), the broker's default unless set: -1 is Go's default.
	GCHeadroomMB int64
}

// Register adds the common flags to fs.
func (f *CommonFlags) Register(fs *flag.FlagSet) {
	w := &f.W
	fs.StringVar(&w.Name, "name", "", "label for the workload in reports, e.g. 4p4c")
	fs.IntVar(&w.Producers, "producers", 1, "number of producers (each its own connection)")
	fs.IntVar(&w.Consumers, "consumers", 1, "number of consumers (each its own connection)")
	fs.IntVar(&w.Inflight, "inflight", 1, "concurrent sends per producer, each waiting for its acknowledgement")
	fs.IntVar(&w.Batch, "batch", 1, "messages per send call")
	fs.IntVar(&w.Size, "size", 1024, fmt.Sprintf("message body size in bytes (at least %d)", HeaderSize))
	fs.Int64Var(&w.Count, "count", 0, "messages to send (default 10,000 when no --duration)")
	fs.DurationVar(&w.Duration, "duration", 0, "stop sending after this long, e.g. 30s")
	fs.Float64Var(&w.Rate, "rate", 0, "offered load in msg/s on a fixed schedule (latency from the intended send time); 0 = open throttle")
	fs.IntVar(&w.Keys, "keys", 0, "ordered keys (sessions on Busbar); with --per-key, a keyed run whose per-key FIFO is verified")
	fs.IntVar(&w.PerKey, "per-key", 10, "messages per key in a keyed run")
	fs.DurationVar(&w.DrainTimeout, "drain-timeout", 30*time.Second, "how long to wait for the last deliveries after sending ends")
	fs.BoolVar(&f.JSON, "json", false, "print the result as JSON instead of a table")
	fs.BoolVar(&f.Quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&f.BrokerPIDs, "broker-pid", "", "comma-separated pids of the broker's processes, to record its CPU use (with descendants)")
	fs.Int64Var(&f.GCHeadroomMB, "gc-headroom-mb", gctune.DefaultHeadroom>>20,
		"the load generator's garbage-collector headroom in MiB, as busbar serve's flag of that name (default the broker's; -1: Go's default, as does setting GOGC)")
	fs.StringVar(&f.LatencyLog, "latency-log", "", "write every first delivery's receive time (Unix ns) and latency (ns) to this file, a line each")
	fs.StringVar(&f.IdlePIDs, "wait-idle", "", "comma-separated pids: before the run, wait (at most 15 s) until they and their descendants use under 2% of a core, then write the system's dirty pages back (sync)")
}

// Workload returns the workload the flags describe, with defaults applied.
func (f *CommonFlags) Workload() (Workload, error) {
	w := f.W
	if w.Count == 0 && w.Duration == 0 && w.Keys == 0 {
		w.Count = 10000
	}
	return w.withDefaults()
}

// Processes are the pids the flags name: Broker (--broker-pid), whose CPU
// a run records, and Idle (--wait-idle), which must be idle before it.
type Processes struct {
	Broker, Idle []int
}

// Processes parses --broker-pid and --wait-idle; call it with the other
// flags, before connecting, so that a bad pid is a usage error.
func (f *CommonFlags) Processes() (Processes, error) {
	var p Processes
	var err error
	if p.Broker, err = parsePIDs("--broker-pid", f.BrokerPIDs); err != nil {
		return p, err
	}
	p.Idle, err = parsePIDs("--wait-idle", f.IdlePIDs)
	return p, err
}

func parsePIDs(flag, list string) ([]int, error) {
	var pids []int
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := strconv.Atoi(s)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%s: %q is not a pid", flag, s)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// RunAndReport runs w against d as the flags ask (progress lines on stderr
// unless --quiet) and prints the result on stdout: a table, or JSON with
// --json. The caller decides the exit status from the result's Verdict.
func (f *CommonFlags) RunAndReport(ctx context.Context, w Workload, d Driver, procs Processes, stdout, stderr io.Writer) (*Result, error) {
	// The load generator collects garbage as the broker does: with Go's
	// default, the SDK's client collected its small heap several times a
	// second, and on two cores those collections showed as broker latency.
	defer gctune.Start(gctune.Options{Headroom: gctune.HeadroomMiB(f.GCHeadroomMB)}).Stop()
	opts := Options{BrokerPIDs: procs.Broker, WaitIdle: procs.Idle}
	if !f.Quiet {
		opts.Progress = stderr
	}
	var logFile *os.File
	if f.LatencyLog != "" {
		var err error
		if logFile, err = os.Create(f.LatencyLog); err != nil {
			return nil, fmt.Errorf("--latency-log: %w", err)
		}
		opts.LatencyLog = logFile
	}
	r, err := Run(ctx, w, d, opts)
	if logFile != nil {
		if cerr := logFile.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("--latency-log: %w", cerr)
		}
	}
	if err != nil {
		return nil, err
	}
	if f.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	} else {
		r.WriteText(stdout)
	}
	return r, nil
}
