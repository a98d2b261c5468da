package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/busbar-io/busbar/benchcore"
)

const benchHelp = `Benchmark a running broker over AMQP: producers and consumers, exactly-once
and per-session FIFO verified, throughput and send→receive latency reported.

Usage:
  busbar bench [flags]

The connection string comes from --connection-string or BUSBAR_CONNECTION_STRING.
With --create the bench makes its own queue through the management API
(plain HTTP on the endpoint's host, port 5300, unless --admin says otherwise)
and deletes it afterwards; otherwise it uses the queue named by --queue, which
must be empty and, for --keys, require sessions.

Examples:
  busbar bench --create --count 20000                      # 1 producer, 1 consumer
  busbar bench --create --producers 4 --consumers 4 --duration 30s --inflight 8
  busbar bench --create --keys 10000 --per-key 10 --consumers 4    # sessions, FIFO verified
  busbar bench --create --rate 1000 --duration 30s --producers 4 --inflight 16   # fixed load, corrected latency
  busbar bench --create --client raw --producers 4 --consumers 4 --inflight 16 --duration 30s   # the bench's own lean client
  busbar bench --create --client amqp --inflight 32        # go-amqp client
  busbar bench --create --json > result.json

Flags:
`

// benchCommand implements "busbar bench".
func benchCommand(args []string, stdout, stderr io.Writer) int {
	var (
		common benchcore.CommonFlags
		cfg    benchcore.BusbarConfig
		client string
		prof   string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchHelp)
		fs.PrintDefaults()
	}
	common.Register(fs)
	fs.StringVar(&cfg.ConnectionString, "connection-string", os.Getenv("BUSBAR_CONNECTION_STRING"),
		"Service Bus connection string [BUSBAR_CONNECTION_STRING]")
	fs.StringVar(&cfg.Queue, "queue", "", "queue to use (with --create: the name to create; default generated)")
	fs.BoolVar(&cfg.Create, "create", false, "create the queue for the run with the management API and delete it afterwards")
	fs.StringVar(&cfg.AdminAddr, "admin", "", "management API host:port for --create (default: the endpoint's host, port 5300)")
	fs.BoolVar(&cfg.AdminTLS, "admin-tls", false, "speak HTTPS to the management API")
	fs.StringVar(&client, "client", "sdk", "client: sdk (the official azservicebus SDK), amqp (go-amqp) or raw (the bench's own AMQP client: pre-encoded frames, pipelined, range settlement; measures the broker, not the client)")
	fs.BoolVar(&cfg.ReceiveAndDelete, "receive-and-delete", false, "receive-and-delete instead of peek-lock and complete")
	fs.BoolVar(&cfg.SettleFirst, "settle-first", false, "raw client, peek-lock: settled dispositions the broker does not answer (default: unsettled, each answered once the complete is applied, as the SDKs do); not with --keys")
	fs.IntVar(&cfg.Prefetch, "prefetch", 100, "most messages asked for per receive (link credit)")
	fs.DurationVar(&cfg.ReceiveWait, "receive-wait", time.Millisecond, "how long a receive keeps gathering after its first message (sdk client, queues without sessions: the SDK's TimeAfterFirstMessage)")
	fs.DurationVar(&cfg.SessionIdle, "session-idle", time.Second, "how long a session consumer waits on an empty session before taking the next")
	fs.IntVar(&cfg.SessionPrefetch, "session-prefetch", 1, "most messages asked for per receive on a session (sdk client; above 1 the SDK may release and reorder)")
	fs.IntVar(&cfg.ConcurrentSessions, "concurrent-sessions", 8, "sessions each consumer works on at once in keyed runs")
	fs.StringVar(&prof, "cpuprofile", "", "write a CPU profile of the bench process (the load generator) to this file")
	fs.StringVar(&cfg.BrokerVersion, "broker-label", "busbar", "broker name and version for reports")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "busbar bench: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if cfg.ConnectionString == "" {
		fmt.Fprintln(stderr, "busbar bench: give --connection-string or set BUSBAR_CONNECTION_STRING")
		return exitUsage
	}
	w, err := common.Workload()
	if err != nil {
		fmt.Fprintln(stderr, "busbar bench:", err)
		return exitUsage
	}
	procs, err := common.Processes()
	if err != nil {
		fmt.Fprintln(stderr, "busbar bench:", err)
		return exitUsage
	}
	var d benchcore.Driver
	switch client {
	case "sdk":
		d, err = benchcore.NewSDKDriver(cfg)
	case "amqp":
		d, err = benchcore.NewAMQPDriver(cfg)
	case "raw":
		d, err = benchcore.NewRawDriver(cfg)
	default:
		fmt.Fprintf(stderr, "busbar bench: --client %q: want sdk, amqp or raw\n", client)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "busbar bench:", err)
		return exitUsage
	}
	defer func() {
		if err := d.Close(); err != nil {
			fmt.Fprintln(stderr, "busbar bench: cleanup:", err)
		}
	}()

	if prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			fmt.Fprintln(stderr, "busbar bench:", err)
			return exitError
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "busbar bench:", err)
			return exitError
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := common.RunAndReport(ctx, w, d, procs, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "busbar bench:", err)
		return exitError
	}
	if !r.Verdict.OK {
		return exitError
	}
	return exitOK
}
