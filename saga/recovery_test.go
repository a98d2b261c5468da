package saga_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

// TestRedeliveredMessage: the host saves the saga's state but fails before
// completing the message, which the broker delivers again; the saga
// recognises it and does not run the handler twice. A second copy of a
// message (same MessageId) is ignored the same way.
func TestRedeliveredMessage(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{})
	h := sg.Handler(c, "orchestration")
	var crashed atomic.Bool
	var deliveries sync.Map
	p, err := processor.NewSession(c, processor.Subscription("orchestration", "orchestrator"),
		func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
			deliveries.Store(fmt.Sprintf("%s#%d", m.MessageID, m.DeliveryCount), true)
			if err := h(ctx, s, m); err != nil {
				return err
			}
			if m.MessageID == "pay-1" && crashed.CompareAndSwap(false, true) {
				return errors.New("the host died before completing the message")
			}
			return nil
		}, &processor.SessionOptions{SessionIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Run(context.Background()) }()
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	publish(t, c, typed("PaymentAccepted", order, "pay-1"), typed("PaymentAccepted", order, "pay-1"), typed("ItemShipped", order, "ship-1"))
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested", // pay-1, delivery 1
		"duplicate message ignored", // pay-1, delivery 2
		"duplicate message ignored", // the copy of pay-1
		"message handled", "timeout cancelled", "saga completed",
	})
	if _, ok := deliveries.Load("pay-1#2"); !ok {
		t.Fatal("pay-1 was not redelivered")
	}
	if rec.handled["pay-1"] != 1 || rec.handled["ship-1"] != 1 || rec.completed[order] != 1 {
		t.Fatalf("handled %v, completed %v", rec.handled, rec.completed)
	}
}

// TestRetentionRecognisesLateDuplicates: with Retention, a finished saga
// keeps a tombstone: a late copy of a message it handled is ignored, a new
// message for it goes through OnMissing, and the tombstone is deleted once
// Retention has passed.
func TestRetentionRecognisesLateDuplicates(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	h := host(t, c, orderSaga(rec, srv.Clock().Now, saga.Config{Retention: time.Hour}), nil)
	publish(t, c, typed("PaymentAccepted", order, "pay-1"), typed("ItemShipped", order, "ship-1"))
	eventually(t, "completion", func() bool { return rec.count(order, "saga completed") == 1 })
	publish(t, c, typed("ItemShipped", order, "ship-1"), typed("PaymentAccepted", order, "pay-2"))
	eventually(t, "the late messages", func() bool { return rec.count(order, "message for a finished saga discarded") == 1 })
	h.quiesce(t)
	srv.Advance(time.Hour)
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested",
		"message handled", "timeout requested", "timeout cancelled", "saga completed", // requests the cleanup timeout
		"duplicate message ignored",
		"message for a finished saga discarded",
		"finished saga deleted",
	})
	h.stop()
	if st := sessionState(t, srv, order); st != nil {
		t.Fatalf("state after retention = %s, want none", st)
	}
	if rec.completed[order] != 1 || rec.handled["ship-1"] != 1 || rec.handled["pay-2"] != 0 {
		t.Fatalf("handled %v, completed %v", rec.handled, rec.completed)
	}
}

// TestHostCrashMidSaga: the broker restarts (every connection of the first
// host breaks) between the saga's first message and the rest; a second host
// takes the session over and finishes the saga.
func TestHostCrashMidSaga(t *testing.T) {
	srv := orchestration(t)
	c1 := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{})
	h1 := host(t, c1, sg, &processor.SessionOptions{SessionIdleTimeout: time.Hour})
	publish(t, c1, typed("PaymentAccepted", order, "pay-1"))
	eventually(t, "the first timeout", func() bool { return rec.count(order, "timeout requested") == 1 })
	// "timeout requested" is logged before the state is saved: wait for
	// the state, so that the crash comes after it (a crash before it is
	// another case: host 2 would rightly start the saga again).
	eventually(t, "the saga's state saved", func() bool {
		st, err := srv.Broker().GetSessionState(context.Background(), "orchestration/Subscriptions/orchestrator", order)
		return err == nil && st != nil
	})
	srv.Restart()
	h1.kill()
	c2 := busbartest.NewClient(t, srv.ConnectionString())
	host(t, c2, sg, nil)
	srv.Advance(5 * time.Second)
	eventually(t, "the second timeout", func() bool { return rec.count(order, "timeout requested") == 2 })
	publish(t, c2, typed("ItemShipped", order, "ship-1"))
	// Host 1 may have died after saving the state but before completing
	// pay-1: host 2 then gets pay-1 again and recognises it.
	want := []string{
		"saga started", "message handled", "timeout requested", // host 1
		"timeout received", "timeout requested", // host 2
		"message handled", "timeout cancelled", "saga completed",
	}
	eventually(t, "completion", func() bool { return rec.count(order, "saga completed") == 1 })
	got := slices.DeleteFunc(rec.events(order), func(e string) bool { return e == "duplicate message ignored" })
	if !slices.Equal(got, want) {
		t.Fatalf("transitions:\n got %q\nwant %q", got, want)
	}
	if rec.handled["pay-1"] != 1 || rec.completed[order] != 1 {
		t.Fatalf("handled %v, completed %v", rec.handled, rec.completed)
	}
}

// TestHostStopsMidHandler: the first host is stopped hard while its handler
// runs, without completing the message; the second host handles it.
func TestHostStopsMidHandler(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{})
	inHandler := make(chan struct{})
	h := sg.Handler(c, "orchestration")
	p1, err := processor.NewSession(c, processor.Subscription("orchestration", "orchestrator"),
		func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
			if m.MessageID == "ship-1" {
				close(inHandler)
				<-ctx.Done() // hangs until the host is killed
				return ctx.Err()
			}
			return h(ctx, s, m)
		}, &processor.SessionOptions{SessionIdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p1.Run(context.Background()) }()
	publish(t, c, typed("PaymentAccepted", order, "pay-1"), typed("ItemShipped", order, "ship-1"))
	<-inHandler
	killed, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p1.Close(killed)
	<-done
	host(t, c, sg, nil)
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested",
		"message handled", "timeout cancelled", "saga completed",
	})
	if rec.handled["ship-1"] != 1 || rec.completed[order] != 1 {
		t.Fatalf("handled %v, completed %v", rec.handled, rec.completed)
	}
}
