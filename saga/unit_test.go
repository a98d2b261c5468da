package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

// memSession is a session whose state is kept in memory.
type memSession struct {
	id    string
	state []byte
}

func (s *memSession) ID() string                                 { return s.id }
func (s *memSession) State(context.Context) ([]byte, error)      { return s.state, nil }
func (s *memSession) SetState(_ context.Context, b []byte) error { s.state = b; return nil }
func received(typ, id string) *azservicebus.ReceivedMessage {
	return &azservicebus.ReceivedMessage{MessageID: id, DeliveryCount: 1, ApplicationProperties: map[string]any{"MessageType": typ}}
}

func handle[S any](t *testing.T, sg *saga.Saga[S], s saga.Session, m *azservicebus.ReceivedMessage) error {
	t.Helper()
	return sg.HandleMessage(context.Background(), nil, "", s, m)
}

type cartV1 struct {
	Items int
}

type cartV2 struct {
	Items    int
	Currency string // added in schema version 1
}

// TestNewFieldDoesNotBreakSagasInFlight: a host with a state struct that
// gained a field reads instances stored by the old one; with Version and
// Migrate it upgrades them.
func TestNewFieldDoesNotBreakSagasInFlight(t *testing.T) {
	s := &memSession{id: "cart-1"}
	v1 := saga.New[cartV1](saga.Config{Name: "cart", TypeProperty: "MessageType"})
	v1.Starts("Add", func(c *saga.Context[cartV1], m *azservicebus.ReceivedMessage) error { c.State.Items++; return nil })
	if err := handle(t, v1, s, received("Add", "m1")); err != nil {
		t.Fatal(err)
	}

	// The new host, without a migration: the field starts at its zero value.
	var seen cartV2
	v2 := saga.New[cartV2](saga.Config{Name: "cart", TypeProperty: "MessageType"})
	v2.Starts("Add", func(c *saga.Context[cartV2], m *azservicebus.ReceivedMessage) error {
		seen = *c.State
		c.State.Items++
		return nil
	})
	if err := handle(t, v2, s, received("Add", "m2")); err != nil {
		t.Fatal(err)
	}
	if seen != (cartV2{Items: 1}) {
		t.Fatalf("v2 read %+v, want {Items:1}", seen)
	}

	// A new host at schema version 1 with a migration from version 0.
	v3 := saga.New[cartV2](saga.Config{Name: "cart", TypeProperty: "MessageType", Version: 1,
		Migrate: func(from int, st json.RawMessage) (json.RawMessage, error) {
			if from != 0 {
				return nil, errors.New("unexpected version")
			}
			var c cartV2
			if err := json.Unmarshal(st, &c); err != nil {
				return nil, err
			}
			c.Currency = "EUR"
			return json.Marshal(c)
		}})
	v3.Starts("Add", func(c *saga.Context[cartV2], m *azservicebus.ReceivedMessage) error {
		seen = *c.State
		c.State.Items++
		return nil
	})
	if err := handle(t, v3, s, received("Add", "m3")); err != nil {
		t.Fatal(err)
	}
	if seen != (cartV2{Items: 2, Currency: "EUR"}) {
		t.Fatalf("v3 read %+v, want {Items:2 Currency:EUR}", seen)
	}
	var stored struct {
		Schema  int
		Version int64
		Status  saga.Status
		State   cartV2
	}
	if err := json.Unmarshal(s.state, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Schema != 1 || stored.Version != 3 || stored.Status != saga.StatusActive || stored.State != (cartV2{Items: 3, Currency: "EUR"}) {
		t.Fatalf("stored %+v", stored)
	}

	// An old host must not overwrite a newer schema: it retries instead.
	err := handle(t, v1, s, received("Add", "m4"))
	if err == nil || processor.IsPermanent(err) {
		t.Fatalf("old host on a newer state: %v, want a retryable error", err)
	}
}

// TestMissingPolicies: a message that needs a running saga, for a session
// without one, under each policy; a type without a handler.
func TestMissingPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy    saga.MissingPolicy
		permanent bool
		err       error
	}{
		{saga.Discard, false, nil},
		{saga.DeadLetter, true, saga.ErrNotFound},
		{saga.Retry, false, saga.ErrNotFound},
	} {
		sg := saga.New[cartV1](saga.Config{Name: "cart", TypeProperty: "MessageType", OnMissing: tc.policy})
		called := false
		sg.Handle("Checkout", func(c *saga.Context[cartV1], m *azservicebus.ReceivedMessage) error { called = true; return nil })
		s := &memSession{id: "cart-1"}
		err := handle(t, sg, s, received("Checkout", "m1"))
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || processor.IsPermanent(err) != tc.permanent || called || s.state != nil {
			t.Errorf("policy %d: err %v (permanent %v), handler called %v, state %s", tc.policy, err, processor.IsPermanent(err), called, s.state)
		}
		err = handle(t, sg, s, received("Unknown", "m2"))
		if !errors.Is(err, saga.ErrNoHandler) || !processor.IsPermanent(err) {
			t.Errorf("unknown type: %v, want a permanent ErrNoHandler", err)
		}
		timeout := received("Timeout", "t1")
		timeout.ApplicationProperties[saga.PropTimeoutID] = "t1"
		if err := handle(t, sg, s, timeout); err != nil {
			t.Errorf("timeout of a missing saga: %v, want it discarded", err)
		}
	}
}

// TestHandlerErrorLeavesStateUntouched: a failing handler's changes are
// not saved, and the message is not remembered as handled.
func TestHandlerErrorLeavesStateUntouched(t *testing.T) {
	sg := saga.New[cartV1](saga.Config{Name: "cart", TypeProperty: "MessageType"})
	fail := true
	sg.Starts("Add", func(c *saga.Context[cartV1], m *azservicebus.ReceivedMessage) error {
		c.State.Items++
		if fail {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	s := &memSession{id: "cart-1"}
	if err := handle(t, sg, s, received("Add", "m1")); err == nil || s.state != nil {
		t.Fatalf("err %v, state %s: want an error and no state", err, s.state)
	}
	fail = false
	if err := handle(t, sg, s, received("Add", "m1")); err != nil {
		t.Fatal(err)
	}
	var stored struct{ State cartV1 }
	_ = json.Unmarshal(s.state, &stored)
	if stored.State.Items != 1 {
		t.Fatalf("items %d after a failure and a retry, want 1", stored.State.Items)
	}
}

// TestDeadlineCompensates: a saga still running when its deadline passes
// is compensated with ErrDeadlineExceeded; one that completes first has
// its deadline timeout cancelled.
func TestDeadlineCompensates(t *testing.T) {
	srv := orchestration(t)
	c := busbartest.NewClient(t, srv.ConnectionString())
	rec := newRecorder()
	sg := orderSaga(rec, srv.Clock().Now, saga.Config{Deadline: 3 * time.Second})
	h := host(t, c, sg, nil)
	publish(t, c, typed("PaymentAccepted", "slow", "pay-1"), typed("PaymentAccepted", "fast", "pay-2"), typed("ItemShipped", "fast", "ship-2"))
	eventually(t, "the fast saga", func() bool { return rec.count("fast", "saga completed") == 1 })
	eventually(t, "the slow saga's timeouts", func() bool { return rec.count("slow", "timeout requested") == 2 })
	h.quiesce(t)
	srv.Advance(3 * time.Second)
	wantEvents(t, rec, "slow", []string{
		"saga started", "message handled", "timeout requested", "timeout requested", // deadline, then the first 5s timeout
		"saga deadline exceeded", "timeout cancelled", "saga compensated",
	})
	wantEvents(t, rec, "fast", []string{
		"saga started", "message handled", "timeout requested", "timeout requested",
		"message handled", "timeout cancelled", "timeout cancelled", "saga completed",
	})
	if got := rec.compensated["slow"]; len(got) != 1 || !errors.Is(got[0], saga.ErrDeadlineExceeded) {
		t.Fatalf("slow compensated with %v", got)
	}
	h.stop()
	if n := counts(t, srv); n.TotalMessageCount != 0 {
		t.Fatalf("%d messages left", n.TotalMessageCount)
	}
}
