package busbartest_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
)

func newClient(t *testing.T, srv *busbartest.Server) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestSendReceiveComplete(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("orders", broker.QueueProperties{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello"), ApplicationProperties: map[string]any{"n": int32(7)}}, nil); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		t.Fatalf("ReceiveMessages: %v", err)
	}
	if len(msgs) != 1 || string(msgs[0].Body) != "hello" || msgs[0].ApplicationProperties["n"] != int32(7) || msgs[0].DeliveryCount != 1 {
		t.Fatalf("received %+v", msgs)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	info, err := srv.Broker().GetQueue(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if info.Runtime.ActiveMessageCount != 0 {
		t.Fatalf("active messages after complete = %d, want 0", info.Runtime.ActiveMessageCount)
	}
}

// TestAdvanceFiresScheduledMessages shows the fake clock: a message scheduled
// three days out is delivered after Advance, without waiting.
func TestAdvanceFiresScheduledMessages(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	srv := busbartest.Start(t, busbartest.WithFakeClock(start), busbartest.WithQueue("timeouts", broker.QueueProperties{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv)
	s, err := c.NewSender("timeouts", nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("wake up")}}, start.Add(72*time.Hour), nil)
	if err != nil || len(seqs) != 1 {
		t.Fatalf("ScheduleMessages = %v, %v", seqs, err)
	}
	r, err := c.NewReceiverForQueue("timeouts", nil)
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateScheduled {
		t.Fatalf("before Advance, peek = %+v, %v; want one scheduled message", peeked, err)
	}
	srv.Advance(72 * time.Hour)
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "wake up" {
		t.Fatalf("after Advance, received %d messages, %v", len(msgs), err)
	}
	// As in Service Bus, the message takes a new sequence number when it
	// leaves the scheduled state.
	if *msgs[0].SequenceNumber <= seqs[0] {
		t.Fatalf("activated message has sequence number %d, want one after the scheduled %d", *msgs[0].SequenceNumber, seqs[0])
	}
	if !msgs[0].EnqueuedTime.Equal(start.Add(72 * time.Hour)) {
		t.Fatalf("EnqueuedTime = %v, want the scheduled time %v", msgs[0].EnqueuedTime, start.Add(72*time.Hour))
	}
}

// TestRestartKeepsAcknowledgedMessages restarts the broker on its data
// directory: a sent message survives, the client reconnects.
func TestRestartKeepsAcknowledgedMessages(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("durable", broker.QueueProperties{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv)
	s, err := c.NewSender("durable", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("kept")}, nil); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	c2 := newClient(t, srv)
	r, err := c2.NewReceiverForQueue("durable", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "kept" {
		t.Fatalf("after restart, received %+v, %v", msgs, err)
	}
}

// TestTokensSurviveAdvance: clients sign their tokens with the real clock,
// so jumping the broker's fake clock days ahead must not expire them.
func TestTokensSurviveAdvance(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithFakeClock(time.Now()), busbartest.WithQueue("q", broker.QueueProperties{}))
	srv.Advance(72 * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, srv)
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after three days")}, nil); err != nil {
		t.Fatalf("SendMessage after Advance(72h): %v", err)
	}
}
