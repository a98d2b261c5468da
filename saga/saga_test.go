package saga_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/saga"
)

const order = "77777777-0000-0000-0000-000000000000"

func wantEvents(t *testing.T, rec *recorder, id string, want []string) {
	t.Helper()
	eventually(t, "the saga's transitions", func() bool { return len(rec.events(id)) >= len(want) })
	if got := rec.events(id); !slices.Equal(got, want) {
		t.Fatalf("transitions of %s:\n got %q\nwant %q", id, got, want)
	}
}

// TestHappyPath: both messages arrive; the saga completes, cancels its
// timeout and clears its state.
func TestHappyPath(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	h := host(t, c, orderSaga(rec, srv.Clock().Now, saga.Config{}), nil)
	publish(t, c, typed("PaymentAccepted", order, "pay-1"), typed("ItemShipped", order, "ship-1"))
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested", // PaymentAccepted
		"message handled", "timeout cancelled", "saga completed", // ItemShipped
	})
	h.stop()
	if st := sessionState(t, srv, order); st != nil {
		t.Fatalf("state after completion = %s, want none", st)
	}
	if n := counts(t, srv); n.TotalMessageCount != 0 {
		t.Fatalf("%d messages left (the timeout was not cancelled?)", n.TotalMessageCount)
	}
	if rec.completed[order] != 1 || len(rec.compensated) != 0 {
		t.Fatalf("completed %d times, compensated %v", rec.completed[order], rec.compensated)
	}
}

// TestOutOfOrder: ItemShipped first, PaymentAccepted 7 seconds later, as in
// the article: the saga waits through one timeout and completes.
func TestOutOfOrder(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	host(t, c, orderSaga(rec, srv.Clock().Now, saga.Config{}), nil)
	publish(t, c, typed("ItemShipped", order, "ship-1"))
	late := typed("PaymentAccepted", order, "pay-1")
	at := epoch.Add(7 * time.Second)
	late.ScheduledEnqueueTime = &at
	publish(t, c, late)
	eventually(t, "the first timeout", func() bool { return rec.count(order, "timeout requested") == 1 })
	srv.Advance(5 * time.Second)
	eventually(t, "the second timeout", func() bool { return rec.count(order, "timeout requested") == 2 })
	srv.Advance(2 * time.Second)
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested", // ItemShipped at 0s
		"timeout received", "timeout requested", // first timeout at 5s
		"message handled", "timeout cancelled", "saga completed", // PaymentAccepted at 7s
	})
	if rec.completed[order] != 1 || len(rec.compensated) != 0 {
		t.Fatalf("completed %d times, compensated %v", rec.completed[order], rec.compensated)
	}
}

// TestMissingMessageCompensates: ItemShipped never arrives; after three
// 5-second timeouts the saga is compensated and its state cleared.
func TestMissingMessageCompensates(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	h := host(t, c, orderSaga(rec, srv.Clock().Now, saga.Config{}), nil)
	publish(t, c, typed("PaymentAccepted", order, "pay-1"))
	for i := 1; i <= 3; i++ {
		eventually(t, "a timeout", func() bool { return rec.count(order, "timeout requested") == i })
		srv.Advance(5 * time.Second)
	}
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested",
		"timeout received", "timeout requested",
		"timeout received", "timeout requested",
		"timeout received", "saga compensated",
	})
	h.stop()
	if got := rec.compensated[order]; len(got) != 1 || !errors.Is(got[0], errMissing) {
		t.Fatalf("compensated with %v, want once with errMissing", got)
	}
	if st := sessionState(t, srv, order); st != nil {
		t.Fatalf("state after compensation = %s, want none", st)
	}
}

// TestTimeoutAfterCompletionIsDiscarded: the timeout is already delivered
// (so it cannot be cancelled) when the message completing the saga is
// handled; it then arrives and is discarded.
func TestTimeoutAfterCompletionIsDiscarded(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{})
	h := host(t, c, sg, nil)
	publish(t, c, typed("PaymentAccepted", order, "pay-1"))
	eventually(t, "the timeout", func() bool { return rec.count(order, "timeout requested") == 1 })
	h.stop()
	// With no host running, ItemShipped and then the timeout queue up in
	// the session.
	publish(t, c, typed("ItemShipped", order, "ship-1"))
	srv.Advance(5 * time.Second)
	host(t, c, sg, nil)
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested",
		"message handled", "timeout not cancelled; it will be discarded", "saga completed",
		"timeout for a missing saga discarded",
	})
	if rec.handled["ship-1"] != 1 || rec.completed[order] != 1 {
		t.Fatalf("handled %v, completed %v", rec.handled, rec.completed)
	}
}

type cancelState struct {
	Reminder string
}

// TestCancelTimeout: a handler cancels a timeout an earlier one requested;
// the scheduled message is cancelled on the broker and never delivered.
func TestCancelTimeout(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := saga.New[cancelState](saga.Config{Name: "reminder", TypeProperty: "MessageType", Logger: slog.New(rec), Now: srv.Clock().Now})
	sg.Starts("PaymentAccepted", func(c *saga.Context[cancelState], m *azservicebus.ReceivedMessage) error {
		id, err := c.RequestTimeout(time.Hour, map[string]string{"remind": "ship it"})
		c.State.Reminder = id
		return err
	})
	sg.Handle("ItemShipped", func(c *saga.Context[cancelState], m *azservicebus.ReceivedMessage) error {
		if got := c.PendingTimeouts(); len(got) != 1 || got[0] != c.State.Reminder {
			return fmt.Errorf("pending timeouts %v, want [%s]", got, c.State.Reminder)
		}
		c.CancelTimeout(c.State.Reminder)
		c.State.Reminder = ""
		return nil
	})
	sg.OnTimeout(func(c *saga.Context[cancelState], to saga.Timeout) error {
		return errors.New("the cancelled timeout was delivered")
	})
	h := host(t, c, sg, nil)
	publish(t, c, typed("PaymentAccepted", order, "pay-1"))
	eventually(t, "the timeout", func() bool { return rec.count(order, "timeout requested") == 1 })
	publish(t, c, typed("ItemShipped", order, "ship-1"))
	eventually(t, "the cancellation", func() bool { return rec.count(order, "timeout cancelled") == 1 })
	h.quiesce(t)
	srv.Advance(time.Hour)
	h.stop()
	wantEvents(t, rec, order, []string{
		"saga started", "message handled", "timeout requested",
		"message handled", "timeout cancelled",
	})
	if n := counts(t, srv); n.TotalMessageCount != 0 {
		t.Fatalf("%d messages left", n.TotalMessageCount)
	}
	var stored struct{ State cancelState }
	if err := json.Unmarshal(sessionState(t, srv, order), &stored); err != nil || stored.State.Reminder != "" {
		t.Fatalf("stored state %+v, %v", stored, err)
	}
}
