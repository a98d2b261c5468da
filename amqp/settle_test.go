package amqp_test

import (
	"errors"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/frames"
)

// manualSettler settles the outcomes of its links itself, handing each
// outcome to the test.
type manualSettler struct {
	*recorder
	outcomes chan amqp.Outcome
}

func (m manualSettler) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	s.SetManualSettlement()
	m.senders <- s
	return m, nil
}

func (m manualSettler) Outcome(_ *amqp.Sender, o amqp.Outcome) { m.outcomes <- o }

// With manual settlement a receiver in settle mode second waits for the
// application's answer, which may be another state than the peer's outcome.
func TestManualSettlement(t *testing.T) {
	rec := newRecorder()
	h := manualSettler{rec, make(chan amqp.Outcome, 8)}
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: h}))
	ctx := testCtx(t)
	c, err := goamqp.Dial(ctx, "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "src", &goamqp.ReceiverOptions{Credit: 10, SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	snd := recv(t, rec.senders)
	waitFor(t, func() bool { return snd.Credit() == 10 }, "the client's credit")
	var ids []uint32
	for _, body := range []string{"one", "two", "three"} {
		id, err := snd.TrySend(&amqp.Message{Tag: []byte(body), Payload: encode(t, body)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	settle := func(want uint32, state frames.DeliveryState) {
		t.Helper()
		o := recv(t, h.outcomes)
		if o.ID != want || o.Settled || o.Lost {
			t.Fatalf("outcome %+v, want unsettled delivery %d", o, want)
		}
		if _, ok := o.State.(*frames.Accepted); !ok {
			t.Fatalf("outcome state %T", o.State)
		}
		if err := snd.Settle(o.ID, state); err != nil {
			t.Fatal(err)
		}
	}

	// The client's accept returns only once the application answers.
	m1, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rcv.AcceptMessage(ctx, m1) }()
	settle(ids[0], &frames.Accepted{})
	if err := recv(t, done); err != nil {
		t.Fatalf("accept: %v", err)
	}

	// An answer with an error fails the client's call with it.
	m2, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- rcv.AcceptMessage(ctx, m2) }()
	settle(ids[1], &frames.Rejected{Error: amqp.NewError("com.microsoft:message-lock-lost", "lock lost")})
	var ae *goamqp.Error
	if err := recv(t, done); !errors.As(err, &ae) || ae.Condition != "com.microsoft:message-lock-lost" {
		t.Fatalf("accept answered with a rejection: %v", err)
	}

	// A delivery settles once.
	if err := snd.Settle(ids[1], &frames.Accepted{}); !errors.Is(err, amqp.ErrUnknownDelivery) {
		t.Fatalf("second settle: %v", err)
	}

	// One still unsettled when the link ends is reported lost.
	if _, err := rcv.Receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := rcv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, h.outcomes); o.ID != ids[2] || !o.Lost {
		t.Fatalf("outcome at detach %+v, want lost delivery %d", o, ids[2])
	}
	if err := snd.Settle(ids[2], &frames.Accepted{}); !errors.Is(err, amqp.ErrLinkClosed) {
		t.Fatalf("settle after detach: %v", err)
	}
}
