package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
)

// The rest of the crash load, beside the queue the ledger follows: a topic
// whose subscriptions filter with SQL and correlation filters, a queue
// whose consumer defers and dead-letters, and a session queue whose
// messages must keep their order per session. Each round, after the
// restart and before anything else runs, the management API's counts of
// these entities must equal what peek finds in them; then each is drained
// and checked against what the SDK acknowledged, and its bookkeeping
// starts afresh for the next round.

// Entities of the extra load, declared in configJSON.
const (
	topicName   = "crash-topic"
	sideName    = "crash-side"
	orderedName = "crash-ordered"
)

// subscriptions and what each lets through: "even" a SQL filter on an
// application property, "red" a correlation filter on the label, "all" the
// default rule.
var subscriptions = []struct {
	name    string
	matches func(n int) bool
}{
	{"even", func(n int) bool { return n%2 == 0 }},
	{"red", func(n int) bool { return n%3 == 0 }},
	{"all", func(int) bool { return true }},
}

const extrasConfig = `],"Topics":[{"Name":"` + topicName + `","Subscriptions":[
  {"Name":"even","Properties":{"LockDuration":"PT2M"},"Rules":[{"Name":"even","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"parity = 'even'"}}}]},
  {"Name":"red","Properties":{"LockDuration":"PT2M"},"Rules":[{"Name":"red","Properties":{"FilterType":"Correlation","CorrelationFilter":{"Label":"red"}}}]},
  {"Name":"all","Properties":{"LockDuration":"PT2M"}}]}`

const extrasQueues = `,
 {"Name":"` + sideName + `","Properties":{"LockDuration":"PT2M","MaxDeliveryCount":100}},
 {"Name":"` + orderedName + `","Properties":{"RequiresSession":true,"LockDuration":"PT2M"}}`

// extrasPatience bounds how long the drains of the extra entities wait,
// together, for required messages that have not come.
const extrasPatience = 20 * time.Second

// orderedSessions are the sessions of the ordered queue.
var orderedSessions = []string{"o0", "o1"}

// fate is what the side queue's consumer did with a message.
type fate uint8

const (
	fateNone fate = iota
	fateComplete
	fateDefer
	fateDeadLetter
)

// sideFate picks the fate of side message n.
func sideFate(n int) fate {
	switch n % 4 {
	case 1:
		return fateDefer
	case 2:
		return fateDeadLetter
	}
	return fateComplete
}

func (f fate) String() string {
	return [...]string{"nothing", "completion", "deferral", "dead-lettering"}[f]
}

// settled is an acknowledged or attempted settlement.
type settled struct {
	f   fate
	ok  bool  // acknowledged
	seq int64 // the message's sequence number (for deferred messages)
}

// extras is the bookkeeping of the extra load of one round, safe for
// concurrent use.
type extras struct {
	l  *ledger
	mu sync.Mutex
	// topic: sends (true: acknowledged) and completions per subscription.
	topicSent map[int]bool
	topicDone map[string]map[int]bool
	// side queue: sends and settlements.
	sideSent map[int]bool
	sideDone map[int]settled
	// ordered queue, per session: sends and completions by position k.
	ordSent map[string]map[int]bool
	ordDone map[string]map[int]bool
	next    int
}

func newExtras(l *ledger) *extras {
	x := &extras{l: l}
	x.reset()
	return x
}

// reset forgets everything: the entities were drained.
func (x *extras) reset() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.topicSent, x.sideSent, x.sideDone = map[int]bool{}, map[int]bool{}, map[int]settled{}
	x.topicDone, x.ordSent, x.ordDone = map[string]map[int]bool{}, map[string]map[int]bool{}, map[string]map[int]bool{}
	for _, s := range subscriptions {
		x.topicDone[s.name] = map[int]bool{}
	}
	for _, s := range orderedSessions {
		x.ordSent[s], x.ordDone[s] = map[int]bool{}, map[int]bool{}
	}
}

func (x *extras) violate(kind, format string, args ...any) {
	x.l.mu.Lock()
	defer x.l.mu.Unlock()
	x.l.violate(kind, nil, format, args...)
}

func (x *extras) id() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.next++
	return x.next
}

// number reads the "n" property of a message of the extra load.
func number(m *azservicebus.ReceivedMessage) (int, bool) {
	v, ok := m.ApplicationProperties["n"].(int64)
	return int(v), ok
}

// produceTopic sends numbered messages to the topic: even numbers carry
// parity = 'even', multiples of 3 the label "red".
func (ld *load) produceTopic(ctx context.Context, c *azservicebus.Client) error {
	s, err := c.NewSender(topicName, nil)
	if err != nil {
		return err
	}
	x := ld.x
	for ctx.Err() == nil {
		n := x.id()
		m := &azservicebus.Message{MessageID: to.Ptr("t-" + strconv.Itoa(n)), ApplicationProperties: map[string]any{"n": int64(n), "parity": "odd"}}
		if n%2 == 0 {
			m.ApplicationProperties["parity"] = "even"
		}
		if n%3 == 0 {
			m.Subject = to.Ptr("red")
		}
		err := s.SendMessage(ctx, m, nil)
		x.mu.Lock()
		x.topicSent[n] = err == nil
		x.mu.Unlock()
		if err != nil {
			return err
		}
		ld.done(opTopic)
	}
	return ctx.Err()
}

// consumeSubscription completes what subscription i delivers, checking that
// its filter lets it through.
func (ld *load) consumeSubscription(ctx context.Context, c *azservicebus.Client, i int) error {
	sub := subscriptions[i]
	r, err := c.NewReceiverForSubscription(topicName, sub.name, nil)
	if err != nil {
		return err
	}
	x := ld.x
	for ctx.Err() == nil {
		msgs, err := r.ReceiveMessages(ctx, 16, nil)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			n, ok := number(m)
			if !ok || !sub.matches(n) {
				x.violate(vFilter, "subscription %s delivered %s, which its filter does not match", sub.name, m.MessageID)
			}
			x.mu.Lock()
			x.topicDone[sub.name][n] = false
			x.mu.Unlock()
			err := r.CompleteMessage(ctx, m, nil)
			if err != nil {
				return err
			}
			x.mu.Lock()
			x.topicDone[sub.name][n] = true
			x.mu.Unlock()
			ld.done(opFiltered)
		}
	}
	return ctx.Err()
}

// produceSide sends numbered messages to the side queue.
func (ld *load) produceSide(ctx context.Context, c *azservicebus.Client) error {
	s, err := c.NewSender(sideName, nil)
	if err != nil {
		return err
	}
	x := ld.x
	for ctx.Err() == nil {
		n := x.id()
		err := s.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr("d-" + strconv.Itoa(n)), ApplicationProperties: map[string]any{"n": int64(n)}}, nil)
		x.mu.Lock()
		x.sideSent[n] = err == nil
		x.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// consumeSide defers, dead-letters or completes each message by its number.
func (ld *load) consumeSide(ctx context.Context, c *azservicebus.Client) error {
	r, err := c.NewReceiverForQueue(sideName, nil)
	if err != nil {
		return err
	}
	x := ld.x
	for ctx.Err() == nil {
		msgs, err := r.ReceiveMessages(ctx, 16, nil)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			n, ok := number(m)
			if !ok {
				x.violate(vPhantom, "%s: unexpected message %s", sideName, m.MessageID)
				continue
			}
			f := sideFate(n)
			x.mu.Lock()
			if prev, seen := x.sideDone[n]; seen && prev.ok {
				x.violate(vResurrected, "%s: %s delivered again after it was settled (%v)", sideName, m.MessageID, prev.f)
			}
			x.sideDone[n] = settled{f: f, seq: *m.SequenceNumber}
			x.mu.Unlock()
			var op opKind
			switch f {
			case fateDefer:
				err, op = r.DeferMessage(ctx, m, nil), opDefer
			case fateDeadLetter:
				err, op = r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("crashtest")}), opDeadLetter
			default:
				err, op = r.CompleteMessage(ctx, m, nil), opComplete
			}
			if err != nil {
				return err
			}
			x.mu.Lock()
			x.sideDone[n] = settled{f: f, ok: true, seq: *m.SequenceNumber}
			x.mu.Unlock()
			ld.done(op)
		}
	}
	return ctx.Err()
}

// produceOrdered sends messages k = 1, 2, ... to session sid, one at a
// time: each is sent only once the previous one was acknowledged.
func (ld *load) produceOrdered(ctx context.Context, c *azservicebus.Client, sid string) error {
	s, err := c.NewSender(orderedName, nil)
	if err != nil {
		return err
	}
	x := ld.x
	x.mu.Lock()
	k := len(x.ordSent[sid])
	x.mu.Unlock()
	for ctx.Err() == nil {
		k++
		err := s.SendMessage(ctx, &azservicebus.Message{SessionID: to.Ptr(sid), ApplicationProperties: map[string]any{"n": int64(k)}}, nil)
		x.mu.Lock()
		x.ordSent[sid][k] = err == nil
		x.mu.Unlock()
		if err != nil {
			return err
		}
		ld.done(opOrdered)
	}
	return ctx.Err()
}

// consumeOrdered locks session sid and completes its messages, which must
// come in the order they were sent. It receives one message per call: the
// SDK releases the messages that arrive between two ReceiveMessages calls
// while credit is left over (its "releaser"), and a released message comes
// back after those delivered meanwhile, on Service Bus as on Busbar. With
// one message per call no credit is left over, and the order is the
// broker's alone.
func (ld *load) consumeOrdered(ctx context.Context, c *azservicebus.Client, sid string) error {
	r, err := c.AcceptSessionForQueue(ctx, orderedName, sid, nil)
	if err != nil {
		return err
	}
	x := ld.x
	last, lastSeq := 0, int64(0)
	for ctx.Err() == nil {
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			k, _ := number(m)
			if k <= last {
				x.violate(vOrder, "session %s: message %d (sequence number %d, delivery count %d) delivered after message %d (sequence number %d)",
					sid, k, *m.SequenceNumber, m.DeliveryCount, last, lastSeq)
			}
			last, lastSeq = k, *m.SequenceNumber
			x.mu.Lock()
			x.ordDone[sid][k] = false
			x.mu.Unlock()
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				return err
			}
			x.mu.Lock()
			x.ordDone[sid][k] = true
			x.mu.Unlock()
		}
	}
	return ctx.Err()
}

// checkExtras runs after a restart, before any other client: it compares
// the management API's counts with what peek finds, then drains the extra
// entities and checks what comes back against the bookkeeping, and resets
// it.
func checkExtras(t *testing.T, x *extras, c *serveproc.Process) {
	t.Helper()
	ac, err := admin.NewClientFromConnectionString(adminConnString(c),
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{}}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(client)
	// Every message is available at once after a restart (locks die with
	// the process, and no extra entity has scheduled messages): the drains
	// wait for missing ones until patience, all together.
	patience := time.Now().Add(extrasPatience)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	waitExtrasServed(t, client)
	checkCounts(ctx, t, x, ac, client)

	// The load's workers are gone: the bookkeeping is read without x.mu.
	for _, sub := range subscriptions {
		r, err := client.NewReceiverForSubscription(topicName, sub.name, nil)
		if err != nil {
			t.Fatal(err)
		}
		required := map[int]bool{}
		for n, ok := range x.topicSent {
			if _, attempted := x.topicDone[sub.name][n]; ok && sub.matches(n) && !attempted {
				required[n] = true
			}
		}
		got, _ := drainNumbers(t, x, r, "subscription "+sub.name, 256, required, patience)
		for n := range required {
			if !got[n] {
				x.violate(vLost, "subscription %s: t-%d acknowledged, matching, never completed, not delivered after the restart", sub.name, n)
			}
		}
		for n := range got {
			if !sub.matches(n) {
				x.violate(vFilter, "subscription %s: t-%d delivered after the restart, but its filter does not match", sub.name, n)
			}
			if x.topicDone[sub.name][n] {
				x.violate(vResurrected, "subscription %s: t-%d delivered after its completion was acknowledged", sub.name, n)
			}
		}
	}

	// The side queue: active messages, then the deferred ones by sequence
	// number, then the dead-letter queue.
	r, err := client.NewReceiverForQueue(sideName, nil)
	if err != nil {
		t.Fatal(err)
	}
	required := map[int]bool{}
	for n, ok := range x.sideSent {
		if _, seen := x.sideDone[n]; ok && !seen {
			required[n] = true
		}
	}
	active, _ := drainNumbers(t, x, r, sideName, 256, required, patience)
	for n, d := range x.sideDone {
		if d.ok && active[n] {
			x.violate(vResurrected, "%s: d-%d active again after its %v was acknowledged", sideName, n, d.f)
		}
	}
	// Messages whose deferral was acknowledged must all be there; those
	// whose deferral failed at the crash may be.
	gotDeferred := map[int]bool{}
	var takeDeferred func(seqs []int64)
	// A sequence number that is not deferred fails the whole request, so
	// a failed request is retried one message at a time; what still fails
	// is missing (reported below when its deferral was acknowledged).
	timedOut := false // a broker that does not answer is not asked again
	takeDeferred = func(seqs []int64) {
		if timedOut {
			return
		}
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		msgs, err := r.ReceiveDeferredMessages(dctx, seqs, nil)
		dcancel()
		if err != nil {
			timedOut = isCtxErr(err)
			if len(seqs) > 1 {
				for _, seq := range seqs {
					takeDeferred([]int64{seq})
				}
			}
			return
		}
		for _, m := range msgs {
			n, _ := number(m)
			gotDeferred[n] = true
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("completing deferred d-%d: %v", n, err)
			}
		}
	}
	var deferred []int64
	for _, d := range x.sideDone {
		if d.f == fateDefer {
			deferred = append(deferred, d.seq)
		}
	}
	if len(deferred) > 0 {
		takeDeferred(deferred)
	}
	dlq, err := client.NewReceiverForQueue(sideName, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	required = map[int]bool{}
	for n, d := range x.sideDone {
		if d.ok && d.f == fateDeadLetter {
			required[n] = true
		}
	}
	dead, _ := drainNumbers(t, x, dlq, sideName+" dead-letter queue", 256, required, patience)
	for n, ok := range x.sideSent {
		d := x.sideDone[n]
		somewhere := active[n] || gotDeferred[n] || dead[n]
		switch {
		case !ok:
		case d.ok && d.f == fateComplete:
		case d.ok && d.f == fateDefer && !gotDeferred[n]:
			x.violate(vLost, "%s: d-%d's deferral was acknowledged, but it cannot be received by its sequence number after the restart", sideName, n)
		case d.ok && d.f == fateDeadLetter && !dead[n]:
			x.violate(vLost, "%s: d-%d's dead-lettering was acknowledged, but it is not in the dead-letter queue after the restart", sideName, n)
		case !d.ok && d.f != fateComplete && !somewhere:
			x.violate(vLost, "%s: d-%d acknowledged, not settled, gone after the restart", sideName, n)
		}
	}
	for n := range dead {
		if d := x.sideDone[n]; d.f != fateDeadLetter || (d.ok && !dead[n]) {
			x.violate(vPhantom, "%s: d-%d is dead-lettered, which the consumer never asked for", sideName, n)
		}
	}

	// The ordered sessions: what is left comes in order, and nothing
	// acknowledged is missing.
	for _, sid := range orderedSessions {
		actx, acancel := context.WithTimeout(ctx, drainTimeout)
		sr, err := client.AcceptSessionForQueue(actx, orderedName, sid, nil)
		acancel()
		if err != nil {
			t.Errorf("accepting session %s after the restart: %v", sid, err)
			continue
		}
		required := map[int]bool{}
		for k, ok := range x.ordSent[sid] {
			if _, attempted := x.ordDone[sid][k]; ok && !attempted {
				required[k] = true
			}
		}
		got, order := drainNumbers(t, x, sr, "session "+sid, 1, required, patience)
		_ = sr.Close(ctx)
		if !sort.IntsAreSorted(order) {
			x.violate(vOrder, "session %s: after the restart the messages came in the order %v", sid, first64(order))
		}
		for k := range required {
			if !got[k] {
				x.violate(vLost, "session %s: message %d acknowledged, never completed, not delivered after the restart", sid, k)
			}
		}
		for k := range x.ordSent[sid] {
			if got[k] && x.ordDone[sid][k] {
				x.violate(vResurrected, "session %s: message %d delivered after its completion was acknowledged", sid, k)
			}
		}
	}
	x.reset()
}

// waitExtrasServed waits until every extra entity answers a peek: on a store
// shared by a cluster (PostgreSQL), the restarted node serves an entity only
// once the lease its killed predecessor held has expired.
func waitExtrasServed(t *testing.T, client *azservicebus.Client) {
	t.Helper()
	peekOne := func(p peeker, err error) error {
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = p.PeekMessages(ctx, 1, nil)
		_ = p.Close(ctx)
		return err
	}
	probes := map[string]func() error{
		sideName: func() error { return peekOne(client.NewReceiverForQueue(sideName, nil)) },
		orderedName: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return peekOne(client.AcceptSessionForQueue(ctx, orderedName, orderedSessions[0], nil))
		},
	}
	for _, sub := range subscriptions {
		probes[sub.name] = func() error { return peekOne(client.NewReceiverForSubscription(topicName, sub.name, nil)) }
	}
	for name, probe := range probes {
		poll.UntilNil(t, drainTimeout, name+" served after the restart", probe)
	}
}

// drainer is a Receiver or a SessionReceiver.
type drainer interface {
	ReceiveMessages(ctx context.Context, max int, opts *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, opts *azservicebus.CompleteMessageOptions) error
}

// drainNumbers receives and completes everything r delivers until it is
// quiet and every number in required has come, or patience passed, and
// returns the numbers delivered, in order. It receives perCall messages
// per call: 1 where order is checked (see consumeOrdered).
func drainNumbers(t *testing.T, x *extras, r drainer, what string, perCall int, required map[int]bool, patience time.Time) (map[int]bool, []int) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), patience)
	defer cancel()
	got := map[int]bool{}
	var order []int
	for {
		qctx, qcancel := context.WithTimeout(ctx, quietWait)
		msgs, err := r.ReceiveMessages(qctx, perCall, nil)
		qcancel()
		if err != nil && !isCtxErr(err) {
			t.Fatalf("draining %s: %v", what, err)
		}
		if len(msgs) == 0 {
			missing := false
			for n := range required {
				missing = missing || !got[n]
			}
			if !missing || ctx.Err() != nil {
				return got, order
			}
			continue
		}
		for _, m := range msgs {
			n, ok := number(m)
			if !ok {
				x.violate(vPhantom, "%s: unexpected message %s", what, m.MessageID)
			}
			if got[n] {
				x.violate(vResurrected, "%s: %s delivered twice in one drain", what, m.MessageID)
			}
			got[n], order = true, append(order, n)
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("draining %s: completing %s: %v", what, m.MessageID, err)
			}
		}
	}
}

// countsOf is what peek finds in an entity.
type countsOf struct{ active, deferred, scheduled, dead int32 }

// peekCounts peeks every message that the receivers of an entity (one, or
// one per session) and its dead-letter queue's receiver show, and closes
// them.
func peekCounts(ctx context.Context, t *testing.T, mains []peeker, dlq peeker) countsOf {
	t.Helper()
	var c countsOf
	for _, r := range append(mains, dlq) {
		from := int64(0)
		for {
			msgs, err := r.PeekMessages(ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				from = *m.SequenceNumber + 1
				switch {
				case r == dlq:
					c.dead++
				case m.State == azservicebus.MessageStateDeferred:
					c.deferred++
				case m.State == azservicebus.MessageStateScheduled:
					c.scheduled++
				default:
					c.active++
				}
			}
		}
		_ = r.Close(ctx)
	}
	return c
}

// peeker is a Receiver or a SessionReceiver.
type peeker interface {
	PeekMessages(ctx context.Context, max int, opts *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	Close(ctx context.Context) error
}

// checkCounts compares the runtime properties the admin SDK reads with
// what peek finds, for each extra entity. Nothing else runs meanwhile.
func checkCounts(ctx context.Context, t *testing.T, x *extras, ac *admin.Client, client *azservicebus.Client) {
	t.Helper()
	compare := func(what string, got countsOf, active, dead, scheduled, total int64) {
		if int64(got.active) != active || int64(got.dead) != dead || int64(got.scheduled) != scheduled ||
			int64(got.active+got.deferred+got.scheduled+got.dead) != total {
			x.violate(vCounts, "%s: the management API counts active %d, dead-lettered %d, scheduled %d, total %d; peek finds active %d, deferred %d, scheduled %d, dead-lettered %d",
				what, active, dead, scheduled, total, got.active, got.deferred, got.scheduled, got.dead)
		}
	}
	must := func(r peeker, err error) peeker {
		t.Helper()
		if err != nil {
			t.Fatalf("a receiver for the counts: %v", err)
		}
		return r
	}
	dlqOpts := &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}
	queues := map[string][]peeker{sideName: {must(client.NewReceiverForQueue(sideName, nil))}}
	for _, sid := range orderedSessions {
		queues[orderedName] = append(queues[orderedName], must(client.AcceptSessionForQueue(ctx, orderedName, sid, nil)))
	}
	for q, mains := range queues {
		got := peekCounts(ctx, t, mains, must(client.NewReceiverForQueue(q, dlqOpts)))
		p, err := ac.GetQueueRuntimeProperties(ctx, q, nil)
		if err != nil || p == nil {
			t.Fatalf("runtime properties of %s: %v", q, err)
		}
		compare(q, got, int64(p.ActiveMessageCount), int64(p.DeadLetterMessageCount), int64(p.ScheduledMessageCount), p.TotalMessageCount)
	}
	for _, sub := range subscriptions {
		got := peekCounts(ctx, t, []peeker{must(client.NewReceiverForSubscription(topicName, sub.name, nil))},
			must(client.NewReceiverForSubscription(topicName, sub.name, dlqOpts)))
		p, err := ac.GetSubscriptionRuntimeProperties(ctx, topicName, sub.name, nil)
		if err != nil || p == nil {
			t.Fatalf("runtime properties of subscription %s: %v", sub.name, err)
		}
		compare("subscription "+sub.name, got, int64(p.ActiveMessageCount), int64(p.DeadLetterMessageCount), 0, p.TotalMessageCount)
	}
}

// plainHTTP sends the admin client's requests, which it always builds as
// https URLs, over the child's plain HTTP listener.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(r)
}

// adminConnString is the child's connection string for its HTTP listener.
func adminConnString(c *serveproc.Process) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		c.HTTPAddr(), sharedAccessKey(c.ConnectionString()))
}

func first64(ns []int) []int {
	if len(ns) > 64 {
		return ns[:64]
	}
	return ns
}
