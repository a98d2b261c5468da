package broker

import (
	"context"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
)

// Topics, subscriptions and rules, after topic-filters.md.

func (e *env) sub(topic, name string, p SubscriptionProperties) {
	e.t.Helper()
	e.must(e.b.CreateSubscription(e.ctx, topic, name, p))
}

func TestFanOutToEverySubscription(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "a", SubscriptionProperties{})
	e.sub("t", "b", SubscriptionProperties{})
	e.send("t", msg("1"), msg("2"))
	a := e.receive("t/Subscriptions/a", PeekLock, 5)
	b := e.receive("T/subscriptions/B", ReceiveAndDelete, 5)
	wantBodies(t, a, "1", "2")
	wantBodies(t, b, "1", "2")
	if a[0].SequenceNumber != b[0].SequenceNumber {
		t.Fatal("copies have different sequence numbers")
	}
	e.must(e.b.Complete(e.ctx, "t/Subscriptions/a", a[0].LockToken))
	ti, _ := e.b.GetTopic(e.ctx, "t")
	if ti.Runtime.ActiveMessageCount != 1 || ti.Runtime.SubscriptionCount != 2 {
		t.Fatalf("topic runtime %+v", ti.Runtime)
	}
	rules, _ := e.b.ListRules(e.ctx, "t", "a", 0, 0)
	if len(rules) != 1 || rules[0].Name != DefaultRuleName || rules[0].Filter.Kind != FilterTrue {
		t.Fatalf("default rules %+v", rules)
	}
	_, err := e.b.NewConsumer(e.ctx, "t", ConsumerOptions{Deliver: func(*Message) {}})
	wantErr(t, err, ErrInvalidArgument)
}

func TestSQLAndCorrelationFilters(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "red", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "red",
		Filter: RuleFilter{Kind: FilterSQL, SQL: "color = 'red' AND sys.Label = @l", Parameters: map[string]any{"@l": "paint"}}}})
	e.sub("t", "corr", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "c",
		Filter: RuleFilter{Kind: FilterCorrelation, Correlation: CorrelationFilter{CorrelationID: "order-7", Properties: map[string]any{"prio": int64(1)}}}}})
	e.sub("t", "none", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "f", Filter: RuleFilter{Kind: FilterFalse}}})
	e.send("t",
		&Message{Body: []byte("r"), Subject: "paint", Properties: map[string]any{"color": "red"}},
		&Message{Body: []byte("b"), Subject: "paint", Properties: map[string]any{"color": "blue"}},
		&Message{Body: []byte("c"), CorrelationID: "order-7", Properties: map[string]any{"prio": int32(1)}},
		&Message{Body: []byte("c-wrong"), CorrelationID: "order-7", Properties: map[string]any{"prio": int32(2)}},
	)
	wantBodies(t, e.receive("t/Subscriptions/red", ReceiveAndDelete, 10), "r")
	wantBodies(t, e.receive("t/Subscriptions/corr", ReceiveAndDelete, 10), "c")
	wantBodies(t, e.receive("t/Subscriptions/none", ReceiveAndDelete, 10))
}

func TestAnyMatchingRuleYieldsOneCopy(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{})
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "also", Filter: RuleFilter{Kind: FilterSQL, SQL: "1=1"}}))
	wantErr(t, e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "ALSO"}), ErrAlreadyExists)
	wantErr(t, e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "bad", Filter: RuleFilter{Kind: FilterSQL, SQL: "a ="}}), ErrInvalidArgument)
	e.send("t", msg("x"))
	wantBodies(t, e.receive("t/Subscriptions/s", ReceiveAndDelete, 10), "x")
	e.must(e.b.RemoveRule(e.ctx, "t", "s", DefaultRuleName))
	e.must(e.b.RemoveRule(e.ctx, "t", "s", "also"))
	wantErr(t, e.b.RemoveRule(e.ctx, "t", "s", "also"), ErrNotFound)
	e.send("t", msg("y"))
	wantBodies(t, e.receive("t/Subscriptions/s", ReceiveAndDelete, 10))
}

func TestRuleActionChangesOnlyTheSubscriptionCopy(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "plain", SubscriptionProperties{})
	e.sub("t", "act", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "r", Action: "SET tier = 'gold'; SET sys.Label = 'vip'; REMOVE secret"}})
	e.send("t", &Message{Body: []byte("m"), Subject: "std", Properties: map[string]any{"secret": "s"}})
	a := e.receive("t/Subscriptions/act", ReceiveAndDelete, 1)[0]
	if a.Properties["tier"] != "gold" || a.Properties["secret"] != nil || a.Subject != "vip" || !a.PropertiesModified || !a.SystemPropertiesModified {
		t.Fatalf("action copy %+v", a)
	}
	p := e.receive("t/Subscriptions/plain", ReceiveAndDelete, 1)[0]
	if p.Properties["secret"] != "s" || p.Properties["tier"] != nil || p.Subject != "std" || p.PropertiesModified {
		t.Fatalf("plain copy %+v", p)
	}
}

func TestFilterErrorsDeadLetterWhereEnabled(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	bad := &RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "sys.NoSuchProperty = 'x'"}}
	e.sub("t", "dl", SubscriptionProperties{DeadLetteringOnFilterEvaluationExceptions: true, DefaultRule: bad})
	e.sub("t", "skip", SubscriptionProperties{DefaultRule: bad})
	e.send("t", msg("no-correlation-id"))
	dl := e.receive("t/Subscriptions/dl/$DeadLetterQueue", ReceiveAndDelete, 5)
	wantBodies(t, dl, "no-correlation-id")
	if dl[0].Properties[PropDeadLetterReason] != ReasonFilterEvaluation {
		t.Fatalf("reason %v", dl[0].Properties)
	}
	si, _ := e.b.GetSubscription(e.ctx, "t", "skip")
	if si.Runtime.TotalMessageCount != 0 {
		t.Fatalf("skip runtime %+v", si.Runtime)
	}
}

func TestSessionSubscription(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{RequiresSession: true})
	e.send("t", sessMsg("a", "1"), msg("no-session"))
	c, s := e.accept("t/Subscriptions/s", "a")
	c.AddCredit(5)
	wantBodies(t, s.take(), "1")
	dl := e.receive("t/Subscriptions/s/$DeadLetterQueue", ReceiveAndDelete, 5)
	wantBodies(t, dl, "no-session")
}

func TestScheduledTopicMessageCancelledInEverySubscription(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "a", SubscriptionProperties{})
	e.sub("t", "b", SubscriptionProperties{})
	seqs, err := e.b.Schedule(e.ctx, "t", t0.Add(1e12), []*Message{msg("x")})
	e.must(err)
	e.must(e.b.CancelScheduled(e.ctx, "t", seqs))
	e.clk.Advance(2e12)
	wantBodies(t, e.receive("t/Subscriptions/a", ReceiveAndDelete, 5))
	wantBodies(t, e.receive("t/Subscriptions/b", ReceiveAndDelete, 5))
}

func TestDeleteTopicDeletesSubscriptions(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "a", SubscriptionProperties{})
	wantErr(t, e.b.CreateSubscription(e.ctx, "t", "A", SubscriptionProperties{}), ErrAlreadyExists)
	e.send("t", msg("x"))
	lost := make(chan error, 1)
	_, err := e.b.NewConsumer(e.ctx, "t/Subscriptions/a", ConsumerOptions{Deliver: func(*Message) {}, OnLost: func(err error) { lost <- err }})
	e.must(err)
	e.must(e.b.DeleteTopic(e.ctx, "t"))
	wantErr(t, <-lost, ErrNotFound)
	e.restart()
	_, err = e.b.GetSubscription(e.ctx, "t", "a")
	wantErr(t, err, ErrNotFound)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "a", SubscriptionProperties{})
	subs, _ := e.b.ListSubscriptions(e.ctx, "t", 0, 0)
	if len(subs) != 1 || subs[0].Runtime.TotalMessageCount != 0 {
		t.Fatalf("subs %+v", subs)
	}
}

func TestTopicQuotaCountsEverySubscription(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{MaxSizeInMegabytes: 1}))
	e.sub("t", "a", SubscriptionProperties{})
	e.sub("t", "b", SubscriptionProperties{})
	e.send("t", &Message{Body: make([]byte, 400<<10)})
	wantErr(t, e.b.Send(e.ctx, "t", []*Message{{Body: make([]byte, 400<<10)}}), ErrQuotaExceeded)
	ti, _ := e.b.GetTopic(e.ctx, "t")
	if ti.Runtime.SizeInBytes != 800<<10 || ti.Runtime.ActiveMessageCount != 2 {
		t.Fatalf("topic runtime %+v", ti.Runtime)
	}
}

// A scheduled message waits in the topic and fans out when it activates,
// to the subscriptions that exist then.
func TestScheduledTopicMessageFansOutAtActivation(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "early", SubscriptionProperties{})
	seqs, err := e.b.Schedule(e.ctx, "t", t0.Add(time.Minute), []*Message{msg("x")})
	e.must(err)
	ti, _ := e.b.GetTopic(e.ctx, "t")
	if ti.Runtime.ScheduledMessageCount != 1 {
		t.Fatalf("topic runtime %+v", ti.Runtime)
	}
	if p := mustPeek(e, "t/Subscriptions/early"); len(p) != 0 {
		t.Fatalf("subscription shows the scheduled message before activation: %q", bodies(p))
	}
	e.sub("t", "late", SubscriptionProperties{})
	e.restart()
	e.clk.Advance(time.Minute)
	early := e.receive("t/Subscriptions/early", ReceiveAndDelete, 5)
	wantBodies(t, early, "x")
	wantBodies(t, e.receive("t/Subscriptions/late", ReceiveAndDelete, 5), "x")
	if early[0].SequenceNumber <= seqs[0] {
		t.Fatalf("activated copy has sequence number %d, scheduled was %d", early[0].SequenceNumber, seqs[0])
	}
	ti, _ = e.b.GetTopic(e.ctx, "t")
	if ti.Runtime.TotalMessageCount != 0 {
		t.Fatalf("topic runtime after fan-out %+v", ti.Runtime)
	}
}

// TestRulesWithActionsYieldCopiesOfTheirOwn follows topic-filters.md: the
// matching rules without actions yield one copy between them; each matching
// rule with an action yields its own copy, with a RuleName property.
func TestRulesWithActionsYieldCopiesOfTheirOwn(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{}) // $Default: true, no action
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "also", Filter: RuleFilter{Kind: FilterSQL, SQL: "1=1"}}))
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "gold", Action: "SET tier = 'gold'"}))
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "silver", Action: "SET tier = 'silver'"}))
	e.must(e.b.AddRule(e.ctx, "t", "s", RuleProperties{Name: "never", Filter: RuleFilter{Kind: FilterFalse}, Action: "SET tier = 'none'"}))
	e.send("t", msg("x"))
	got := e.receive("t/Subscriptions/s", ReceiveAndDelete, 10)
	if len(got) != 3 {
		t.Fatalf("got %d copies, want 3 (one for the two plain rules, one per matching action)", len(got))
	}
	seen := map[string]bool{}
	seqs := map[int64]bool{}
	for _, m := range got {
		seqs[m.SequenceNumber] = true
		rn, hasName := m.Properties[PropRuleName]
		tier := m.Properties["tier"]
		switch {
		case !hasName && tier == nil:
			seen["plain"] = true
		case rn == "gold" && tier == "gold" && m.PropertiesModified:
			seen["gold"] = true
		case rn == "silver" && tier == "silver" && m.PropertiesModified:
			seen["silver"] = true
		default:
			t.Fatalf("unexpected copy: properties %v", m.Properties)
		}
	}
	if len(seen) != 3 || len(seqs) != 3 {
		t.Fatalf("copies %v with sequence numbers %v: want plain, gold and silver with distinct numbers", seen, seqs)
	}
	e.restart()
	e.send("t", msg("y"))
	if n := len(e.receive("t/Subscriptions/s", ReceiveAndDelete, 10)); n != 3 {
		t.Fatalf("after restart got %d copies, want 3", n)
	}
}

func TestUpdateRuleReplacesInPlace(t *testing.T) {
	e := newEnv(t)
	e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
	e.sub("t", "s", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "color",
		Filter: RuleFilter{Kind: FilterSQL, SQL: "color = 'red'"}}})
	before, _ := e.b.ListRules(e.ctx, "t", "s", 0, 0)
	e.must(e.b.UpdateRule(e.ctx, "t", "s", RuleProperties{Name: "COLOR",
		Filter: RuleFilter{Kind: FilterSQL, SQL: "color = 'blue'"}, Action: "SET seen = TRUE"}))
	wantErr(t, e.b.UpdateRule(e.ctx, "t", "s", RuleProperties{Name: "absent"}), ErrNotFound)
	wantErr(t, e.b.UpdateRule(e.ctx, "t", "s", RuleProperties{Name: "color", Filter: RuleFilter{Kind: FilterSQL, SQL: "a ="}}), ErrInvalidArgument)
	e.restart()
	after, _ := e.b.ListRules(e.ctx, "t", "s", 0, 0)
	if len(after) != 1 || after[0].Filter.SQL != "color = 'blue'" || after[0].Action != "SET seen = TRUE" ||
		!after[0].CreatedAt.Equal(before[0].CreatedAt) {
		t.Fatalf("rules after update and restart: %+v (before %+v)", after, before)
	}
	e.send("t", &Message{Body: []byte("r"), Properties: map[string]any{"color": "red"}},
		&Message{Body: []byte("b"), Properties: map[string]any{"color": "blue"}})
	got := e.receive("t/Subscriptions/s", ReceiveAndDelete, 10)
	wantBodies(t, got, "b")
	if got[0].Properties["seen"] != true {
		t.Fatalf("updated action not applied: %v", got[0].Properties)
	}
}

// TestNewIDDrawsOnTheBrokersRandomSource: newid() in a rule action uses the
// broker's injected randomness, so a seeded broker is reproducible.
func TestNewIDDrawsOnTheBrokersRandomSource(t *testing.T) {
	ids := make([]any, 2)
	for i := range ids {
		e := newEnv(t) // seeded identically each time
		e.must(e.b.CreateTopic(e.ctx, "t", TopicProperties{}))
		e.sub("t", "s", SubscriptionProperties{DefaultRule: &RuleProperties{Name: "id", Action: "SET id = newid()"}})
		e.send("t", msg("x"))
		got := e.receive("t/Subscriptions/s", ReceiveAndDelete, 1)
		ids[i] = got[0].Properties["id"]
	}
	if ids[0] == nil || ids[0] != ids[1] {
		t.Fatalf("newid() gave %v and %v under the same seed; want the same non-nil id", ids[0], ids[1])
	}
}

// openTopicAB opens a broker over a gated store with topic t and its
// subscriptions a and b, and returns a's id.
func openTopicAB(t *testing.T) (*Broker, *gatedStore, uint64) {
	t.Helper()
	b, g := openGated(t, clock.NewFake(t0), 3, nil)
	ctx := context.Background()
	must(t, b.CreateTopic(ctx, "t", TopicProperties{}))
	must(t, b.CreateSubscription(ctx, "t", "a", SubscriptionProperties{}))
	must(t, b.CreateSubscription(ctx, "t", "b", SubscriptionProperties{}))
	a, err := b.entityOf(kindSubscription, "t", "a")
	must(t, err)
	return b, g, a.id
}

// A subscription deleted while a send to its topic is committing keeps
// none of the send's records; the send succeeds, its copy for the other
// subscription stays.
func TestDeleteSubscriptionWithASendInFlightLeavesNoRecords(t *testing.T) {
	b, g, id := openTopicAB(t)
	ctx := context.Background()
	g.arm()
	p := b.SendAsync(ctx, "t", []*Message{msg("x")}, nil, nil)
	<-g.entered // the send's commit is held
	del := make(chan error, 1)
	go func() { del <- b.DeleteSubscription(ctx, "t", "a") }()
	poll.Until(t, 10*time.Second, "the delete to run", func() bool {
		return len(del) > 0 || blockedIn("broker.(*Broker).DeleteSubscription")
	})
	close(g.release)
	must(t, <-del)
	if _, err := p.Wait(); err != nil {
		t.Fatalf("send: %v", err)
	}
	if n := entityRecords(t, g.Store, id); n != 0 {
		t.Fatalf("%d records of the deleted subscription are left", n)
	}
	wantBodies(t, consumeInto(t, b, "t/Subscriptions/b", "", ReceiveAndDelete, 5).takeN(t, 1), "x")
	mustHoldInvariants(t, b)
}

// A send to a topic decided while one of its subscriptions is being
// deleted succeeds and gives that subscription no copy, as if it were
// already gone.
func TestSendToATopicSkipsASubscriptionBeingDeleted(t *testing.T) {
	b, g, id := openTopicAB(t)
	ctx := context.Background()
	g.arm()
	del := make(chan error, 1)
	go func() { del <- b.DeleteSubscription(ctx, "t", "a") }()
	<-g.entered // the delete's commit is held
	must(t, b.Send(ctx, "t", []*Message{msg("x")}))
	if n := entityRecords(t, g.Store, id); n != 0 {
		t.Fatalf("the send wrote %d records of a subscription being deleted", n)
	}
	close(g.release)
	must(t, <-del)
	wantBodies(t, consumeInto(t, b, "t/Subscriptions/b", "", ReceiveAndDelete, 5).takeN(t, 1), "x")
	mustHoldInvariants(t, b)
}
