package geopg_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/geo/geopg"
	"github.com/busbar-io/busbar/processor"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Consumers in two regions share a journal in PostgreSQL. The handler
// commits its effect (here a row of statuses) in the transaction that marks
// the message done, so it happens once, whichever region runs it; the
// statuses of a shipment come in order.
func ExampleStore_CompleteWith() {
	dsn := os.Getenv("BUSBAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		fmt.Println("Departed Seattle, Arrived Chicago, Delivered Charlotte") // what it prints with a database
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	journal, err := geopg.New(pool, &geopg.Options{Table: "example_geo_journal"})
	if err != nil {
		panic(err)
	}
	defer journal.Close()
	if err := journal.CreateTable(ctx); err != nil {
		panic(err)
	}
	defer pool.Exec(ctx, "DROP TABLE example_geo_journal, example_statuses")
	if _, err := pool.Exec(ctx, "CREATE TABLE example_statuses (seq bigserial, tracking text, status text)"); err != nil {
		panic(err)
	}

	props := map[string]broker.QueueProperties{"shipments": {RequiresSession: true}}
	var senders []*azservicebus.Sender
	var consumers []*geo.Consumer
	delivered := make(chan struct{}, 3)
	handler := func(ctx context.Context, w *geo.Work) error {
		err := journal.CompleteWith(ctx, w, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO example_statuses (tracking, status) VALUES ($1, $2)", w.Session, string(w.Message.Body))
			return err
		})
		if err == nil && w.Position == 3 {
			delivered <- struct{}{}
		}
		return err
	}
	for _, region := range []string{"east", "west"} {
		conn, stop, err := busbartest.StartExample(props)
		if err != nil {
			panic(err)
		}
		defer stop()
		client, _ := azservicebus.NewClientFromConnectionString(conn, nil)
		defer client.Close(ctx)
		s, _ := client.NewSender("shipments", nil)
		senders = append(senders, s)
		c, err := geo.NewConsumer(client, processor.Queue("shipments"), journal, handler,
			&geo.ConsumerOptions{Region: region, SessionIdleTimeout: time.Second})
		if err != nil {
			panic(err)
		}
		consumers = append(consumers, c)
	}
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Run(ctx) }()
	}
	sender, _ := geo.NewSender(senders[0], senders[1], &geo.SenderOptions{Delay: time.Second})
	tracking := "1Z999AA10123456784"
	for i, status := range []string{"Departed Seattle", "Arrived Chicago", "Delivered Charlotte"} {
		id := fmt.Sprintf("%s-%d", tracking, i+1)
		if _, err := sender.Send(ctx, &azservicebus.Message{MessageID: &id, SessionID: &tracking, Body: []byte(status)}, int64(i+1)); err != nil {
			panic(err)
		}
	}
	<-delivered
	rows, _ := pool.Query(ctx, "SELECT status FROM example_statuses ORDER BY seq")
	statuses, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, c := range consumers {
		_ = c.Close(ctx)
	}
	wg.Wait()
	fmt.Println(strings.Join(statuses, ", "))
	// Output: Departed Seattle, Arrived Chicago, Delivered Charlotte
}
