// Command shipments tracks parcels across two regions with the Busbar
// toolkit's package geo, against Busbar or Azure Service Bus: the article
// "Geo-replicating Azure Service Bus with guaranteed ordering", with the
// out-of-order case closed and no sleeping loops.
//
// Each parcel's tracking number is a session; its statuses (label created,
// departed Seattle, …, delivered in Charlotte) are the session's messages,
// positions 1, 2, 3 …. Every status is sent to both regions' namespaces,
// the west copy --delay later. A consumer in each region records the
// statuses in PostgreSQL through the shared journal, each exactly once and
// in order. With --east-fails-after N the east consumer stops after N
// statuses, as if its region were lost: the west carries on from where the
// east stopped, without repeating or skipping a status.
//
// Start two brokers with the example's queue, a PostgreSQL, and run it:
//
//	busbar serve --config examples/shipments/Config.json --data /tmp/east --amqp 127.0.0.1:5672 --http - &
//	busbar serve --config examples/shipments/Config.json --data /tmp/west --amqp 127.0.0.1:5673 --http - &
//	go run ./examples/shipments --east 'Endpoint=sb://127.0.0.1:5672;…' --west 'Endpoint=sb://127.0.0.1:5673;…' \
//	    --journal 'postgres://user@127.0.0.1/db'
//
// (or set BUSBAR_EAST_CONNECTION_STRING, BUSBAR_WEST_CONNECTION_STRING and
// BUSBAR_GEO_JOURNAL). It creates and keeps the tables shipments_journal
// and shipment_statuses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/geo/geopg"
	"github.com/busbar-io/busbar/processor"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statuses are a parcel's way from Seattle to Charlotte, in order.
var statuses = []string{
	"Label created, Seattle WA",
	"Picked up, Seattle WA",
	"Departed facility, Seattle WA",
	"Arrived at hub, Chicago IL",
	"Departed hub, Chicago IL",
	"Out for delivery, Charlotte NC",
	"Delivered, Charlotte NC",
}

type config struct {
	east, west, journal string
	parcels             int
	delay               time.Duration
	eastFailsAfter      int
	granularity         geo.Granularity
	wait                time.Duration
	table               string // journal table; the statuses table is table + "_statuses"
}

func main() {
	var cfg config
	var perMessage bool
	fs := flag.NewFlagSet("shipments", flag.ExitOnError)
	fs.StringVar(&cfg.east, "east", os.Getenv("BUSBAR_EAST_CONNECTION_STRING"), "the east (primary) namespace's connection string")
	fs.StringVar(&cfg.west, "west", os.Getenv("BUSBAR_WEST_CONNECTION_STRING"), "the west (secondary) namespace's connection string")
	fs.StringVar(&cfg.journal, "journal", os.Getenv("BUSBAR_GEO_JOURNAL"), "the PostgreSQL of the journal and the statuses")
	fs.IntVar(&cfg.parcels, "parcels", 4, "how many parcels to track")
	fs.DurationVar(&cfg.delay, "delay", 2*time.Second, "how much later the west copy of each status becomes available")
	fs.IntVar(&cfg.eastFailsAfter, "east-fails-after", 9, "stop the east consumer after this many statuses (0: never)")
	fs.BoolVar(&perMessage, "per-message", false, "journal records per status instead of per parcel")
	fs.DurationVar(&cfg.wait, "wait", 2*time.Minute, "how long to wait for every status")
	_ = fs.Parse(os.Args[1:])
	if cfg.east == "" || cfg.west == "" || cfg.journal == "" {
		fmt.Fprintln(os.Stderr, "shipments: give --east, --west and --journal (or their environment variables)")
		os.Exit(2)
	}
	if perMessage {
		cfg.granularity = geo.PerMessage
	}
	cfg.table = "shipments_journal"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shipments:", err)
		os.Exit(1)
	}
}

// console prints lines from concurrent handlers.
type console struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *console) printf(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, format+"\n", a...)
}

// region is one namespace with its consumer.
type region struct {
	name     string
	client   *azservicebus.Client
	consumer *geo.Consumer
	stop     context.CancelFunc
	done     chan struct{}
}

func run(ctx context.Context, cfg config, w io.Writer) error {
	out := &console{w: w}
	pool, err := pgxpool.New(ctx, cfg.journal)
	if err != nil {
		return err
	}
	defer pool.Close()
	journal, err := geopg.New(pool, &geopg.Options{Table: cfg.table})
	if err != nil {
		return err
	}
	defer journal.Close()
	statusTable := pgx.Identifier{cfg.table + "_statuses"}.Sanitize()
	if err := journal.CreateTable(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+statusTable+` (
	seq bigserial PRIMARY KEY, tracking text NOT NULL, position bigint NOT NULL, status text NOT NULL, region text NOT NULL)`); err != nil {
		return err
	}
	run := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff) // tracking numbers unique to this run
	total := cfg.parcels * len(statuses)
	var mu sync.Mutex
	recorded := 0
	all := make(chan struct{})
	var east *region
	handler := func(ctx context.Context, wk *geo.Work) error {
		err := journal.CompleteWith(ctx, wk, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+statusTable+` (tracking, position, status, region) VALUES ($1, $2, $3, $4)`,
				wk.Session, wk.Position, string(wk.Message.Body), wk.Region)
			return err
		})
		if err != nil {
			return err
		}
		out.printf("[%s] %s %d/%d %s", wk.Region, wk.Session, wk.Position, len(statuses), wk.Message.Body)
		mu.Lock()
		defer mu.Unlock()
		recorded++
		if wk.Region == "east" && recorded == cfg.eastFailsAfter {
			out.printf("-- the east region is lost: its consumer stops")
			go east.stop()
		}
		if recorded == total {
			close(all)
		}
		return nil
	}
	var regions []*region
	for _, r := range []struct{ name, conn string }{{"east", cfg.east}, {"west", cfg.west}} {
		client, err := azservicebus.NewClientFromConnectionString(r.conn, nil)
		if err != nil {
			return err
		}
		defer client.Close(context.Background())
		c, err := geo.NewConsumer(client, processor.Queue("shipments"), journal, handler, &geo.ConsumerOptions{
			Region: r.name, Granularity: cfg.granularity, Lease: 5 * time.Second, SessionIdleTimeout: 2 * time.Second,
			MaxConcurrentSessions: cfg.parcels})
		if err != nil {
			return err
		}
		rctx, cancel := context.WithCancel(ctx)
		reg := &region{name: r.name, client: client, consumer: c, stop: cancel, done: make(chan struct{})}
		go func() { defer close(reg.done); _ = c.Run(rctx) }()
		regions = append(regions, reg)
	}
	east = regions[0]
	defer func() {
		for _, r := range regions {
			r.stop()
			<-r.done
		}
	}()

	es, err := regions[0].client.NewSender("shipments", nil)
	if err != nil {
		return err
	}
	ws, err := regions[1].client.NewSender("shipments", nil)
	if err != nil {
		return err
	}
	sender, err := geo.NewSender(es, ws, &geo.SenderOptions{Delay: cfg.delay})
	if err != nil {
		return err
	}
	// Statuses happen in order per parcel, parcels interleaved.
	for i, status := range statuses {
		for p := range cfg.parcels {
			tracking := fmt.Sprintf("1Z%s%04d", run, p+1)
			id := fmt.Sprintf("%s-%d", tracking, i+1)
			sent, err := sender.Send(ctx, &azservicebus.Message{MessageID: &id, SessionID: &tracking, Body: []byte(status)}, int64(i+1))
			if err != nil {
				return err
			}
			if !sent.Both() {
				out.printf("-- %s accepted by %v only", id, sent.Accepted())
			}
		}
	}
	// Wait until every status is in the record. The record, not the
	// handlers' count, says so: a handler stopped with its region may have
	// committed its status (and the journal its completion) and then seen
	// its context end, so it did not count it.
	deadline := time.After(cfg.wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n < total; {
		select {
		case <-all:
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("%d of %d statuses recorded after %v", n, total, cfg.wait)
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+statusTable+` WHERE tracking LIKE $1`, "1Z"+run+"%").Scan(&n); err != nil {
			return err
		}
	}
	// The record, per parcel, in the order the statuses were recorded.
	rows, err := pool.Query(ctx, `SELECT tracking, position, region FROM `+statusTable+` WHERE tracking LIKE $1 ORDER BY seq`, "1Z"+run+"%")
	if err != nil {
		return err
	}
	type rec struct {
		pos    int64
		region string
	}
	byParcel := map[string][]rec{}
	var order []string
	for rows.Next() {
		var t string
		var r rec
		if err := rows.Scan(&t, &r.pos, &r.region); err != nil {
			return err
		}
		if byParcel[t] == nil {
			order = append(order, t)
		}
		byParcel[t] = append(byParcel[t], r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var bad error
	for _, t := range order {
		line := t + ":"
		for i, r := range byParcel[t] {
			line += fmt.Sprintf(" %d(%s)", r.pos, r.region)
			if r.pos != int64(i+1) {
				bad = errors.Join(bad, fmt.Errorf("%s: status %d recorded as number %d", t, r.pos, i+1))
			}
		}
		out.printf("%s", line)
	}
	for _, r := range regions {
		s := r.consumer.Stats()
		out.printf("%s: %d processed, %d copies completed, %d waits (%d woken by the journal), %d journal reads, %d journal writes",
			r.name, s.Processed, s.Copies, s.Waits, s.Notified, s.JournalReads, s.JournalWrites)
	}
	if bad == nil {
		out.printf("every status recorded once, in order")
	}
	return bad
}
