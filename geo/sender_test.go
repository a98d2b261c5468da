package geo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/processor"
)

// TestSenderReportsWhichAccepted: both up, then each one down in turn,
// then both: the send succeeds while one accepts, says which, and fails
// with ErrNotSent only when neither does. The secondary copy is scheduled
// Delay later with the same ids and the position.
func TestSenderReportsWhichAccepted(t *testing.T) {
	east, west := newRegion(t, "east"), newRegion(t, "west")
	s, err := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: time.Hour, Straggler: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	send := func(pos int64) (geo.Sent, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return s.Send(ctx, message("ship", pos), pos)
	}
	if sent, err := send(1); err != nil || !sent.Both() {
		t.Fatalf("both up: %+v, %v", sent, err)
	}
	east.px.Cut()
	began := time.Now()
	if sent, err := send(2); err != nil || sent.Primary == nil || sent.Secondary != nil || len(sent.Accepted()) != 1 || sent.Accepted()[0] != "secondary" {
		t.Fatalf("primary down: %+v (accepted %v), %v", sent, sent.Accepted(), err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("a send with the primary down took %v", d)
	}
	west.px.Cut()
	if sent, err := send(3); !errors.Is(err, geo.ErrNotSent) || sent.Primary == nil || sent.Secondary == nil {
		t.Fatalf("both down: %+v, %v; want ErrNotSent", sent, err)
	}
	east.px.Restore("")
	if sent, err := send(4); err != nil || sent.Primary != nil || sent.Secondary == nil || sent.Accepted()[0] != "primary" {
		t.Fatalf("secondary down: %+v, %v", sent, err)
	}
	west.px.Restore("")

	// What the secondary holds: scheduled copies with the ids and position.
	r, err := west.client.AcceptSessionForQueue(context.Background(), queue, "ship", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	msgs, err := r.PeekMessages(context.Background(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("the secondary holds %d copies, want 2 (positions 1 and 2)", len(msgs))
	}
	for i, m := range msgs {
		pos, err := geo.Position(m)
		if err != nil || pos != int64(i+1) || m.MessageID != *message("ship", pos).MessageID {
			t.Errorf("copy %d: id %s position %d (%v)", i, m.MessageID, pos, err)
		}
		if m.State != azservicebus.MessageStateScheduled || m.ScheduledEnqueueTime == nil || time.Until(*m.ScheduledEnqueueTime) < 50*time.Minute {
			t.Errorf("copy %s: state %v scheduled for %v, want about an hour from now", m.MessageID, m.State, m.ScheduledEnqueueTime)
		}
	}
}

// TestSecondaryCopiesKeepTheirOrder: the copies of a session sent within
// one millisecond (here: on a clock that does not move) still become
// active in the secondary in the order of their positions, each scheduled
// after the one before. Service Bus keeps ScheduledEnqueueTime to the
// millisecond and says nothing of the order of copies due in the same one
// (Busbar activates them in send order, which the Sender does not count
// on); a copy of k behind k+1 would stall the secondary's consumer at k+1
// for good once the primary is gone (TestConsumerDiesMidMessage).
func TestSecondaryCopiesKeepTheirOrder(t *testing.T) {
	east, west := newRegion(t, "east"), newRegion(t, "west")
	frozen := clock.NewFake(time.Now())
	s, err := geo.NewSender(newSender(t, east.client), newSender(t, west.client), &geo.SenderOptions{Delay: 200 * time.Millisecond, Clock: frozen})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	sendAll(t, s, []string{"ship"}, 1, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := west.client.AcceptSessionForQueue(ctx, queue, "ship", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var got []int64
	var last time.Time
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatalf("after positions %v: %v", got, err)
		}
		for _, m := range msgs {
			pos, err := geo.Position(m)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pos)
			if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.After(last) {
				t.Errorf("position %d scheduled for %v, not after the copy before it (%v)", pos, m.ScheduledEnqueueTime, last)
			} else {
				last = *m.ScheduledEnqueueTime
			}
		}
	}
	for i, pos := range got {
		if pos != int64(i+1) {
			t.Fatalf("the secondary delivered positions %v, want 1..%d in order", got, n)
		}
	}
}

func TestBadInput(t *testing.T) {
	east := newRegion(t, "east")
	es := newSender(t, east.client)
	if _, err := geo.NewSender(es, nil, nil); err == nil {
		t.Error("NewSender without a secondary: no error")
	}
	s, _ := geo.NewSender(es, es, nil)
	id, sid := "m", "s"
	for name, m := range map[string]*azservicebus.Message{
		"no message id": {SessionID: &sid},
		"no session id": {MessageID: &id},
		"nil":           nil,
	} {
		if _, err := s.Send(context.Background(), m, 1); err == nil {
			t.Errorf("Send of a message with %s: no error", name)
		}
	}
	if _, err := s.Send(context.Background(), message("s", 0), 0); err == nil {
		t.Error("Send at position 0: no error")
	}
	h := func(context.Context, *geo.Work) error { return nil }
	w := newWorld(t)
	j := w.journal(t, nil)
	for name, o := range map[string]*geo.ConsumerOptions{
		"an unknown granularity": {Granularity: 7},
		"a negative lease":       {Lease: -time.Second},
	} {
		if _, err := geo.NewConsumer(east.client, processor.Queue(queue), j, h, o); err == nil {
			t.Errorf("NewConsumer with %s: no error", name)
		}
	}
	if _, err := geo.NewConsumer(east.client, processor.Queue(queue), nil, h, nil); err == nil {
		t.Error("NewConsumer without a journal: no error")
	}
	for _, v := range []any{"7", int64(0), 3.5} {
		m := &azservicebus.ReceivedMessage{MessageID: "x", ApplicationProperties: map[string]any{geo.PositionProperty: v}}
		if _, err := geo.Position(m); err == nil {
			t.Errorf("Position of %T %v: no error", v, v)
		}
	}
	if _, err := geo.Position(&azservicebus.ReceivedMessage{MessageID: "x"}); err == nil {
		t.Error("Position of a message without one: no error")
	}
}
