package consistent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/processor"
)

// exampleBroker starts an in-process Busbar with a session queue "shots"
// and a queue "results" for the examples (tests use busbartest).
func exampleBroker() (connStr string, stop func()) {
	connStr, stop, err := busbartest.StartExample(map[string]broker.QueueProperties{
		"shots": {RequiresSession: true}, "results": {}})
	if err != nil {
		panic(err)
	}
	return connStr, stop
}

// Range is the example's state: where the target is and how many shots
// were fired at it.
type Range struct {
	Target, Attempts int
}

// A handler for the shooting range of the state-based consistent messaging
// article, with its state in the session state (the session is the game):
// every shot publishes Hit or Missed, and the target moves, to a position
// drawn from the Context's random source, after three attempts. A shot sent
// twice publishes the same result, with the same MessageId, and counts once.
func Example() {
	connStr, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	client, _ := azservicebus.NewClientFromConnectionString(connStr, nil)
	defer client.Close(ctx)

	fire := func(c *consistent.Context, r Range, m *azservicebus.ReceivedMessage) (Range, []*azservicebus.Message, error) {
		var shot struct{ Position int }
		if err := json.Unmarshal(m.Body, &shot); err != nil {
			return r, nil, processor.Permanent(err)
		}
		result := "Missed"
		if shot.Position == r.Target {
			result = "Hit"
		}
		out := &azservicebus.Message{Subject: &result, Body: []byte(c.NewID())}
		if r.Attempts++; r.Attempts == 3 {
			r.Attempts, r.Target = 0, c.Random().IntN(100)
		}
		return r, []*azservicebus.Message{out}, nil
	}
	runner, err := consistent.New(client, fire, &consistent.Options{Store: consistent.SessionStateStore{}, Destination: "results"})
	if err != nil {
		panic(err)
	}
	defer runner.Close(ctx)
	p, _ := processor.NewSession(client, processor.Queue("shots"), runner.HandleSession,
		&processor.SessionOptions{SessionIdleTimeout: 100 * time.Millisecond})
	go func() { _ = p.Run(ctx) }()
	defer p.Close(ctx)

	sender, _ := client.NewSender("shots", nil)
	defer sender.Close(ctx)
	game := "game-1"
	for i, id := range []string{"shot-1", "shot-2", "shot-1"} { // shot-1 is sent twice
		body := fmt.Appendf(nil, `{"Position": %d}`, 10*i)
		_ = sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, SessionID: &game, Body: body}, nil)
	}

	receiver, _ := client.NewReceiverForQueue("results", nil)
	defer receiver.Close(ctx)
	ids := map[string]string{} // MessageId -> body
	for copies := 0; copies < 3; {
		msgs, err := receiver.ReceiveMessages(ctx, 3, nil)
		if err != nil {
			panic(err)
		}
		for _, m := range msgs {
			if prev, ok := ids[m.MessageID]; ok && prev == string(m.Body) {
				fmt.Println("a duplicate shot re-published the same result")
			}
			ids[m.MessageID] = string(m.Body)
			copies++
			_ = receiver.CompleteMessage(ctx, m, nil)
		}
	}
	fmt.Println(len(ids), "distinct results")
	// Output:
	// a duplicate shot re-published the same result
	// 2 distinct results
}
