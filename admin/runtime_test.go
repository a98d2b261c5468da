package admin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/broker"
)

// send sends n messages to path through the broker's API.
func (e *env) send(path string, n int, size int) {
	e.t.Helper()
	var msgs []*broker.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, &broker.Message{MessageID: fmt.Sprintf("%s-%d-%d", path, time.Now().UnixNano(), i), Body: make([]byte, size)})
	}
	if err := e.b.Send(context.Background(), path, msgs); err != nil {
		e.t.Fatal(err)
	}
}

// receive takes n messages from path in peek-lock mode.
func (e *env) receive(path string, n int) []*broker.Message {
	e.t.Helper()
	got := make(chan *broker.Message, n)
	c, err := e.b.NewConsumer(context.Background(), path, broker.ConsumerOptions{Mode: broker.PeekLock,
		Deliver: func(m *broker.Message) { got <- m }})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	c.AddCredit(n)
	var out []*broker.Message
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m := <-got:
			out = append(out, m)
		case <-deadline:
			e.t.Fatalf("received %d of %d messages from %s", len(out), n, path)
		}
	}
	return out
}

// complete settles a received message.
func (e *env) complete(path string, m *broker.Message) {
	e.t.Helper()
	if err := e.b.Complete(context.Background(), path, m.LockToken); err != nil {
		e.t.Fatal(err)
	}
}

// deadLetter moves a received message to the dead-letter subqueue.
func (e *env) deadLetter(path string, m *broker.Message, reason string) {
	e.t.Helper()
	if err := e.b.DeadLetter(context.Background(), path, reason, "test", nil, m.LockToken); err != nil {
		e.t.Fatal(err)
	}
}

func TestGoClientQueueRuntimeProperties(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	created := e.clk.Now()
	if _, err := c.CreateQueue(ctx, "work", nil); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	e.send("work", 5, 100)
	if _, err := e.b.Schedule(ctx, "work", e.clk.Now().Add(time.Hour), []*broker.Message{{MessageID: "s1"}, {MessageID: "s2"}}); err != nil {
		t.Fatal(err)
	}
	msgs := e.receive("work", 2)
	e.complete("work", msgs[0])
	e.deadLetter("work", msgs[1], "Rejected")
	ri := e.b // the broker's own view is the reference
	info, err := ri.GetQueue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}

	rt, err := c.GetQueueRuntimeProperties(ctx, "work", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sbadmin.QueueRuntimeProperties{
		SizeInBytes: info.Runtime.SizeInBytes, CreatedAt: created, UpdatedAt: created,
		AccessedAt: info.Runtime.AccessedAt, TotalMessageCount: 6, ActiveMessageCount: 3,
		DeadLetterMessageCount: 1, ScheduledMessageCount: 2,
	}
	mustEqual(t, "runtime properties", rt.QueueRuntimeProperties, want)
	if rt.SizeInBytes < 4*100 || !rt.AccessedAt.After(created) {
		t.Fatalf("size %d, accessed %v (created %v)", rt.SizeInBytes, rt.AccessedAt, created)
	}

	// The scheduled messages activate when their time comes.
	e.clk.Advance(time.Hour)
	rt, err = c.GetQueueRuntimeProperties(ctx, "work", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt.ActiveMessageCount != 5 || rt.ScheduledMessageCount != 0 || rt.DeadLetterMessageCount != 1 || rt.TotalMessageCount != 6 {
		t.Fatalf("after activation: %+v", rt.QueueRuntimeProperties)
	}

	// The list of runtime properties says the same.
	pager := c.NewListQueuesRuntimePropertiesPager(nil)
	page, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.QueueRuntimeProperties) != 1 || page.QueueRuntimeProperties[0].QueueName != "work" ||
		page.QueueRuntimeProperties[0].QueueRuntimeProperties != rt.QueueRuntimeProperties {
		t.Fatalf("listed %+v, want %+v", page.QueueRuntimeProperties, rt.QueueRuntimeProperties)
	}
}

func TestGoClientTopicRuntimeProperties(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	if _, err := c.CreateTopic(ctx, "news", nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b"} {
		if _, err := c.CreateSubscription(ctx, "news", s, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.send("news", 3, 10)
	msgs := e.receive("news/Subscriptions/a", 1)
	e.deadLetter("news/Subscriptions/a", msgs[0], "Rejected")
	sa, err := c.GetSubscriptionRuntimeProperties(ctx, "news", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sa.ActiveMessageCount != 2 || sa.DeadLetterMessageCount != 1 || sa.TotalMessageCount != 3 || sa.CreatedAt.IsZero() {
		t.Fatalf("subscription a: %+v", sa.SubscriptionRuntimeProperties)
	}
	sb, err := c.GetSubscriptionRuntimeProperties(ctx, "news", "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sb.ActiveMessageCount != 3 || sb.DeadLetterMessageCount != 0 || sb.TotalMessageCount != 3 {
		t.Fatalf("subscription b: %+v", sb.SubscriptionRuntimeProperties)
	}
	trt, err := c.GetTopicRuntimeProperties(ctx, "news", nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.b.GetTopic(ctx, "news")
	if err != nil {
		t.Fatal(err)
	}
	if trt.SubscriptionCount != 2 || trt.SizeInBytes != info.Runtime.SizeInBytes || trt.SQLFilterCount != 2 ||
		trt.CorrelationFilterCount != 0 || trt.ScheduledMessageCount != 0 {
		t.Fatalf("topic: %+v (broker %+v)", trt.TopicRuntimeProperties, info.Runtime)
	}
	// Before api-version 2024-05 the filter counts are not reported.
	old, err := e.client(rootKeyName, rootKey, "2021-05").GetTopicRuntimeProperties(ctx, "news", nil)
	if err != nil {
		t.Fatal(err)
	}
	if old.SQLFilterCount != 0 || old.SubscriptionCount != 2 {
		t.Fatalf("2021-05 topic runtime: %+v", old.TopicRuntimeProperties)
	}
	var listed []string
	sp := c.NewListSubscriptionsRuntimePropertiesPager("news", nil)
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.SubscriptionRuntimeProperties {
			listed = append(listed, fmt.Sprintf("%s:%d/%d", s.SubscriptionName, s.ActiveMessageCount, s.DeadLetterMessageCount))
		}
	}
	mustEqual(t, "listed subscription runtime", listed, []string{"a:2/1", "b:3/0"})
}

func TestChangesAreDurableAndImmediate(t *testing.T) {
	e := newEnv(t)
	c := e.root()
	ctx := context.Background()
	if _, err := c.CreateQueue(ctx, "live", &sbadmin.CreateQueueOptions{Properties: &sbadmin.QueueProperties{MaxDeliveryCount: ptr(int32(2))}}); err != nil {
		t.Fatal(err)
	}
	e.send("live", 1, 1)
	q, err := c.GetQueue(ctx, "live", nil)
	if err != nil {
		t.Fatal(err)
	}
	q.Status = ptr(sbadmin.EntityStatusSendDisabled)
	if _, err := c.UpdateQueue(ctx, "live", q.QueueProperties, nil); err != nil {
		t.Fatal(err)
	}
	// The next send sees the new status.
	err = e.b.Send(ctx, "live", []*broker.Message{{MessageID: "late"}})
	if !errors.Is(err, broker.ErrEntityDisabled) {
		t.Fatalf("send after SendDisabled: %v", err)
	}
	// A broker reopened over the same store has the queue as it was left.
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := broker.Open(ctx, e.st, broker.Options{Clock: e.clk, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	info, err := b2.GetQueue(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if info.Properties.Status != broker.StatusSendDisabled || info.Properties.MaxDeliveryCount != 2 || info.Runtime.ActiveMessageCount != 1 {
		t.Fatalf("reopened: %+v %+v", info.Properties, info.Runtime)
	}
}
