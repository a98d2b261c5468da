// Command peerbench runs the workloads of `busbar bench` against the brokers
// Busbar is compared with: RabbitMQ, NATS JetStream and a PostgreSQL queue.
// It takes the same workload flags and prints the same table or JSON.
//
//	peerbench --broker rabbitmq --url amqp://guest:guest@127.0.0.1:25673/ --producers 4 --consumers 4 --duration 30s
//	peerbench --broker nats --url nats://127.0.0.1:24222 --keys 10000 --per-key 10 --consumers 4
//	peerbench --broker postgres --url 'postgres://bench@127.0.0.1:25432/bench' --rate 1000 --duration 30s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/busbar-io/busbar/bench/peers"
	"github.com/busbar-io/busbar/benchcore"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	var (
		common     benchcore.CommonFlags
		broker     string
		url        string
		prefetch   int
		syncAlways bool
		poll       time.Duration
	)
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	common.Register(fs)
	fs.StringVar(&broker, "broker", "", "rabbitmq, nats or postgres")
	fs.StringVar(&url, "url", "", "the broker's URL (AMQP URL, NATS URL or PostgreSQL DSN)")
	fs.IntVar(&prefetch, "prefetch", 100, "consumer prefetch (QoS, pull buffer, rows per transaction)")
	fs.BoolVar(&syncAlways, "nats-sync-always", false, "label: the NATS server runs with sync_interval: always")
	fs.DurationVar(&poll, "poll", time.Millisecond, "PostgreSQL: how long an idle consumer waits before polling again")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	w, err := common.Workload()
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 2
	}
	procs, err := common.Processes()
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 2
	}
	var d benchcore.Driver
	switch broker {
	case "rabbitmq":
		d = &peers.RabbitMQ{URL: url, Prefetch: prefetch}
	case "nats":
		d = &peers.NATS{URL: url, Prefetch: prefetch, SyncAlways: syncAlways}
	case "postgres":
		d = &peers.Postgres{DSN: url, Prefetch: prefetch, Inflight: w.Inflight, PollInterval: poll}
	default:
		fmt.Fprintf(stderr, "peerbench: --broker %q: want rabbitmq, nats or postgres\n", broker)
		return 2
	}
	defer d.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := common.RunAndReport(ctx, w, d, procs, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 1
	}
	if !r.Verdict.OK {
		return 1
	}
	return 0
}
