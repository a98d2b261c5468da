package sagapg_test

import (
	"context"
	"fmt"
	"os"

	"github.com/busbar-io/busbar/saga"
	"github.com/busbar-io/busbar/saga/sagapg"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Order is the example saga's state.
type Order struct {
	PaymentReceived, ItemShipped bool
}

// Keep a saga's instances in PostgreSQL, then query them. (The example
// needs a database: it does nothing without BUSBAR_TEST_POSTGRES_DSN.)
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
	store := sagapg.New(pool, "order_sagas")
	if err := store.CreateTable(ctx); err != nil {
		panic(err)
	}
	sg := saga.New[Order](saga.Config{Name: "order", TypeProperty: "MessageType", Store: store})
	_ = sg // register handlers and run sg.NewProcessor as with the session-state store

	waiting, err := store.List(ctx, "order", saga.StatusActive, 100)
	if err != nil {
		panic(err)
	}
	for _, in := range waiting {
		fmt.Printf("%s (version %d, updated %s): %s\n", in.ID, in.Version, in.Updated, in.State)
	}
}
