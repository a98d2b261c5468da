package consistentpg_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/processor"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Counter is the example handler's state.
type Counter struct{ N int }

func count(c *consistent.Context, s Counter, m *azservicebus.ReceivedMessage) (Counter, []*azservicebus.Message, error) {
	s.N++
	body := fmt.Sprintf("input %d at %s", s.N, c.Now().Format(time.RFC3339))
	return s, []*azservicebus.Message{{Body: []byte(body)}}, nil
}

// Keep the state versions in PostgreSQL, with a retention window and the
// background clean-up, and run a handler on a queue. (The example needs a
// database and a broker, BUSBAR_TEST_POSTGRES_DSN and
// BUSBAR_CONNECTION_STRING.)
func Example() {
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := consistentpg.New(pool, &consistentpg.Options{Table: "example_counters",
		Retention: consistent.Retention{MaxVersions: 50, MaxAge: 24 * time.Hour}})
	if err != nil {
		panic(err)
	}
	if err := store.CreateTables(ctx); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, "DROP TABLE example_counters, example_counters_outbox")
	go store.PruneEvery(ctx, time.Hour, func(err error) { fmt.Println("prune:", err) })

	client, err := azservicebus.NewClientFromConnectionString(os.Getenv("BUSBAR_CONNECTION_STRING"), nil)
	if err != nil {
		panic(err)
	}
	runner, err := consistent.New(client, count, &consistent.Options{Store: store, IDProperty: "CounterId", Destination: "counted"})
	if err != nil {
		panic(err)
	}
	p, err := processor.New(client, processor.Queue("inputs"), runner.Handle, &processor.Options{MaxConcurrentCalls: 8})
	if err != nil {
		panic(err)
	}
	go p.Run(ctx)
	defer p.Close(ctx)
	// ... send inputs with the application property CounterId ...
}

// The outbox variant, for a handler that cannot be deterministic: the state
// and the outputs are stored in one statement, and a Relay publishes outputs
// that no host did. (It needs a database and a broker.)
func Example_outbox() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("BUSBAR_TEST_POSTGRES_DSN"))
	if err != nil {
		return
	}
	defer pool.Close()
	store, _ := consistentpg.New(pool, nil)
	client, err := azservicebus.NewClientFromConnectionString(os.Getenv("BUSBAR_CONNECTION_STRING"), nil)
	if err != nil {
		return
	}
	runner, _ := consistent.New(client, count, &consistent.Options{Store: store, Outbox: true, IDProperty: "CounterId", Destination: "counted"})
	relay, _ := consistent.NewRelay(client, store, &consistent.RelayOptions{Delay: time.Minute})
	go relay.Run(ctx)
	p, _ := processor.New(client, processor.Queue("inputs"), runner.Handle, nil)
	go p.Run(ctx)
}
