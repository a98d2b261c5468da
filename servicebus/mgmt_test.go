package servicebus_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
)

func TestScheduleAndCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	c := e.client()
	ctx := testCtx(t)
	s, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("s1")}, {Body: []byte("s2")}}, at, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("sequence numbers %v", seqs)
	}
	// A normal send with a scheduled time is scheduled too.
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("s3"), ScheduledEnqueueTime: &at}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 3 {
		t.Fatalf("peeked %d messages, want 3", len(peeked))
	}
	for i, m := range peeked {
		if m.State != azservicebus.MessageStateScheduled || m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) || *m.SequenceNumber != int64(i+1) {
			t.Fatalf("peeked %d: state %v scheduled %v seq %d", i, m.State, m.ScheduledEnqueueTime, *m.SequenceNumber)
		}
		if m.LockToken != [16]byte{} {
			t.Fatalf("peeked message carries a lock token")
		}
	}
	if err := s.CancelScheduledMessages(ctx, []int64{1, 3}, nil); err != nil {
		t.Fatal(err)
	}
	peeked, err = r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: ptr(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if len(peeked) != 1 || string(peeked[0].Body) != "s2" {
		t.Fatalf("after cancel, peeked %d messages", len(peeked))
	}
	if err := s.CancelScheduledMessages(ctx, []int64{1}, nil); sbCode(err) != azservicebus.CodeNotFound {
		t.Fatalf("cancel twice: %v, want CodeNotFound", err)
	}
}

// rpc is a raw $management client over go-amqp, for the operations the Go
// SDK does not send (rules, batch delete).
type rpc struct {
	t     testing.TB
	snd   *goamqp.Sender
	rcv   *goamqp.Receiver
	reply string
	n     int
}

func dialRPC(t testing.TB, e *env, entity string) *rpc {
	t.Helper()
	return dialRPCWith(t, e, entity, rootKeyName, rootKey)
}

func dialRPCWith(t testing.TB, e *env, entity, keyName, key string) *rpc {
	t.Helper()
	ctx := testCtx(t)
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{
		SASLType: goamqp.SASLTypePlain(keyName, key),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	node := entity + "/$management"
	r := &rpc{t: t, reply: "reply-" + entity}
	if r.snd, err = sess.NewSender(ctx, node, nil); err != nil {
		t.Fatal(err)
	}
	if r.rcv, err = sess.NewReceiver(ctx, node, &goamqp.ReceiverOptions{TargetAddress: r.reply, Credit: 10}); err != nil {
		t.Fatal(err)
	}
	return r
}

// call sends a request and returns the status code and body of the reply.
func (r *rpc) call(op string, body map[string]any) (int32, any, *goamqp.Message) {
	r.t.Helper()
	ctx := testCtx(r.t)
	r.n++
	id := r.n
	req := &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: uint64(id), ReplyTo: &r.reply},
		ApplicationProperties: map[string]any{"operation": op},
		Value:                 body,
	}
	if err := r.snd.Send(ctx, req, nil); err != nil {
		r.t.Fatal(err)
	}
	resp, err := r.rcv.Receive(ctx, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.Properties == nil || resp.Properties.CorrelationID != uint64(id) {
		r.t.Fatalf("correlation-id %v, want ulong %d", resp.Properties, id)
	}
	code, ok := resp.ApplicationProperties["statusCode"].(int32)
	if !ok {
		r.t.Fatalf("statusCode %T", resp.ApplicationProperties["statusCode"])
	}
	return code, resp.Value, resp
}

func TestRuleOperations(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if err := e.b.CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "t", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	r := dialRPC(t, e, "t/Subscriptions/s")

	code, _, _ := r.call("com.microsoft:add-rule", map[string]any{
		"rule-name": "big",
		"rule-description": map[string]any{
			"sql-filter":      map[string]any{"expression": "size > 10"},
			"sql-rule-action": map[string]any{"expression": "SET big = TRUE"},
		},
	})
	if code != 200 {
		t.Fatalf("add sql rule: %d", code)
	}
	code, _, _ = r.call("com.microsoft:add-rule", map[string]any{
		"rule-name": "corr",
		"rule-description": map[string]any{
			"correlation-filter": map[string]any{"correlation-id": "c1", "label": "L", "properties": map[string]any{"k": "v"}},
		},
	})
	if code != 200 {
		t.Fatalf("add correlation rule: %d", code)
	}
	code, _, resp := r.call("com.microsoft:add-rule", map[string]any{
		"rule-name": "big", "rule-description": map[string]any{"sql-filter": map[string]any{"expression": "1=1"}},
	})
	if code != 409 || resp.ApplicationProperties["errorCondition"] != "com.microsoft:entity-already-exists" {
		t.Fatalf("add a duplicate rule: %d %v", code, resp.ApplicationProperties)
	}

	code, _, resp = r.call("com.microsoft:enumerate-rules", map[string]any{"top": int32(10), "skip": int32(0)})
	if code != 200 {
		t.Fatalf("enumerate: %d", code)
	}
	// go-amqp hides described types: read the reply with our codec.
	raw, err := resp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	p, err := message.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	rules := lookup(t, p.Body.Value, "rules").(encoding.List)
	if len(rules) != 3 {
		t.Fatalf("%d rules, want $Default, big, corr", len(rules))
	}
	want := []struct {
		name   string
		filter uint64
		action uint64
		fields encoding.List
	}{
		{"$Default", 0x1370000007, 0x13700000005, encoding.List{}},
		{"big", 0x1370000006, 0x13700000006, encoding.List{"size > 10"}},
		{"corr", 0x1370000009, 0x13700000005, encoding.List{"c1", nil, nil, nil, "L", nil, nil, nil, encoding.Map{{Key: "k", Value: "v"}}}},
	}
	for i, w := range want {
		rd := lookup(t, rules[i], "rule-description").(*encoding.Described)
		if rd.Descriptor != uint64(0x13700000004) {
			t.Fatalf("rule %d descriptor %#x", i, rd.Descriptor)
		}
		fields := rd.Value.(encoding.List)
		f, a := fields[0].(*encoding.Described), fields[1].(*encoding.Described)
		if fields[2] != w.name || f.Descriptor != w.filter || a.Descriptor != w.action || !reflect.DeepEqual(f.Value, w.fields) {
			t.Fatalf("rule %d: name %v filter %#x %v action %#x, want %+v", i, fields[2], f.Descriptor, f.Value, a.Descriptor, w)
		}
	}

	if code, _, _ := r.call("com.microsoft:remove-rule", map[string]any{"rule-name": "big"}); code != 200 {
		t.Fatalf("remove: %d", code)
	}
	if code, _, _ := r.call("com.microsoft:remove-rule", map[string]any{"rule-name": "big"}); code != 404 {
		t.Fatalf("remove twice: %d, want 404", code)
	}
	got, err := e.b.ListRules(ctx, "t", "s", 0, 0)
	if err != nil || len(got) != 2 || got[1].Name != "corr" || got[1].Filter.Correlation.Subject != "L" || got[1].Filter.Correlation.Properties["k"] != "v" {
		t.Fatalf("rules after remove: %+v, %v", got, err)
	}
}

func TestBatchDeleteAndBadRequests(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("1")}, &azservicebus.Message{Body: []byte("2")}, &azservicebus.Message{Body: []byte("3")})
	r := dialRPC(t, e, "q")
	code, body, _ := r.call("com.microsoft:batch-delete-messages", map[string]any{"message-count": int32(2)})
	if code != 200 || body.(map[string]any)["message-count"] != int32(2) {
		t.Fatalf("batch delete: %d %v", code, body)
	}
	ms, err := e.b.Peek(context.Background(), "q", 0, 10)
	if err != nil || len(ms) != 1 || ms[0].SequenceNumber != 3 {
		t.Fatalf("left after delete: %d messages, %v", len(ms), err)
	}

	for _, tc := range []struct {
		op   string
		body map[string]any
		code int32
	}{
		{"com.microsoft:no-such-op", map[string]any{}, 501},
		{"com.microsoft:renew-lock", map[string]any{"lock-tokens": "nope"}, 400},
		{"com.microsoft:renew-lock", map[string]any{"lock-tokens": []goamqp.UUID{{1}}}, 410},
		{"com.microsoft:peek-message", map[string]any{"from-sequence-number": int64(100), "message-count": int32(1)}, 204},
		{"com.microsoft:update-disposition", map[string]any{"disposition-status": "weird", "lock-tokens": []goamqp.UUID{{1}}}, 400},
		{"com.microsoft:add-rule", map[string]any{"rule-name": "x"}, 400}, // not a subscription
	} {
		if code, _, resp := r.call(tc.op, tc.body); code != tc.code {
			t.Errorf("%s %v: status %d (%v), want %d", tc.op, tc.body, code, resp.ApplicationProperties["statusDescription"], tc.code)
		}
	}
}

// lookup returns a key of an AMQP map with string keys.
func lookup(t testing.TB, m any, key string) any {
	t.Helper()
	mm, ok := m.(encoding.Map)
	if !ok {
		t.Fatalf("%T is not a map", m)
	}
	for _, p := range mm {
		if p.Key == key {
			return p.Value
		}
	}
	t.Fatalf("no %q in %v", key, m)
	return nil
}

// A SASL PLAIN connection is authorized as its rule without $cbs: a key
// that grants only Listen may peek but not manage rules; a wrong key is
// refused at SASL.
func TestPlainAuthorization(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if err := e.b.CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "t", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	r := dialRPCWith(t, e, "t/Subscriptions/s", listenName, listenKey)
	if code, _, _ := r.call("com.microsoft:peek-message", map[string]any{"from-sequence-number": int64(0), "message-count": int32(1)}); code != 204 {
		t.Fatalf("peek an empty subscription: %d, want 204", code)
	}
	code, _, resp := r.call("com.microsoft:enumerate-rules", map[string]any{"top": int32(10), "skip": int32(0)})
	if code != 401 || resp.ApplicationProperties["errorCondition"] != "amqp:unauthorized-access" {
		t.Fatalf("enumerate rules with a listen key: %d %v", code, resp.ApplicationProperties)
	}
	_, err := goamqp.Dial(testCtx(t), "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(listenName, "wrong")})
	if err == nil {
		t.Fatal("SASL PLAIN with a wrong key was accepted")
	}
}
