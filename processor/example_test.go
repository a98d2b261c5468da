package processor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
)

// exampleBroker starts an in-process Busbar with the given queues for the
// examples (tests use busbartest) and returns its connection string.
func exampleBroker(queues map[string]broker.QueueProperties) (connStr string, stop func()) {
	connStr, stop, err := busbartest.StartExample(queues)
	if err != nil {
		panic(err)
	}
	return connStr, stop
}

// A processor handles each message of a queue and completes it; Close
// waits for the handler in flight.
func Example() {
	connStr, stop := exampleBroker(map[string]broker.QueueProperties{"jobs": {}})
	defer stop()
	client, _ := azservicebus.NewClientFromConnectionString(connStr, nil)
	defer client.Close(context.Background())
	sender, _ := client.NewSender("jobs", nil)
	for _, job := range []string{"resize photo", "send invoice", "archive logs"} {
		_ = sender.SendMessage(context.Background(), &azservicebus.Message{Body: []byte(job)}, nil)
	}

	done := make(chan struct{}, 3)
	p, _ := processor.New(client, processor.Queue("jobs"), func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		fmt.Println("handled:", string(m.Body))
		done <- struct{}{}
		return nil // complete
	}, &processor.Options{
		MaxConcurrentCalls: 1,
		Retry:              processor.RetryPolicy{MaxAttempts: 5, Backoff: processor.ExponentialBackoff(time.Second, time.Minute)},
	})
	go func() { _ = p.Run(context.Background()) }()
	for range 3 {
		<-done
	}
	_ = p.Close(context.Background())
	// Output:
	// handled: resize photo
	// handled: send invoice
	// handled: archive logs
}

// A session processor hands each session to one handler at a time, in
// order, with the session's state.
func ExampleSessionProcessor() {
	connStr, stop := exampleBroker(map[string]broker.QueueProperties{"carts": {RequiresSession: true}})
	defer stop()
	client, _ := azservicebus.NewClientFromConnectionString(connStr, nil)
	defer client.Close(context.Background())
	sender, _ := client.NewSender("carts", nil)
	cart := "cart-42"
	for _, item := range []string{"apples", "pears", "plums"} {
		_ = sender.SendMessage(context.Background(), &azservicebus.Message{SessionID: &cart, Body: []byte(item)}, nil)
	}

	done := make(chan struct{})
	p, _ := processor.NewSession(client, processor.Queue("carts"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		items, err := s.State(ctx)
		if err != nil {
			return err
		}
		if len(items) > 0 {
			items = append(items, ", "...)
		}
		items = append(items, m.Body...)
		fmt.Printf("%s: %s\n", s.ID(), items)
		if string(m.Body) == "plums" {
			close(done)
		}
		return s.SetState(ctx, items)
	}, &processor.SessionOptions{MaxConcurrentSessions: 4, SessionIdleTimeout: time.Second})
	go func() { _ = p.Run(context.Background()) }()
	<-done
	_ = p.Close(context.Background())
	// Output:
	// cart-42: apples
	// cart-42: apples, pears
	// cart-42: apples, pears, plums
}
