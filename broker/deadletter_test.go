package broker

import (
	"testing"
)

// Dead-letter queues, after service-bus-dead-letter-queues.md.

func TestDeadLetterWithReasonDescriptionAndProperties(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	e.send("q", &Message{Body: []byte("bad"), Properties: map[string]any{"n": int32(1)}})
	m := e.receive("q", PeekLock, 1)[0]
	e.must(e.b.DeadLetter(e.ctx, "q", "Invalid", "field x missing", map[string]any{"extra": true}, m.LockToken))
	if ri := e.info("q"); ri.ActiveMessageCount != 0 || ri.DeadLetterMessageCount != 1 {
		t.Fatalf("runtime %+v", ri)
	}
	peek := mustPeek(e, "q/$DeadLetterQueue")
	wantBodies(t, peek, "bad")
	dl := e.receive("Q/$deadletterqueue", PeekLock, 1)[0]
	p := dl.Properties
	if p[PropDeadLetterReason] != "Invalid" || p[PropDeadLetterErrorDescription] != "field x missing" || p["extra"] != true || p["n"] != int32(1) || !dl.PropertiesModified {
		t.Fatalf("properties %v", p)
	}
	if dl.SequenceNumber != m.SequenceNumber {
		t.Fatalf("dead-lettered sequence number %d, want %d", dl.SequenceNumber, m.SequenceNumber)
	}
	// Cannot dead-letter from the dead-letter queue.
	wantErr(t, e.b.DeadLetter(e.ctx, "q/$DeadLetterQueue", "again", "", nil, dl.LockToken), ErrInvalidArgument)
	e.must(e.b.Complete(e.ctx, "q/$DeadLetterQueue", dl.LockToken))
	if ri := e.info("q"); ri.TotalMessageCount != 0 {
		t.Fatalf("runtime %+v", ri)
	}
}

func TestDeadLetterQueueDoesNotExpire(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{DeadLetteringOnMessageExpiration: true})
	e.send("q", &Message{Body: []byte("a"), TimeToLive: 1e9})
	e.clk.Advance(2e9)
	e.clk.Advance(1e15)
	wantBodies(t, mustPeek(e, "q/$DeadLetterQueue"), "a")
}

func TestDeadLetteredMessagesForwarded(t *testing.T) {
	e := newEnv(t)
	e.queue("dlq-sink", QueueProperties{})
	e.queue("q", QueueProperties{ForwardDeadLetteredMessagesTo: "dlq-sink"})
	e.send("q", msg("x"))
	m := e.receive("q", PeekLock, 1)[0]
	e.must(e.b.DeadLetter(e.ctx, "q", "r", "d", nil, m.LockToken))
	if ri := e.info("q"); ri.TotalMessageCount != 0 {
		t.Fatalf("source keeps %+v", ri)
	}
	got := e.receive("dlq-sink", PeekLock, 1)
	wantBodies(t, got, "x")
	if got[0].DeadLetterSource != "q" || got[0].Properties[PropDeadLetterReason] != "r" {
		t.Fatalf("forwarded dead letter: source %q props %v", got[0].DeadLetterSource, got[0].Properties)
	}
}

// A dead letter whose forward fails (the destination refuses it: no
// session id for a session queue) stays in the source's dead-letter
// subqueue with its dead-letter reason, in the store as in memory: after a
// restart, and with the body cache full (when the change reaches only the
// store).
func TestDeadLetterKeptWhenItsForwardFails(t *testing.T) {
	for _, full := range []bool{false, true} {
		e := newEnv(t)
		e.queue("sink", QueueProperties{RequiresSession: true})
		e.queue("q", QueueProperties{ForwardDeadLetteredMessagesTo: "sink"})
		e.send("q", msg("x"))
		m := e.receive("q", PeekLock, 1)[0]
		if full {
			e.b.cache.limit = 0 // every put refused from now on
		}
		e.must(e.b.DeadLetter(e.ctx, "q", "r", "d", nil, m.LockToken))
		check := func(when string) {
			t.Helper()
			got := mustPeek(e, "q/$DeadLetterQueue")
			wantBodies(t, got, "x")
			if got[0].Properties[PropDeadLetterReason] != "r" || got[0].Properties[PropDeadLetterErrorDescription] != "d" {
				t.Fatalf("cache full %v, %s: dead letter's properties %v, want reason r and description d", full, when, got[0].Properties)
			}
		}
		check("before a restart")
		e.restart()
		check("after a restart")
	}
}

type countingObserver struct {
	in, out, locks int
	reasons        map[string]int
}

func (o *countingObserver) MessagesIn(string, int)      { o.in++ }
func (o *countingObserver) MessagesOut(_ string, n int) { o.out += n }
func (o *countingObserver) DeadLettered(_, r string)    { o.reasons[r]++ }
func (o *countingObserver) LockExpired(string)          { o.locks++ }

func TestObserverSeesDeadLetterReasonsAndLockExpiries(t *testing.T) {
	e := newEnv(t)
	o := &countingObserver{reasons: map[string]int{}}
	e.b.obs = o
	e.queue("q", QueueProperties{MaxDeliveryCount: 1, LockDuration: MinLockDuration})
	e.send("q", msg("a"))
	e.receive("q", PeekLock, 1)
	e.clk.Advance(MinLockDuration)
	if o.locks != 1 || o.reasons[ReasonMaxDeliveryCountExceeded] != 1 || o.in != 1 || o.out != 1 {
		t.Fatalf("observer %+v", o)
	}
}
