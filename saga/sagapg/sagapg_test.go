package sagapg_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
	"github.com/busbar-io/busbar/saga/sagapg"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newStore connects to the test PostgreSQL and returns a Store on a fresh
// table, dropped when the test ends.
func newStore(t *testing.T) (*sagapg.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool, "sagas_test_")
	st := sagapg.New(pool, table)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st, pool, table
}

type idOnly string

func (s idOnly) ID() string                             { return string(s) }
func (s idOnly) State(context.Context) ([]byte, error)  { return nil, errors.New("not used") }
func (s idOnly) SetState(context.Context, []byte) error { return errors.New("not used") }

// TestOptimisticConcurrency: each write must start from the version it
// read; a stale writer gets saga.ErrConflict.
func TestOptimisticConcurrency(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	s := idOnly("order-1")
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	rec := saga.Record{Saga: "order", ID: "order-1", Status: saga.StatusActive, Version: 1, Data: []byte(`{"state":{"n":1}}`), Updated: now}
	if err := st.Save(ctx, s, rec); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(ctx, s, rec); !errors.Is(err, saga.ErrConflict) {
		t.Fatalf("second insert: %v, want ErrConflict", err)
	}
	got, ok, err := st.Load(ctx, s, "order")
	if err != nil || !ok || got.Version != 1 || got.Status != saga.StatusActive || !got.Updated.Equal(now) || string(got.Data) != `{"state": {"n": 1}}` {
		t.Fatalf("Load = %+v (%s), %v, %v", got, got.Data, ok, err)
	}
	// Two writers both read version 1; the second one loses.
	a, b := rec, rec
	a.Version, a.Data = 2, []byte(`{"state":{"n":2}}`)
	b.Version, b.Data = 2, []byte(`{"state":{"n":20}}`)
	if err := st.Save(ctx, s, a); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(ctx, s, b); !errors.Is(err, saga.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	if err := st.Delete(ctx, s, "order", 1); !errors.Is(err, saga.ErrConflict) {
		t.Fatalf("stale delete: %v, want ErrConflict", err)
	}
	list, err := st.List(ctx, "order", saga.StatusActive, 10)
	if err != nil || len(list) != 1 || list[0].Version != 2 || string(list[0].State) != `{"n": 2}` {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := st.Delete(ctx, s, "order", 2); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Load(ctx, s, "order"); ok || err != nil {
		t.Fatalf("after delete: found %v, %v", ok, err)
	}
}

type order struct {
	PaymentReceived bool
	ItemShipped     bool
}

// TestSagaOnPostgres runs sagas with their state in PostgreSQL: the
// running and finished instances can be queried, and nothing is kept in
// the session state.
func TestSagaOnPostgres(t *testing.T) {
	st, pool, table := newStore(t)
	epoch := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	srv := busbartest.Start(t, busbartest.WithFakeClock(epoch),
		busbartest.WithQueue("orders", broker.QueueProperties{RequiresSession: true}))
	c, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	var mu sync.Mutex
	done := map[string]bool{}
	sg := saga.New[order](saga.Config{Name: "order", Store: st, Retention: 30 * time.Minute, Now: srv.Clock().Now})
	finish := func(c *saga.Context[order]) {
		if c.State.PaymentReceived && c.State.ItemShipped {
			c.Complete()
			mu.Lock()
			done[c.ID()] = true
			mu.Unlock()
		}
	}
	sg.Starts("PaymentAccepted", func(c *saga.Context[order], m *azservicebus.ReceivedMessage) error {
		c.State.PaymentReceived = true
		finish(c)
		return nil
	})
	sg.Starts("ItemShipped", func(c *saga.Context[order], m *azservicebus.ReceivedMessage) error {
		c.State.ItemShipped = true
		finish(c)
		return nil
	})
	p, err := sg.NewProcessor(c, processor.Queue("orders"), &processor.SessionOptions{SessionIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())

	sender, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(subject, session, id string) {
		if err := sender.SendMessage(ctx, &azservicebus.Message{Subject: &subject, SessionID: &session, MessageID: &id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	send("PaymentAccepted", "o-1", "o-1-pay")
	send("ItemShipped", "o-1", "o-1-ship")
	send("PaymentAccepted", "o-2", "o-2-pay")
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := st.Count(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		if n[saga.StatusCompleted] == 1 && n[saga.StatusActive] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %v", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	active, err := st.List(ctx, "order", saga.StatusActive, 10)
	if err != nil || len(active) != 1 || active[0].ID != "o-2" {
		t.Fatalf("active = %+v, %v", active, err)
	}
	var state order
	if err := json.Unmarshal(active[0].State, &state); err != nil || state != (order{PaymentReceived: true}) {
		t.Fatalf("o-2 state %s: %v", active[0].State, err)
	}
	// The state is queryable field by field.
	var waiting []string
	rows, err := pool.Query(ctx, "SELECT id FROM "+pgx.Identifier{table}.Sanitize()+
		" WHERE saga = 'order' AND status = 'active' AND NOT (data->'state'->>'ItemShipped')::boolean")
	if err != nil {
		t.Fatal(err)
	}
	waiting, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(waiting) != 1 || waiting[0] != "o-2" {
		t.Fatalf("waiting for shipping: %v, %v", waiting, err)
	}
	// After the retention, the finished saga's row is deleted.
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p2, err := sg.NewProcessor(c, processor.Queue("orders"), &processor.SessionOptions{SessionIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p2.Run(context.Background()) }()
	defer p2.Close(context.Background())
	// (Less than the two hours of the SDK's SAS tokens: the broker checks
	// their expiry on its fake clock.)
	srv.Advance(30 * time.Minute)
	for {
		n, err := st.Count(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		if n[saga.StatusCompleted] == 0 && n[saga.StatusActive] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the retention, counts %v", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
