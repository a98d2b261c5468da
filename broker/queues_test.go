package broker

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store/memstore"
)

func TestQueueDefaultsAsServiceBus(t *testing.T) {
	e := newEnv(t)
	e.queue("orders", QueueProperties{})
	qi, err := e.b.GetQueue(e.ctx, "ORDERS")
	e.must(err)
	p := qi.Properties
	if p.LockDuration != time.Minute || p.MaxDeliveryCount != 10 || p.DefaultMessageTimeToLive != InfiniteTTL ||
		p.DuplicateDetectionHistoryTimeWindow != 10*time.Minute || p.MaxMessageSizeInKilobytes != 1024 ||
		p.MaxSizeInMegabytes != 1024 || p.Status != StatusActive || p.AutoDeleteOnIdle != InfiniteTTL {
		t.Fatalf("defaults = %+v", p)
	}
	if qi.Name != "orders" || !qi.Runtime.CreatedAt.Equal(t0) {
		t.Fatalf("info = %+v", qi)
	}
}

// TestDefaultPropertiesAreWhatCreationGives checks the Default*Properties
// against entities created without properties, under the default message
// size ceiling and under a lower one (Standard's 256 KB).
func TestDefaultPropertiesAreWhatCreationGives(t *testing.T) {
	for _, ceiling := range []int64{0, 256} {
		b, err := Open(context.Background(), memstore.New(), Options{Logger: slog.New(slog.DiscardHandler), MaxMessageSizeInKilobytes: ceiling})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, err := range []error{b.CreateQueue(ctx, "q", QueueProperties{}), b.CreateTopic(ctx, "t", TopicProperties{}),
			b.CreateSubscription(ctx, "t", "s", SubscriptionProperties{})} {
			if err != nil {
				t.Fatal(err)
			}
		}
		q, err1 := b.GetQueue(ctx, "q")
		tp, err2 := b.GetTopic(ctx, "t")
		s, err3 := b.GetSubscription(ctx, "t", "s")
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		wantKB := int64(1024)
		if ceiling != 0 {
			wantKB = ceiling
		}
		if d := b.DefaultQueueProperties(); !reflect.DeepEqual(d, q.Properties) || d.MaxMessageSizeInKilobytes != wantKB {
			t.Errorf("ceiling %d: DefaultQueueProperties %+v\ncreated %+v", ceiling, d, q.Properties)
		}
		if d := b.DefaultTopicProperties(); !reflect.DeepEqual(d, tp.Properties) || d.MaxMessageSizeInKilobytes != wantKB {
			t.Errorf("ceiling %d: DefaultTopicProperties %+v\ncreated %+v", ceiling, d, tp.Properties)
		}
		if d := b.DefaultSubscriptionProperties(); !reflect.DeepEqual(d, s.Properties) {
			t.Errorf("ceiling %d: DefaultSubscriptionProperties %+v\ncreated %+v", ceiling, d, s.Properties)
		}
		b.Close()
	}
}

func TestEntityNamesAreCaseInsensitiveAndValidated(t *testing.T) {
	e := newEnv(t)
	e.queue("site1/MyQueue", QueueProperties{})
	wantErr(t, e.b.CreateQueue(e.ctx, "SITE1/myqueue", QueueProperties{}), ErrAlreadyExists)
	wantErr(t, e.b.CreateTopic(e.ctx, "site1/myQUEUE", TopicProperties{}), ErrAlreadyExists)
	e.send("site1/myqueue", msg("a"))
	wantBodies(t, e.receive("SITE1/MYQUEUE", ReceiveAndDelete, 5), "a")
	qi, _ := e.b.GetQueue(e.ctx, "site1/myqueue")
	if qi.Name != "site1/MyQueue" {
		t.Fatalf("stored name %q, want the case given", qi.Name)
	}
	for _, bad := range []string{"", "/a", "a/", ".a", "a.", "a//b", "a b", "a$b", "a/subscriptions/b", strings.Repeat("x", 261)} {
		wantErr(t, e.b.CreateQueue(e.ctx, bad, QueueProperties{}), ErrInvalidArgument)
	}
	e.must(e.b.CreateQueue(e.ctx, strings.Repeat("x", 260), QueueProperties{}))
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	wantErr(t, e.b.CreateSubscription(e.ctx, "t", strings.Repeat("s", 51), SubscriptionProperties{}), ErrInvalidArgument)
	wantErr(t, e.b.CreateSubscription(e.ctx, "t", "a/b", SubscriptionProperties{}), ErrInvalidArgument)
	wantErr(t, e.b.CreateSubscription(e.ctx, "nope", "s", SubscriptionProperties{}), ErrNotFound)
}

func TestPropertyValidationIsTyped(t *testing.T) {
	e := newEnv(t)
	for _, p := range []QueueProperties{
		{LockDuration: time.Second},
		{LockDuration: 6 * time.Minute},
		{DuplicateDetectionHistoryTimeWindow: time.Second},
		{DuplicateDetectionHistoryTimeWindow: 8 * 24 * time.Hour},
		{MaxDeliveryCount: -1},
		{Status: "Paused"},
		{AutoDeleteOnIdle: time.Minute},
		{MaxMessageSizeInKilobytes: 2048},
		{RequiresSession: true, ForwardTo: "x"},
	} {
		wantErr(t, e.b.CreateQueue(e.ctx, "q", p), ErrInvalidArgument)
	}
	wantErr(t, e.b.CreateQueue(e.ctx, "q", QueueProperties{ForwardTo: "missing"}), ErrNotFound)
}

func TestUpdateListDelete(t *testing.T) {
	e := newEnv(t)
	e.queue("b", QueueProperties{})
	e.queue("a", QueueProperties{})
	e.must(e.b.CreateTopic(e.ctx, "c", TopicProperties{}))
	e.clk.Advance(time.Hour)
	e.must(e.b.UpdateQueue(e.ctx, "A", QueueProperties{MaxDeliveryCount: 3, UserMetadata: "m"}))
	wantErr(t, e.b.UpdateQueue(e.ctx, "a", QueueProperties{RequiresSession: true}), ErrInvalidArgument)
	wantErr(t, e.b.UpdateQueue(e.ctx, "c", QueueProperties{}), ErrNotFound)
	qs, err := e.b.ListQueues(e.ctx, 0, 0)
	e.must(err)
	if len(qs) != 2 || qs[0].Name != "a" || qs[1].Name != "b" {
		t.Fatalf("list = %v", qs)
	}
	if qs[0].Properties.MaxDeliveryCount != 3 || qs[0].Properties.UserMetadata != "m" || !qs[0].Runtime.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("updated = %+v", qs[0])
	}
	qs, _ = e.b.ListQueues(e.ctx, 1, 1)
	if len(qs) != 1 || qs[0].Name != "b" {
		t.Fatalf("page = %v", qs)
	}
	e.send("a", msg("x"))
	e.must(e.b.DeleteQueue(e.ctx, "a"))
	wantErr(t, e.b.Send(e.ctx, "a", []*Message{msg("y")}), ErrNotFound)
	e.queue("a", QueueProperties{})
	if n := e.info("a").TotalMessageCount; n != 0 {
		t.Fatalf("recreated queue has %d messages", n)
	}
	e.restart()
	if n := e.info("a").TotalMessageCount; n != 0 {
		t.Fatalf("after restart recreated queue has %d messages", n)
	}
	ts, _ := e.b.ListTopics(e.ctx, 0, 0)
	if len(ts) != 1 || ts[0].Name != "c" {
		t.Fatalf("topics = %v", ts)
	}
}

func TestSendAssignsSequenceNumbersAndIDs(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), &Message{Body: []byte("b"), MessageID: "mine"})
	e.clk.Advance(time.Second)
	e.send("q", msg("c"))
	got := e.receive("q", ReceiveAndDelete, 10)
	wantBodies(t, got, "a", "b", "c")
	for i, m := range got {
		if m.SequenceNumber != int64(i+1) {
			t.Fatalf("message %d has sequence number %d", i, m.SequenceNumber)
		}
	}
	if len(got[0].MessageID) != 32 || strings.Trim(got[0].MessageID, "0123456789abcdef") != "" || got[1].MessageID != "mine" {
		t.Fatalf("ids %q %q", got[0].MessageID, got[1].MessageID)
	}
	if !got[0].EnqueuedTime.Equal(t0) || !got[2].EnqueuedTime.Equal(t0.Add(time.Second)) {
		t.Fatalf("enqueued times %v %v", got[0].EnqueuedTime, got[2].EnqueuedTime)
	}
}

func TestSendValidation(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxMessageSizeInKilobytes: 1})
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{{Body: make([]byte, 1025)}}), ErrMessageSizeExceeded)
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{{MessageID: strings.Repeat("i", 129)}}), ErrInvalidArgument)
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{{SessionID: "a", PartitionKey: "b"}}), ErrInvalidArgument)
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{{Properties: map[string]any{"x": struct{}{}}}}), ErrInvalidArgument)
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{nil}), ErrInvalidArgument)
	wantErr(t, e.b.Send(e.ctx, "q/$DeadLetterQueue", []*Message{msg("x")}), ErrInvalidArgument)
	// An atomic batch: one bad message, nothing is sent.
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{msg("ok"), {Body: make([]byte, 2000)}}), ErrMessageSizeExceeded)
	if n := e.info("q").TotalMessageCount; n != 0 {
		t.Fatalf("%d messages after a refused batch", n)
	}
}

func TestEntityStatus(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{Status: StatusSendDisabled})
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{msg("x")}), ErrEntityDisabled)
	e.must(e.b.UpdateQueue(e.ctx, "q", QueueProperties{Status: StatusReceiveDisabled}))
	e.send("q", msg("x"))
	_, err := e.b.NewConsumer(e.ctx, "q", ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrEntityDisabled)
	e.must(e.b.UpdateQueue(e.ctx, "q", QueueProperties{}))
	wantBodies(t, e.receive("q", ReceiveAndDelete, 1), "x")
}

func TestQuotaExceeded(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{MaxSizeInMegabytes: 1})
	big := make([]byte, 600<<10)
	e.send("q", &Message{Body: big})
	wantErr(t, e.b.Send(e.ctx, "q", []*Message{{Body: big}}), ErrQuotaExceeded)
	e.receive("q", ReceiveAndDelete, 1)
	e.send("q", &Message{Body: big})
	if ri := e.info("q"); ri.SizeInBytes != int64(len(big)) || ri.ActiveMessageCount != 1 {
		t.Fatalf("runtime = %+v", ri)
	}
}

func TestReceiveAndDeleteIsDurableBeforeDelivery(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", msg("a"), msg("b"))
	got := e.receive("q", ReceiveAndDelete, 1)
	wantBodies(t, got, "a")
	if got[0].LockToken != (LockToken{}) {
		t.Fatal("receive-and-delete message has a lock token")
	}
	e.restart()
	wantBodies(t, e.receive("q", ReceiveAndDelete, 5), "b")
}

func TestCreditBoundsDeliveriesAndDrainReportsTheRest(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	c, s := e.consumer("q", PeekLock)
	c.AddCredit(2)
	e.send("q", msg("1"), msg("2"), msg("3"))
	wantBodies(t, s.take(), "1", "2")
	if c.Credit() != 0 {
		t.Fatalf("credit = %d", c.Credit())
	}
	c.AddCredit(5)
	wantBodies(t, s.take(), "3")
	if left := c.Drain(); left != 4 {
		t.Fatalf("drain dropped %d credits, want 4", left)
	}
	e.send("q", msg("4"))
	if got := s.take(); len(got) != 0 {
		t.Fatalf("delivered %q without credit", bodies(got))
	}
}

func TestCompetingConsumersShareTheQueue(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	c1, s1 := e.consumer("q", PeekLock)
	c2, s2 := e.consumer("q", PeekLock)
	c1.AddCredit(10)
	c2.AddCredit(10)
	for i := range 10 {
		e.send("q", msg(string(rune('a'+i))))
	}
	g1, g2 := s1.take(), s2.take()
	if len(g1)+len(g2) != 10 || len(g1) == 0 || len(g2) == 0 {
		t.Fatalf("split %d / %d", len(g1), len(g2))
	}
}

// deleteQueueWaiting starts DeleteQueue(name) and returns its outcome's
// channel once the delete has run as far as it can: done, or waiting for
// the writes in flight to the queue.
func deleteQueueWaiting(t *testing.T, b *Broker, name string) <-chan error {
	t.Helper()
	del := make(chan error, 1)
	go func() { del <- b.DeleteQueue(context.Background(), name) }()
	poll.Until(t, 10*time.Second, "the delete to run", func() bool {
		return len(del) > 0 || blockedIn("broker.(*Broker).deleteTopLocked")
	})
	return del
}

// A queue deleted while a send to it is committing keeps none of the
// send's records: the delete's range deletions come after them. The send
// is answered with success or "not found", never with success after the
// delete returned.
func TestDeleteQueueWithASendInFlightLeavesNoRecords(t *testing.T) {
	b, g := openGated(t, clock.NewFake(t0), 3, nil)
	ctx := context.Background()
	must(t, b.CreateQueue(ctx, "q", QueueProperties{RequiresDuplicateDetection: true}))
	id, _ := b.Dormant("q")
	g.arm()
	p := b.SendAsync(ctx, "q", []*Message{{MessageID: "a", Body: []byte("a")}}, nil, nil)
	<-g.entered // the send's commit is held
	del := deleteQueueWaiting(t, b, "q")
	close(g.release)
	must(t, <-del)
	if _, err := p.Wait(); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatalf("send: %v, want success or ErrNotFound", err)
	}
	if n := entityRecords(t, g.Store, id); n != 0 {
		t.Fatalf("%d records of the deleted queue are left", n)
	}
	wantErr(t, b.Send(ctx, "q", []*Message{msg("b")}), ErrNotFound)
	mustHoldInvariants(t, b)
}

// Not only sends write a queue's records: a settlement that rewrites a
// message, a peek-lock receive of deferred messages and a session state
// do too. A delete waits for those in flight, so that none of their
// records outlives the queue.
func TestDeleteQueueWithOtherWritesInFlightLeavesNoRecords(t *testing.T) {
	writes := map[string]func(b *Broker, locked *Message, deferred int64) error{
		"defer": func(b *Broker, m *Message, _ int64) error {
			return b.Defer(context.Background(), "q", nil, m.LockToken)
		},
		"abandon with a property": func(b *Broker, m *Message, _ int64) error {
			return b.Abandon(context.Background(), "q", map[string]any{"k": "v"}, m.LockToken)
		},
		"receive deferred": func(b *Broker, _ *Message, seq int64) error {
			_, err := b.ReceiveDeferred(context.Background(), "q", []int64{seq}, PeekLock)
			return err
		},
		"session state": func(b *Broker, _ *Message, _ int64) error {
			return b.SetSessionState(context.Background(), "q", "s", []byte("state"))
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			b, g := openGated(t, clock.NewFake(t0), 3, nil)
			ctx := context.Background()
			must(t, b.CreateQueue(ctx, "q", QueueProperties{RequiresSession: true, LockDuration: time.Minute}))
			id, _ := b.Dormant("q")
			must(t, b.Send(ctx, "q", []*Message{{SessionID: "s", Body: []byte("1")}, {SessionID: "s", Body: []byte("2")}}))
			got := consumeInto(t, b, "q", "s", PeekLock, 2).takeN(t, 2)
			must(t, b.Defer(ctx, "q", nil, got[1].LockToken))
			g.arm()
			done := make(chan error, 1)
			go func() { done <- write(b, got[0], got[1].SequenceNumber) }()
			<-g.entered // the write's commit is held
			del := deleteQueueWaiting(t, b, "q")
			close(g.release)
			must(t, <-del)
			if err := <-done; err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrMessageNotFound) {
				t.Fatalf("the write: %v, want success or not found", err)
			}
			if n := entityRecords(t, g.Store, id); n != 0 {
				t.Fatalf("%d records of the deleted queue are left", n)
			}
			mustHoldInvariants(t, b)
		})
	}
}

// A send durable before its queue was deleted, but answered after (it
// waited for the producer's earlier send), fails with ErrNotFound: success
// would acknowledge a message already gone.
func TestSendAnsweredAfterItsQueueWasDeletedFails(t *testing.T) {
	b, g := openGated(t, clock.NewFake(t0), 3, nil)
	ctx := context.Background()
	must(t, b.CreateQueue(ctx, "other", QueueProperties{}))
	must(t, b.CreateQueue(ctx, "q", QueueProperties{}))
	id, _ := b.Dormant("q")
	g.arm()
	first := b.SendAsync(ctx, "other", []*Message{msg("1")}, nil, nil)
	<-g.entered // the producer's first send is held
	second := b.SendAsync(ctx, "q", []*Message{msg("2")}, first, nil)
	poll.Until(t, 10*time.Second, "the second send durable", func() bool { return entityRecords(t, g.Store, id) > 0 })
	must(t, b.DeleteQueue(ctx, "q"))
	close(g.release)
	if _, err := first.Wait(); err != nil {
		t.Fatalf("first send: %v", err)
	}
	_, err := second.Wait()
	wantErr(t, err, ErrNotFound)
	if n := entityRecords(t, g.Store, id); n != 0 {
		t.Fatalf("%d records of the deleted queue are left", n)
	}
}

// A send decided while its queue's delete is committing is refused.
func TestSendToAQueueBeingDeletedIsRefused(t *testing.T) {
	b, g := openGated(t, clock.NewFake(t0), 3, nil)
	ctx := context.Background()
	must(t, b.CreateQueue(ctx, "q", QueueProperties{}))
	g.arm()
	del := make(chan error, 1)
	go func() { del <- b.DeleteQueue(ctx, "q") }()
	<-g.entered // the delete's commit is held
	wantErr(t, b.Send(ctx, "q", []*Message{msg("late")}), ErrNotFound)
	close(g.release)
	must(t, <-del)
}
