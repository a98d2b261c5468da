// Command shooting-range runs the game of the state-based consistent
// messaging article with package consistent, against Busbar (or Azure
// Service Bus) and PostgreSQL.
//
// Players send FireAt shots to the queue "fire-at", each with the game id
// in the application property GameId; the handler keeps each game's range
// (target position, attempts in the round) in PostgreSQL and publishes Hit
// or Missed to the queue "results"; after --max-attempts shots the target
// moves to a position drawn from the handler context's random source.
// Every --resend-every-th shot is sent twice, as an unreliable sender would:
// the duplicate publishes the very same result and counts once.
//
// One command starts PostgreSQL and `busbar serve` (declaring the queues
// from Config.json) and runs the game:
//
//	examples/shooting-range/run.sh
//
// or, against a running broker and database:
//
//	go run ./examples/shooting-range --connection-string "$BUSBAR_CONNECTION_STRING" --postgres "$DSN"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/processor"
	"github.com/jackc/pgx/v5/pgxpool"
)

// config is what a run needs.
type config struct {
	connStr     string
	postgres    string
	table       string
	games       int
	shots       int
	maxAttempts int
	resendEvery int
	wait        time.Duration
	onError     func(error) // sees the processor's errors (retried inputs)
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("shooting-range", flag.ExitOnError)
	fs.StringVar(&cfg.connStr, "connection-string", os.Getenv("BUSBAR_CONNECTION_STRING"), "Service Bus connection string")
	fs.StringVar(&cfg.postgres, "postgres", os.Getenv("BUSBAR_TEST_POSTGRES_DSN"), "PostgreSQL connection string")
	fs.StringVar(&cfg.table, "table", "shooting_range", "the table of state versions")
	fs.IntVar(&cfg.games, "games", 3, "games played at once")
	fs.IntVar(&cfg.shots, "shots", 20, "shots per game")
	fs.IntVar(&cfg.maxAttempts, "max-attempts", 5, "shots before the target moves")
	fs.IntVar(&cfg.resendEvery, "resend-every", 4, "send every n-th shot twice (0: never)")
	fs.DurationVar(&cfg.wait, "wait", time.Minute, "how long to wait for every result")
	_ = fs.Parse(os.Args[1:])
	cfg.onError = func(err error) { fmt.Fprintln(os.Stderr, "shooting-range: retrying:", err) }
	if cfg.connStr == "" || cfg.postgres == "" {
		fmt.Fprintln(os.Stderr, "shooting-range: --connection-string and --postgres are required (or run examples/shooting-range/run.sh)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shooting-range:", err)
		os.Exit(1)
	}
}

// run plays the games and prints a summary; it fails unless every shot got
// exactly one distinct result.
func run(ctx context.Context, cfg config, w io.Writer) error {
	pool, err := pgxpool.New(ctx, cfg.postgres)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := consistentpg.New(pool, &consistentpg.Options{Table: cfg.table})
	if err != nil {
		return err
	}
	if err := store.CreateTables(ctx); err != nil {
		return err
	}
	client, err := azservicebus.NewClientFromConnectionString(cfg.connStr, nil)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	runner, err := consistent.New(client, handler(cfg.maxAttempts), &consistent.Options{
		Store: store, IDProperty: "GameId", Destination: "results"})
	if err != nil {
		return err
	}
	defer runner.Close(context.Background())
	p, err := processor.New(client, processor.Queue("fire-at"), runner.Handle, &processor.Options{MaxConcurrentCalls: 4, OnError: cfg.onError})
	if err != nil {
		return err
	}
	go func() { _ = p.Run(ctx) }()
	defer p.Close(context.Background())

	// A run's games are new: their ids carry the start time.
	run := time.Now().UTC().Format("150405.000")
	games := make([]string, cfg.games)
	for g := range games {
		games[g] = fmt.Sprintf("game-%d@%s", g+1, run)
	}
	sent, err := fire(ctx, client, games, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sent %d shots (%d of them twice) to %d games\n", cfg.games*cfg.shots, sent-cfg.games*cfg.shots, cfg.games)

	hits, misses, err := collect(ctx, client, cfg.games*cfg.shots, cfg.wait)
	if err != nil {
		return err
	}
	for _, g := range games {
		ld, err := store.Load(ctx, consistent.Key{ID: g}, "")
		if err != nil {
			return err
		}
		var r ShootingRange
		if err := json.Unmarshal(ld.Latest.State, &r); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %d hits, %d missed; %d versions; target at %d after %d attempts this round\n",
			g, hits[g], misses[g], ld.Latest.Number, r.TargetPosition, r.NumberOfAttempts)
		if ld.Latest.Number != int64(cfg.shots) {
			return fmt.Errorf("%s: %d versions for %d shots", g, ld.Latest.Number, cfg.shots)
		}
	}
	fmt.Fprintln(w, "every shot counted once and has exactly one result")
	return nil
}

// fire sends every game's shots, every resendEvery-th one twice, and
// returns how many messages it sent.
func fire(ctx context.Context, client *azservicebus.Client, games []string, cfg config) (int, error) {
	s, err := client.NewSender("fire-at", nil)
	if err != nil {
		return 0, err
	}
	defer s.Close(context.Background())
	n := 0
	for i := range cfg.shots {
		for _, g := range games {
			body, _ := json.Marshal(FireAt{GameID: g, Position: (i * 37) % 100})
			id := fmt.Sprintf("%s/shot-%d", g, i+1)
			m := &azservicebus.Message{MessageID: &id, Body: body, ApplicationProperties: map[string]any{"GameId": g}}
			times := 1
			if cfg.resendEvery > 0 && (i+1)%cfg.resendEvery == 0 {
				times = 2
			}
			for range times {
				if err := s.SendMessage(ctx, m, nil); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}

// collect receives results until want distinct ones arrived; a result with
// a MessageId seen before must be identical to the first (the results queue
// has duplicate detection, so none should arrive).
func collect(ctx context.Context, client *azservicebus.Client, want int, wait time.Duration) (hits, misses map[string]int, err error) {
	r, err := client.NewReceiverForQueue("results", nil)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close(context.Background())
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]string{}
	hits, misses = map[string]int{}, map[string]int{}
	for len(seen) < want {
		msgs, err := r.ReceiveMessages(ctx, 50, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%d of %d results: %w", len(seen), want, err)
		}
		for _, m := range msgs {
			if prev, ok := seen[m.MessageID]; ok {
				if prev != string(m.Body) {
					return nil, nil, errors.New("two different results with MessageId " + m.MessageID)
				}
			} else {
				seen[m.MessageID] = string(m.Body)
				var res Result
				if err := json.Unmarshal(m.Body, &res); err != nil {
					return nil, nil, err
				}
				if m.Subject != nil && *m.Subject == "Hit" {
					hits[res.GameID]++
				} else {
					misses[res.GameID]++
				}
			}
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				return nil, nil, err
			}
		}
	}
	return hits, misses, nil
}
