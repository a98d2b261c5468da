package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/server"
)

// TestAnyNodeServesAnyClient connects the official SDK to the node that
// does NOT serve a queue and uses it through link forwarding: sends, a
// peek-lock receiver completing, abandoning and dead-lettering, the
// dead-letter sub-queue, management operations (peek, renew lock,
// schedule and cancel) and sessions with state.
func TestAnyNodeServesAnyClient(t *testing.T) {
	url := clusterURL(t)
	n1 := startNode(t, url, "n1")
	n2 := startNode(t, url, "n2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sendOnly := broker.AuthorizationRule{KeyName: "sendonly", PrimaryKey: "c2VuZC1vbmx5LWtleS1mb3ItdGhlLWZvcndhcmQtdGVzdA==", Rights: []string{"Send"}}
	if err := n1.b().CreateQueue(ctx, "fq", broker.QueueProperties{LockDuration: 30 * time.Second, AuthorizationRules: []broker.AuthorizationRule{sendOnly}}); err != nil {
		t.Fatal(err)
	}
	if err := n1.b().CreateQueue(ctx, "fs", broker.QueueProperties{RequiresSession: true}); err != nil {
		t.Fatal(err)
	}
	if err := n1.b().CreateQueue(ctx, "fl", broker.QueueProperties{LockDuration: broker.MinLockDuration}); err != nil {
		t.Fatal(err)
	}
	if err := n1.b().CreateTopic(ctx, "ft", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := n1.b().CreateSubscription(ctx, "ft", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	settled(t, 4, n1, n2)
	// One client on a node that serves neither queue (or each client on
	// the other node of its queue's owner).
	far := func(t *testing.T, entity string) *azservicebus.Client {
		return busbartest.NewClient(t, notServing(t, entity, n1, n2).srv.ConnectionString())
	}

	// The client's claims are checked on the node it is connected to: the
	// owner sees only the node's root key.
	t.Run("claims", func(t *testing.T) {
		other := notServing(t, "fq", n1, n2)
		c := busbartest.NewClient(t, server.ConnectionString(other.srv.AMQPAddr().String(), sendOnly.KeyName, sendOnly.PrimaryKey))
		snd, err := c.NewSender("fq", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("by-send-only")}, nil); err != nil {
			t.Fatalf("send with a Send claim: %v", err)
		}
		rcv, err := c.NewReceiverForQueue("fq", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close(ctx)
		var sbErr *azservicebus.Error
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if ms, err := rcv.ReceiveMessages(rctx, 1, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("receive with only a Send claim: %d messages, %v; want unauthorized", len(ms), err)
		}
		if ms, err := rcv.PeekMessages(rctx, 1, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("peek with only a Send claim: %d messages, %v; want unauthorized", len(ms), err)
		}
		// Take the message back out for the next subtest.
		root := far(t, "fq")
		r, err := root.NewReceiverForQueue("fq", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		if b := bodies(receiveN(ctx, t, r, 1)); b[0] != "by-send-only" {
			t.Fatalf("received %v", b)
		}
	})

	t.Run("queue", func(t *testing.T) {
		c := far(t, "fq")
		snd, err := c.NewSender("fq", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		for i := range 4 {
			if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint("m", i)), ApplicationProperties: map[string]any{"i": int64(i)}}, nil); err != nil {
				t.Fatalf("send %d through forwarding: %v", i, err)
			}
		}
		// Scheduled: one cancelled, one fires.
		seqs, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("cancelled")}, {Body: []byte("scheduled")}}, time.Now().Add(time.Second), nil)
		if err != nil || len(seqs) != 2 {
			t.Fatalf("schedule: %v %v", seqs, err)
		}
		if err := snd.CancelScheduledMessages(ctx, seqs[:1], nil); err != nil {
			t.Fatalf("cancel scheduled: %v", err)
		}

		rcv, err := c.NewReceiverForQueue("fq", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close(ctx)
		peeked, err := rcv.PeekMessages(ctx, 10, nil)
		if err != nil {
			t.Fatalf("peek: %v", err)
		}
		if got := bodies(peeked); !slices.Equal(got, []string{"m0", "m1", "m2", "m3", "scheduled"}) {
			t.Fatalf("peeked %v", got)
		}
		got := receiveN(ctx, t, rcv, 4)
		if b := bodies(got); !slices.Equal(b, []string{"m0", "m1", "m2", "m3"}) {
			t.Fatalf("received %v", b)
		}
		if got[0].ApplicationProperties["i"] != int64(0) || got[0].LockToken == [16]byte{} {
			t.Fatalf("message 0: properties %v lock token %x", got[0].ApplicationProperties, got[0].LockToken)
		}
		before := *got[1].LockedUntil
		if err := rcv.RenewMessageLock(ctx, got[1], nil); err != nil {
			t.Fatalf("renew lock: %v", err)
		}
		if got[1].LockedUntil.Before(before) || time.Until(*got[1].LockedUntil) < 20*time.Second {
			t.Fatalf("renewed lock until %v, was %v", got[1].LockedUntil, before)
		}
		if err := rcv.CompleteMessage(ctx, got[0], nil); err != nil {
			t.Fatalf("complete: %v", err)
		}
		if err := rcv.AbandonMessage(ctx, got[1], nil); err != nil {
			t.Fatalf("abandon: %v", err)
		}
		if err := rcv.DeadLetterMessage(ctx, got[2], &azservicebus.DeadLetterOptions{Reason: to("bad")}); err != nil {
			t.Fatalf("dead-letter: %v", err)
		}
		if err := rcv.CompleteMessage(ctx, got[3], nil); err != nil {
			t.Fatal(err)
		}
		again := receiveN(ctx, t, rcv, 2)
		slices.SortFunc(again, func(a, b *azservicebus.ReceivedMessage) int { return int(*a.SequenceNumber - *b.SequenceNumber) })
		if b := bodies(again); !slices.Equal(b, []string{"m1", "scheduled"}) || again[0].DeliveryCount != 2 || again[1].DeliveryCount != 1 {
			t.Fatalf("after abandon and schedule: %v, delivery counts %d %d", b, again[0].DeliveryCount, again[1].DeliveryCount)
		}
		for _, m := range again {
			if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		dlq, err := c.NewReceiverForQueue("fq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer dlq.Close(ctx)
		dl := receiveN(ctx, t, dlq, 1)
		if string(dl[0].Body) != "m2" || dl[0].DeadLetterReason == nil || *dl[0].DeadLetterReason != "bad" {
			t.Fatalf("dead letter: %q reason %v", dl[0].Body, dl[0].DeadLetterReason)
		}
		if left, err := rcv.PeekMessages(ctx, 10, nil); err != nil || len(left) != 0 {
			t.Fatalf("queue not empty: %d messages, %v", len(left), err)
		}
	})

	// The broker's verdict on a settlement comes back through the relay:
	// completing a message whose lock expired fails with lock-lost.
	t.Run("verdict", func(t *testing.T) {
		c := far(t, "fl")
		snd, err := c.NewSender("fl", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
			t.Fatal(err)
		}
		rcv, err := c.NewReceiverForQueue("fl", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close(ctx)
		m := receiveN(ctx, t, rcv, 1)[0]
		// LockedUntil comes as an AMQP timestamp, in whole milliseconds
		// and truncated, while the broker's lock runs to the nanosecond:
		// up to 1 ms past LockedUntil, completing still succeeds. From
		// LockedUntil + 1 ms the lock has expired.
		expired := m.LockedUntil.Add(time.Millisecond)
		poll.Until(t, 20*time.Second, "the lock to expire", func() bool { return !time.Now().Before(expired) })
		// The message is still there, to be received again: only its lock
		// is gone.
		ms, err := rcv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: m.SequenceNumber})
		if err != nil || len(ms) != 1 || *ms[0].SequenceNumber != *m.SequenceNumber || ms[0].State != azservicebus.MessageStateActive {
			t.Fatalf("peek after the lock expired: %d messages, %v; want message %d, active", len(ms), err, *m.SequenceNumber)
		}
		var sbErr *azservicebus.Error
		if err := rcv.CompleteMessage(ctx, m, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
			t.Fatalf("completing after the lock expired: %v, want the broker's lock-lost verdict", err)
		}
	})

	// A drain (which the Go SDK does not use, the JS and .NET ones do) is
	// run on the twin: the messages there come through, then the credit is
	// given up.
	t.Run("drain", func(t *testing.T) {
		other := notServing(t, "fq", n1, n2)
		key, _ := other.srv.RootKey()
		conn, err := goamqp.Dial(ctx, "amqp://"+other.srv.AMQPAddr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(server.RootKeyName, key)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		snd, err := sess.NewSender(ctx, "fq", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := snd.Send(ctx, goamqp.NewMessage([]byte(fmt.Sprint("d", i))), nil); err != nil {
				t.Fatal(err)
			}
		}
		settledMode := goamqp.SenderSettleModeSettled
		rcv, err := sess.NewReceiver(ctx, "fq", &goamqp.ReceiverOptions{Credit: -1, RequestedSenderSettleMode: &settledMode})
		if err != nil {
			t.Fatal(err)
		}
		if err := rcv.IssueCredit(10); err != nil {
			t.Fatal(err)
		}
		first, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := []string{string(first.GetData())}
		// go-amqp drains with link-credit 0, revoking the credit at once:
		// what was on its way comes before the drain's answer or, after
		// it, with new credit; in order and without loss either way.
		if err := rcv.DrainCredit(ctx, nil); err != nil {
			t.Fatalf("drain through forwarding: %v", err)
		}
		for m := rcv.Prefetched(); m != nil; m = rcv.Prefetched() {
			got = append(got, string(m.GetData()))
		}
		if len(got) < 3 {
			if err := rcv.IssueCredit(uint32(3 - len(got))); err != nil {
				t.Fatal(err)
			}
		}
		for len(got) < 3 {
			m, err := rcv.Receive(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.GetData()))
		}
		if !slices.Equal(got, []string{"d0", "d1", "d2"}) {
			t.Fatalf("received %v around a drain, want d0 d1 d2", got)
		}
		// With nothing left, a drain completes at once and gives nothing.
		if err := rcv.IssueCredit(5); err != nil {
			t.Fatal(err)
		}
		if err := rcv.DrainCredit(ctx, nil); err != nil {
			t.Fatalf("empty drain: %v", err)
		}
		if m := rcv.Prefetched(); m != nil {
			t.Fatalf("an empty queue's drain gave %q", m.GetData())
		}
	})

	t.Run("subscription", func(t *testing.T) {
		c := far(t, "ft")
		snd, err := c.NewSender("ft", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("t0")}, nil); err != nil {
			t.Fatalf("send to a topic through forwarding: %v", err)
		}
		rcv, err := c.NewReceiverForSubscription("ft", "s", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close(ctx)
		m := receiveN(ctx, t, rcv, 1)[0]
		if string(m.Body) != "t0" {
			t.Fatalf("subscription received %q", m.Body)
		}
		if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		c := far(t, "fs")
		snd, err := c.NewSender("fs", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close(ctx)
		for i := range 3 {
			if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint("s", i)), SessionID: to("a")}, nil); err != nil {
				t.Fatal(err)
			}
		}
		sr, err := c.AcceptNextSessionForQueue(ctx, "fs", nil)
		if err != nil {
			t.Fatalf("accept next session through forwarding: %v", err)
		}
		if sr.SessionID() != "a" {
			t.Fatalf("accepted session %q", sr.SessionID())
		}
		if sr.LockedUntil().Before(time.Now()) {
			t.Fatalf("session locked until %v", sr.LockedUntil())
		}
		if err := sr.SetSessionState(ctx, []byte("state-1"), nil); err != nil {
			t.Fatalf("set session state: %v", err)
		}
		peeked, err := sr.PeekMessages(ctx, 5, nil)
		if err != nil || len(peeked) != 3 {
			t.Fatalf("session peek: %d, %v", len(peeked), err)
		}
		got := receiveN(ctx, t, sr, 3)
		if b := bodies(got); !slices.Equal(b, []string{"s0", "s1", "s2"}) {
			t.Fatalf("session order %v", b)
		}
		for _, m := range got {
			if err := sr.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := sr.RenewSessionLock(ctx, nil); err != nil {
			t.Fatalf("renew session lock: %v", err)
		}
		if err := sr.Close(ctx); err != nil {
			t.Fatal(err)
		}
		sr, err = c.AcceptSessionForQueue(ctx, "fs", "a", nil)
		if err != nil {
			t.Fatalf("accept session a: %v", err)
		}
		defer sr.Close(ctx)
		st, err := sr.GetSessionState(ctx, nil)
		if err != nil || string(st) != "state-1" {
			t.Fatalf("session state %q, %v", st, err)
		}
	})
}

// notServing returns the node of two that does not serve entity, once
// exactly one of them does.
func notServing(t *testing.T, entity string, a, b *node) *node {
	t.Helper()
	var other *node
	poll.Until(t, 20*time.Second, entity+" to be served by one node", func() bool {
		_, da := a.b().Dormant(entity)
		_, db := b.b().Dormant(entity)
		switch {
		case da && !db:
			other = a
		case db && !da:
			other = b
		default:
			return false
		}
		return true
	})
	return other
}

// receiveN receives exactly n messages (or fails the test).
func receiveN(ctx context.Context, t *testing.T, r interface {
	ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	var got []*azservicebus.ReceivedMessage
	poll.UntilNil(t, 30*time.Second, fmt.Sprintf("%d messages", n), func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ms, err := r.ReceiveMessages(rctx, n-len(got), nil)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("receive: %v", err)
		}
		got = append(got, ms...)
		if len(got) < n {
			return fmt.Errorf("%d of %d", len(got), n)
		}
		return nil
	})
	if len(got) != n {
		t.Fatalf("received %d messages, want %d", len(got), n)
	}
	return got
}

func bodies(ms any) []string {
	var out []string
	switch x := ms.(type) {
	case []*azservicebus.ReceivedMessage:
		for _, m := range x {
			out = append(out, string(m.Body))
		}
	}
	return out
}

func to[T any](v T) *T { return &v }
