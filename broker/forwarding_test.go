package broker

import (
	"testing"
	"time"
)

// Auto-forwarding, after service-bus-auto-forwarding.md.

func TestAutoForwardToQueueAndTopic(t *testing.T) {
	e := newEnv(t)
	e.queue("dest", QueueProperties{})
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.must(e.b.CreateSubscription(e.ctx, "t", "all", SubscriptionProperties{ForwardTo: "dest"}))
	e.queue("src", QueueProperties{ForwardTo: "t"})
	e.send("src", msg("hop"))
	if ri := e.info("src"); ri.TotalMessageCount != 0 {
		t.Fatalf("source keeps %+v", ri)
	}
	got := e.receive("dest", ReceiveAndDelete, 5)
	wantBodies(t, got, "hop")
	if got[0].EnqueueSequenceNumber == 0 {
		t.Fatal("forwarded message has no EnqueueSequenceNumber")
	}
}

func TestForwardingChainStopsAfterFourHops(t *testing.T) {
	e := newEnv(t)
	// q5 ← q4 ← q3 ← q2 ← q1 ← q0: the fifth forward is refused.
	e.queue("q6", QueueProperties{})
	e.queue("q5", QueueProperties{ForwardTo: "q6"})
	e.queue("q4", QueueProperties{ForwardTo: "q5"})
	e.queue("q3", QueueProperties{ForwardTo: "q4"})
	e.queue("q2", QueueProperties{ForwardTo: "q3"})
	e.queue("q1", QueueProperties{ForwardTo: "q2"})
	e.send("q1", msg("x"))
	// q1→q2→q3→q4→q5 are four hops; q5 cannot forward again.
	if ri := e.info("q6"); ri.TotalMessageCount != 0 {
		t.Fatalf("forwarded past the limit: %+v", ri)
	}
	got := e.receive("q5/$Transfer/$DeadLetterQueue", ReceiveAndDelete, 5)
	wantBodies(t, got, "x")
	if got[0].Properties[PropDeadLetterReason] != ReasonMaxTransferHopCountExceeded {
		t.Fatalf("reason %v", got[0].Properties)
	}
	if ri := e.info("q5"); ri.TransferDeadLetterMessageCount != 0 {
		t.Fatalf("runtime %+v", ri)
	}
}

func TestForwardingToADisabledDestinationGoesToTransferDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.queue("dest", QueueProperties{Status: StatusSendDisabled})
	e.queue("src", QueueProperties{ForwardTo: "dest"})
	e.send("src", msg("x"))
	if ri := e.info("src"); ri.TransferDeadLetterMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
	wantBodies(t, mustPeek(e, "src/$Transfer/$DeadLetterQueue"), "x")
}

func TestScheduledMessageForwardedWhenActivated(t *testing.T) {
	e := newEnv(t)
	e.queue("dest", QueueProperties{})
	e.queue("src", QueueProperties{ForwardTo: "dest"})
	_, err := e.b.Schedule(e.ctx, "src", t0.Add(time.Minute), []*Message{msg("s")})
	e.must(err)
	if ri := e.info("src"); ri.ScheduledMessageCount != 1 {
		t.Fatalf("source runtime %+v", ri)
	}
	e.clk.Advance(time.Minute)
	if ri := e.info("src"); ri.TotalMessageCount != 0 {
		t.Fatalf("source keeps %+v", ri)
	}
	wantBodies(t, e.receive("dest", ReceiveAndDelete, 5), "s")
}

func TestForwardingIntoASessionQueueWithoutSessionGoesToTransferDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.queue("sess", QueueProperties{RequiresSession: true})
	e.queue("small", QueueProperties{MaxMessageSizeInKilobytes: 1})
	e.queue("src", QueueProperties{ForwardTo: "sess"})
	e.queue("src2", QueueProperties{ForwardTo: "small"})
	e.send("src", msg("no-session"))
	e.send("src2", &Message{Body: make([]byte, 2048)})
	if ri := e.info("src"); ri.TransferDeadLetterMessageCount != 1 {
		t.Fatalf("src runtime %+v", ri)
	}
	if ri := e.info("src2"); ri.TransferDeadLetterMessageCount != 1 {
		t.Fatalf("src2 runtime %+v", ri)
	}
	if ri := e.info("sess"); ri.TotalMessageCount != 0 {
		t.Fatalf("sess runtime %+v", ri)
	}
}

// A subscription is never a forwarding target, so it may forward to a
// queue of its own name, whether it is created so or updated to. The bug
// this guards against: UpdateSubscription refused it as forwarding to
// itself, though CreateSubscription allowed it. A queue cannot forward to
// itself.
func TestSubscriptionMayForwardToAQueueOfItsName(t *testing.T) {
	e := newEnv(t)
	e.queue("orders", QueueProperties{})
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.must(e.b.CreateSubscription(e.ctx, "t", "created", SubscriptionProperties{ForwardTo: "orders"}))
	e.must(e.b.CreateSubscription(e.ctx, "t", "orders", SubscriptionProperties{}))
	e.must(e.b.UpdateSubscription(e.ctx, "t", "Orders", SubscriptionProperties{ForwardTo: "orders"}))
	si, err := e.b.GetSubscription(e.ctx, "t", "orders")
	e.must(err)
	if si.Properties.ForwardTo != "orders" {
		t.Fatalf("ForwardTo after the update %q, want \"orders\"", si.Properties.ForwardTo)
	}
	e.send("t", msg("m"))
	wantBodies(t, e.receive("orders", ReceiveAndDelete, 5), "m", "m")
	wantErr(t, e.b.UpdateQueue(e.ctx, "orders", QueueProperties{ForwardTo: "ORDERS"}), ErrInvalidArgument)
}

// A message forwarded to a topic whose fan-out fails part way (the sixth of
// a subscription's copies exceeds the topic's quota) is dead-lettered in
// the source whole: none of the copies placed before the failure stays.
func TestForwardingToATopicOverQuotaForwardsNothing(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{MaxSizeInMegabytes: 1}))
	e.sub("t", "s", SubscriptionProperties{})
	for _, n := range []string{"r1", "r2", "r3", "r4", "r5"} {
		e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: n, Filter: RuleFilter{Kind: FilterTrue}, Action: "SET a = 1"}))
	}
	e.queue("src", QueueProperties{ForwardTo: "t"})
	// Six copies (the default rule and five with actions) of 200 KB do not
	// fit in 1 MB; five would.
	e.send("src", &Message{Body: make([]byte, 200<<10)})
	si, err := e.b.GetSubscription(e.ctx, "t", "s")
	e.must(err)
	if si.Runtime.TotalMessageCount != 0 || si.Runtime.SizeInBytes != 0 {
		t.Fatalf("the subscription keeps part of the fan-out: %+v", si.Runtime)
	}
	sid, _ := e.b.Dormant("t/Subscriptions/s")
	if m, b := e.keys(sid); m != 0 || b != 0 {
		t.Fatalf("the subscription's records: %d message keys, %d body keys; want none", m, b)
	}
	got := mustPeek(e, "src/$Transfer/$DeadLetterQueue")
	if len(got) != 1 || got[0].Properties[PropDeadLetterReason] != ReasonForwardingFailed {
		t.Fatalf("transfer dead-letter queue of the source: %+v", got)
	}
	mustHoldInvariants(t, e.b)
	// Nothing of the failed fan-out is still reserved against the quota.
	e.send("src", &Message{Body: make([]byte, 100<<10)})
	if si, _ := e.b.GetSubscription(e.ctx, "t", "s"); si.Runtime.TotalMessageCount != 6 {
		t.Fatalf("a message that fits was not forwarded whole: %+v", si.Runtime)
	}
}
