package broker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store/memstore"
)

// A queue, a send, a peek-lock receive and a complete.
func Example() {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := broker.Open(ctx, memstore.New(), broker.Options{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if err := b.CreateQueue(ctx, "orders", broker.QueueProperties{}); err != nil {
		panic(err)
	}
	if err := b.Send(ctx, "orders", []*broker.Message{{MessageID: "o-1", Body: []byte("encoded AMQP message")}}); err != nil {
		panic(err)
	}
	got := make(chan *broker.Message, 1)
	c, err := b.NewConsumer(ctx, "ORDERS", broker.ConsumerOptions{Mode: broker.PeekLock, Deliver: func(m *broker.Message) { got <- m }})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.AddCredit(1)
	m := <-got
	fmt.Println(m.MessageID, m.SequenceNumber, m.DeliveryCount, m.LockedUntil.Sub(m.EnqueuedTime))
	fmt.Println(b.Complete(ctx, "orders", m.LockToken))
	// Output:
	// o-1 1 0 1m0s
	// <nil>
}

// Sessions: accept the next available session and keep its state.
func Example_sessions() {
	ctx := context.Background()
	b, _ := broker.Open(ctx, memstore.New(), broker.Options{Clock: clock.NewFake(time.Unix(0, 0))})
	defer b.Close()
	_ = b.CreateQueue(ctx, "steps", broker.QueueProperties{RequiresSession: true})
	_ = b.Send(ctx, "steps", []*broker.Message{
		{SessionID: "order-7", Body: []byte("reserve")},
		{SessionID: "order-7", Body: []byte("pay")},
	})
	var bodies []string
	c, err := b.AcceptNextSession(ctx, "steps", 0, broker.ConsumerOptions{Deliver: func(m *broker.Message) {
		bodies = append(bodies, string(m.Body))
	}})
	if err != nil {
		panic(err)
	}
	c.AddCredit(10)
	_ = b.SetSessionState(ctx, "steps", c.SessionID(), []byte("paid"))
	state, _ := b.GetSessionState(ctx, "steps", "order-7")
	fmt.Println(c.SessionID(), bodies, string(state))
	// Output: order-7 [reserve pay] paid
}
