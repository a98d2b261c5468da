package consistent_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/consistent/consistenttest"
	"github.com/busbar-io/busbar/processor"
)

// benchGames is how many business ids (sessions) the benchmark's inputs
// are spread over, and how many handlers run at once.
const benchGames = 16

// BenchmarkHandle measures handler throughput against an in-process Busbar
// (busbartest, real clock): b.N inputs over 16 business ids, 16 handlers at
// once, one output each, with each store of package consistent and with
// hand-written SDK code doing the same work without the guarantee (state in
// memory, in a plain PostgreSQL row, or in the session state). It reports
// msgs/s and the CPU time of this process (handlers, SDK and the broker,
// not the PostgreSQL server) per message.
//
//	eval "$(scripts/postgres.sh start)"
//	go test -run '^$' -bench BenchmarkHandle -benchtime 5000x ./consistent/
func BenchmarkHandle(b *testing.B) {
	b.Run("consistent/postgres", func(b *testing.B) {
		store, _ := consistenttest.PostgresStore(b, consistentpg.Options{})
		benchConsistent(b, false, &consistent.Options{Store: store, IDProperty: "game"})
	})
	b.Run("consistent/postgres-sessions", func(b *testing.B) {
		store, _ := consistenttest.PostgresStore(b, consistentpg.Options{})
		benchConsistent(b, true, &consistent.Options{Store: store})
	})
	b.Run("consistent/outbox", func(b *testing.B) {
		store, _ := consistenttest.PostgresStore(b, consistentpg.Options{})
		benchConsistent(b, false, &consistent.Options{Store: store, IDProperty: "game", Outbox: true})
	})
	b.Run("consistent/sessionstate", func(b *testing.B) {
		benchConsistent(b, true, &consistent.Options{Store: consistent.SessionStateStore{}})
	})
	b.Run("sdk/memory", func(b *testing.B) {
		states := make([]atomic.Int64, benchGames)
		benchSDK(b, false, func(ctx context.Context, _ *processor.Session, m *azservicebus.ReceivedMessage, game int) (tally, error) {
			return tally{N: int(states[game].Add(1) - 1)}, nil
		})
	})
	b.Run("sdk/postgres", func(b *testing.B) {
		store, pool := consistenttest.PostgresStore(b, consistentpg.Options{})
		table := pgx.Identifier{store.Table() + "_naive"}.Sanitize()
		if _, err := pool.Exec(context.Background(), "CREATE TABLE "+table+" (id text PRIMARY KEY, state jsonb NOT NULL)"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+table) })
		upsert := "INSERT INTO " + table + ` (id, state) VALUES ($1, '{"n":1}') ON CONFLICT (id) DO UPDATE
SET state = jsonb_build_object('n', (` + table + `.state->>'n')::int + 1) RETURNING (state->>'n')::int - 1`
		benchSDK(b, false, func(ctx context.Context, _ *processor.Session, m *azservicebus.ReceivedMessage, game int) (tally, error) {
			var s tally
			err := pool.QueryRow(ctx, upsert, fmt.Sprint(game)).Scan(&s.N)
			return s, err
		})
	})
	b.Run("sdk/sessionstate", func(b *testing.B) {
		benchSDK(b, true, func(ctx context.Context, sess *processor.Session, m *azservicebus.ReceivedMessage, game int) (tally, error) {
			var s tally
			data, err := sess.State(ctx)
			if err != nil {
				return s, err
			}
			if len(data) > 0 {
				if err := json.Unmarshal(data, &s); err != nil {
					return s, err
				}
			}
			next, _ := json.Marshal(tally{N: s.N + 1})
			return s, sess.SetState(ctx, next)
		})
	})
}

// benchConsistent runs a consistent.Runner of tallyHandler(1), and reports
// how many lost races (ErrConflict, the input abandoned and handled again)
// there were per input.
func benchConsistent(b *testing.B, sessions bool, o *consistent.Options) {
	var conflicts atomic.Int64
	defer func() { b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/msg") }()
	benchRun(b, sessions, func(client *azservicebus.Client, done func()) (processor.Handler, processor.SessionHandler) {
		o.Destination = "out"
		r, err := consistent.New(client, tallyHandler(1), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close(context.Background()) })
		return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				err := r.Handle(ctx, m)
				if err == nil {
					done()
				} else if errors.Is(err, consistent.ErrConflict) {
					conflicts.Add(1)
				}
				return err
			}, func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
				err := r.HandleSession(ctx, s, m)
				if err == nil {
					done()
				} else if errors.Is(err, consistent.ErrConflict) {
					conflicts.Add(1)
				}
				return err
			}
	})
}

// benchSDK runs hand-written SDK code: update reads and writes the state,
// then the output the tally handler would publish is sent, with ids, random
// numbers and time taken from the environment.
func benchSDK(b *testing.B, sessions bool, update func(context.Context, *processor.Session, *azservicebus.ReceivedMessage, int) (tally, error)) {
	benchRun(b, sessions, func(client *azservicebus.Client, done func()) (processor.Handler, processor.SessionHandler) {
		sender, err := client.NewSender("out", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sender.Close(context.Background()) })
		handle := func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
			game, _ := m.ApplicationProperties["gameNo"].(int64)
			st, err := update(ctx, s, m, int(game))
			if err != nil {
				return err
			}
			id := rand.Text()
			out := &azservicebus.Message{MessageID: &id,
				Body: fmt.Appendf(nil, "%s#0 n=%d id=%s r=%d at=%s", m.MessageID, st.N, rand.Text(), time.Now().UnixNano()%(1<<30),
					time.Now().UTC().Format(time.RFC3339Nano)),
				ApplicationProperties: map[string]any{"n": int64(st.N), "input": m.MessageID, "i": int64(0)}}
			if err := sender.SendMessage(ctx, out, nil); err != nil {
				return err
			}
			done()
			return nil
		}
		return func(ctx context.Context, m *azservicebus.ReceivedMessage) error { return handle(ctx, nil, m) }, handle
	})
}

// benchRun pre-fills the input queue with b.N inputs, then times a
// processor with the handler of start until every input was handled.
func benchRun(b *testing.B, sessions bool, start func(client *azservicebus.Client, done func()) (processor.Handler, processor.SessionHandler)) {
	srv := busbartest.Start(b, busbartest.WithQueue("in", broker.QueueProperties{RequiresSession: sessions, MaxDeliveryCount: 100}),
		busbartest.WithQueue("out", broker.QueueProperties{}))
	client := busbartest.NewClient(b, srv.ConnectionString())
	s, err := client.NewSender("in", nil)
	if err != nil {
		b.Fatal(err)
	}
	for from := 0; from < b.N; from += 500 {
		batch, err := s.NewMessageBatch(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := from; i < min(from+500, b.N); i++ {
			id, game := fmt.Sprintf("m%d", i), fmt.Sprintf("g%d", i%benchGames)
			m := &azservicebus.Message{MessageID: &id, ApplicationProperties: map[string]any{"game": game, "gameNo": int64(i % benchGames)}}
			if sessions {
				m.SessionID = &game
			}
			if err := batch.AddMessage(m, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(context.Background(), batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	_ = s.Close(context.Background())

	var handled atomic.Int64
	finished := make(chan struct{})
	done := func() {
		if handled.Add(1) == int64(b.N) {
			close(finished)
		}
	}
	h, sh := start(client, done)
	var run func(context.Context) error
	var stop func(context.Context) error
	if sessions {
		p, err := processor.NewSession(client, processor.Queue("in"), sh, &processor.SessionOptions{MaxConcurrentSessions: benchGames,
			SessionIdleTimeout: 200 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		run, stop = p.Run, p.Close
	} else {
		p, err := processor.New(client, processor.Queue("in"), h, &processor.Options{MaxConcurrentCalls: benchGames})
		if err != nil {
			b.Fatal(err)
		}
		run, stop = p.Run, p.Close
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	began := time.Now()
	go func() { _ = run(context.Background()) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Minute):
		b.Fatalf("handled %d of %d inputs in 5 minutes", handled.Load(), b.N)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	_ = stop(context.Background())
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
