package saga_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

// publishBatches sends msgs to the orchestration topic in batches.
func publishBatches(t testing.TB, c *azservicebus.Client, msgs []*azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender("orchestration", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(msgs); {
		err := batch.AddMessage(msgs[i], nil)
		if err == nil && batch.NumMessages() < 500 {
			i++
			continue
		}
		if err == nil {
			i++
		} else if err != azservicebus.ErrMessageTooLarge {
			t.Fatal(err)
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		if batch, err = s.NewMessageBatch(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if batch.NumMessages() > 0 {
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// sagaMessages returns the two messages of each of n sagas, shipped before
// paid for half of them.
func sagaMessages(n int) []*azservicebus.Message {
	msgs := make([]*azservicebus.Message, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("order-%05d", i)
		pay, ship := typed("PaymentAccepted", id, id+"-pay"), typed("ItemShipped", id, id+"-ship")
		if i%2 == 0 {
			msgs = append(msgs, pay, ship)
		} else {
			msgs = append(msgs, ship, pay)
		}
	}
	return msgs
}

// TestManyConcurrentSagas runs 10,000 sagas at once (2,000 under the race
// detector, 1,000 with -short), two hosts sharing them: each completes
// exactly once, none is lost, nothing is left on the broker.
func TestManyConcurrentSagas(t *testing.T) {
	n := 10000
	switch {
	case testing.Short():
		n = 1000
	case raceEnabled:
		n = 2000
	}
	srv := orchestration(t)
	c1 := busbartest.NewClient(t, srv.ConnectionString())
	c2 := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{})
	publishBatches(t, c1, sagaMessages(n))
	start := time.Now()
	opts := func() *processor.SessionOptions {
		return &processor.SessionOptions{MaxConcurrentSessions: 64, SessionIdleTimeout: 20 * time.Millisecond}
	}
	h1 := host(t, c1, sg, opts())
	h2 := host(t, c2, sg, opts())
	within(t, 10*time.Minute, "every saga to complete", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.completed) == n
	})
	elapsed := time.Since(start)
	h1.stop()
	h2.stop()
	t.Logf("%d sagas in %v: %.0f sagas/s", n, elapsed, float64(n)/elapsed.Seconds())
	for i := range n {
		id := fmt.Sprintf("order-%05d", i)
		if rec.completed[id] != 1 || rec.handled[id+"-pay"] != 1 || rec.handled[id+"-ship"] != 1 {
			t.Fatalf("saga %s: completed %d times, payment handled %d, shipping %d", id, rec.completed[id], rec.handled[id+"-pay"], rec.handled[id+"-ship"])
		}
	}
	if len(rec.compensated) != 0 {
		t.Fatalf("%d sagas compensated", len(rec.compensated))
	}
	if cnt := counts(t, srv); cnt.TotalMessageCount != 0 {
		t.Fatalf("%d messages left on the subscription", cnt.TotalMessageCount)
	}
}
