package saga_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

// exampleBroker starts an in-process Busbar with a session queue "orders"
// for the examples (tests use busbartest) and returns its connection string.
func exampleBroker() (connStr string, stop func()) {
	connStr, stop, err := busbartest.StartExample(map[string]broker.QueueProperties{"orders": {RequiresSession: true}})
	if err != nil {
		panic(err)
	}
	return connStr, stop
}

// Shipment is the example saga's state.
type Shipment struct {
	Paid, Shipped bool
	Checks        int
}

// A saga waits for two messages in any order, checks again on a timeout
// while one is missing, and compensates when it never comes. The message
// type is the Subject; the saga instance is the session.
func Example() {
	connStr, stop := exampleBroker()
	defer stop()
	client, _ := azservicebus.NewClientFromConnectionString(connStr, nil)
	defer client.Close(context.Background())

	finished := make(chan struct{})
	sg := saga.New[Shipment](saga.Config{Name: "shipment"})
	check := func(c *saga.Context[Shipment]) error {
		switch {
		case c.State.Paid && c.State.Shipped:
			fmt.Println(c.ID(), "complete")
			c.Complete()
			close(finished)
		case c.State.Checks == 2:
			c.Compensate(errors.New("shipping never confirmed"))
		default:
			c.State.Checks++
			fmt.Println(c.ID(), "waiting, check", c.State.Checks)
			_, err := c.RequestTimeout(50*time.Millisecond, nil)
			return err
		}
		return nil
	}
	sg.Starts("PaymentAccepted", func(c *saga.Context[Shipment], m *azservicebus.ReceivedMessage) error {
		c.State.Paid = true
		return check(c)
	})
	sg.Starts("ItemShipped", func(c *saga.Context[Shipment], m *azservicebus.ReceivedMessage) error {
		c.State.Shipped = true
		return check(c)
	})
	sg.OnTimeout(func(c *saga.Context[Shipment], t saga.Timeout) error { return check(c) })
	sg.OnCompensate(func(c *saga.Context[Shipment], cause error) error {
		fmt.Println(c.ID(), "refunding:", cause)
		close(finished)
		return nil
	})

	p, _ := sg.NewProcessor(client, processor.Queue("orders"), &processor.SessionOptions{SessionIdleTimeout: time.Second})
	go func() { _ = p.Run(context.Background()) }()
	defer p.Close(context.Background())

	sender, _ := client.NewSender("orders", nil)
	order, subject := "order-1", "PaymentAccepted"
	_ = sender.SendMessage(context.Background(), &azservicebus.Message{SessionID: &order, Subject: &subject}, nil)
	<-finished
	// Output:
	// order-1 waiting, check 1
	// order-1 waiting, check 2
	// order-1 refunding: shipping never confirmed
}
