package amqptest_test

import (
	"context"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/amqptest"
)

func TestBrokerQueues(t *testing.T) {
	b, err := amqptest.Start(amqp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := goamqp.Dial(ctx, b.URL(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s.NewSender(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"1", "2"} {
		if err := snd.Send(ctx, goamqp.NewMessage([]byte(body)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Unsettled sends return once the broker accepted: both are queued,
	// on "a" only.
	if b.Len("a") != 2 || b.Len("b") != 0 {
		t.Fatalf("queue lengths a=%d b=%d", b.Len("a"), b.Len("b"))
	}
	got := b.Take("a")
	if len(got) != 2 || b.Len("a") != 0 {
		t.Fatalf("Take returned %d messages, left %d", len(got), b.Len("a"))
	}
	var m goamqp.Message
	if err := m.UnmarshalBinary(got[1]); err != nil || string(m.GetData()) != "2" {
		t.Fatalf("second message %q (%v)", m.GetData(), err)
	}
	// A message Put back is delivered to a consumer; rejecting it drops it.
	b.Put("a", got[0])
	r, err := s.NewReceiver(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(rm.GetData()) != "1" {
		t.Fatalf("received %q", rm.GetData())
	}
	if err := r.RejectMessage(ctx, rm, nil); err != nil {
		t.Fatal(err)
	}
	if b.Len("a") != 0 || b.Lost() != 0 {
		t.Fatalf("after reject: %d queued, %d lost", b.Len("a"), b.Lost())
	}
	if b.Conns() != 1 {
		t.Fatalf("Conns() = %d", b.Conns())
	}
}
