package crashtest

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The ledger is the test's record of what the broker acknowledged, kept
// from the SDK's return values only, and the judge of every delivery and of
// every drain. Each message the test sends carries a number unique in the
// whole run (its MessageId "m-<n>", its "n" application property and its
// body all say it), so a delivery names the record it must agree with.

// outcome is what the test knows of an operation on a message.
type outcome uint8

const (
	none    outcome = iota // not attempted
	pending                // attempted, no answer yet
	acked                  // the SDK call returned nil: the broker acknowledged it
	unknown                // the call failed (the crash): it may or may not have happened
	gone                   // unknown, then a full drain showed it did happen
)

func (o outcome) String() string {
	return [...]string{"none", "pending", "acked", "unknown", "gone"}[o]
}

// schedTolerance is how much earlier than its scheduled time a scheduled
// message may arrive: AMQP timestamps have millisecond precision.
const schedTolerance = 5 * time.Millisecond

// record is everything the test knows of one message.
type record struct {
	n         int64
	batch     int64     // the send (or schedule) call it went in
	scheduled time.Time // zero: sent for immediate delivery
	send      outcome
	cancel    outcome // scheduled messages only
	complete  outcome
	// floor is the lowest DeliveryCount the next delivery may show: the
	// highest count already shown, or one more than an acknowledged abandon.
	floor uint32
	// deliveries counts the deliveries seen; lockedRound is the round in
	// which the message was delivered and not settled yet (0: none).
	deliveries  int
	lockedRound int
	// heldAtCrash: locked and unsettled when the broker was killed.
	heldAtCrash bool
	heldFloor   uint32 // floor at the crash
	lost        bool   // reported lost: not required any more
	// drainedIn is the last round whose drain delivered the message.
	drainedIn int
	history   []string
}

// call is one send or schedule call of the SDK and the messages it carried.
type call struct {
	name string
	ns   []int64
	torn bool // reported as torn
}

// sessionRecord follows one session's state.
type sessionRecord struct {
	acked    string // last value whose set was acknowledged ("" = none)
	inFlight string // value being set, or whose set failed at the crash
	flying   bool
}

// ledger is the record of a whole run, safe for concurrent use.
type ledger struct {
	mu         sync.Mutex
	round      int  // 1-based: the load of round r, then the drain after its crash
	draining   bool // the drain of round is running
	next       int64
	nextBatch  int64
	recs       map[int64]*record
	batches    map[int64]*call
	sessions   map[string]*sessionRecord
	lastSched  time.Time // latest scheduled time ever attempted
	violations []violation
}

func newLedger() *ledger {
	return &ledger{round: 1, recs: map[int64]*record{}, batches: map[int64]*call{}, sessions: map[string]*sessionRecord{}}
}

// body is the payload of message n; deliveries must bring it back exactly.
func body(n int64) []byte {
	return []byte(fmt.Sprintf("crashtest message %d %s", n, strings.Repeat("*", int(n%61))))
}

// messageID is message n's MessageId.
func messageID(n int64) string { return "m-" + strconv.FormatInt(n, 10) }

// newMessages allocates count fresh numbers, records them as one pending
// send (scheduled at, unless at is zero) and returns the SDK messages.
func (l *ledger) newMessages(count int, at time.Time) ([]int64, []*azservicebus.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextBatch++
	ns := make([]int64, count)
	msgs := make([]*azservicebus.Message, count)
	for i := range ns {
		l.next++
		n := l.next
		ns[i] = n
		id := messageID(n)
		msgs[i] = &azservicebus.Message{MessageID: &id, Body: body(n), ApplicationProperties: map[string]any{"n": n}}
		r := &record{n: n, batch: l.nextBatch, scheduled: at, send: pending, floor: 1}
		l.recs[n] = r
		l.note(r, "send attempted (%d in call %d)", count, l.nextBatch)
	}
	c := &call{name: "SendMessage", ns: ns}
	switch {
	case !at.IsZero():
		c.name = "ScheduleMessages"
	case count > 1:
		c.name = "SendMessageBatch"
	}
	l.batches[l.nextBatch] = c
	if at.After(l.lastSched) {
		l.lastSched = at
	}
	return ns, msgs
}

// note appends to r's history (l.mu held), keeping the last entries.
func (l *ledger) note(r *record, format string, args ...any) {
	phase := "load"
	if l.draining {
		phase = "drain"
	}
	r.history = append(r.history, fmt.Sprintf("r%d %s: %s", l.round, phase, fmt.Sprintf(format, args...)))
	if len(r.history) > 16 {
		r.history = append(r.history[:1], r.history[len(r.history)-15:]...)
	}
}

// Kinds of violation, in the order the test reports them.
const (
	vLost        = "lost"        // acknowledged, not completed, gone after the restart
	vResurrected = "resurrected" // delivered after it was shown or acknowledged gone
	vCount       = "count"       // DeliveryCount went down
	vState       = "state"       // a session state read back wrong
	vTorn        = "torn"        // part of one unacknowledged call took effect
	vEarly       = "early"       // a scheduled message fired before its time
	vCorrupt     = "corrupt"     // a delivery's body or properties differ from the send
	vPhantom     = "phantom"     // a message no producer sent
	vReadBack    = "read-back"   // a value read differs from the one just acknowledged
	vWorker      = "worker"      // a worker failed before the crash
	vFilter      = "filter"      // a subscription holds a message its filter does not match
	vOrder       = "order"       // a session's messages came out of order
	vCounts      = "counts"      // the management API's counts differ from what is there
)

var violationOrder = []string{vLost, vResurrected, vCount, vState, vTorn, vEarly, vCorrupt, vPhantom, vReadBack, vFilter, vOrder, vCounts, vWorker}

// violation is one broken invariant.
type violation struct {
	kind, text string
}

// violate records a broken invariant (l.mu held).
func (l *ledger) violate(kind string, r *record, format string, args ...any) {
	msg := fmt.Sprintf("round %d: %s: ", l.round, kind) + fmt.Sprintf(format, args...)
	if r != nil {
		msg += "\n\thistory of " + messageID(r.n) + ":\n\t\t" + strings.Join(r.history, "\n\t\t")
	}
	l.violations = append(l.violations, violation{kind, msg})
}

// sent records the answer to a send or schedule call of ns.
func (l *ledger) sent(ns []int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range ns {
		r := l.recs[n]
		switch {
		case err == nil:
			r.send = acked
			l.note(r, "send acknowledged")
		case r.deliveries > 0:
			// Delivered before the answer came: it is in the broker.
			l.note(r, "send failed after the message was delivered: %v", err)
		default:
			r.send = unknown
			l.note(r, "send failed: %v", err)
		}
	}
}

// cancelling and cancelled record a CancelScheduledMessages call for n.
func (l *ledger) cancelling(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[n]
	r.cancel = pending
	l.note(r, "cancel attempted")
}

func (l *ledger) cancelled(n int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[n]
	if err == nil {
		r.cancel = acked
		l.note(r, "cancel acknowledged")
	} else {
		r.cancel = unknown
		l.note(r, "cancel failed: %v", err)
	}
}

// delivered checks a delivery against the record and returns the message's
// number; ok is false when the message is not one the test sent.
func (l *ledger) delivered(m *azservicebus.ReceivedMessage, at time.Time) (n int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var seq int64
	if m.SequenceNumber != nil {
		seq = *m.SequenceNumber
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(m.MessageID, "m-"), 10, 64)
	r := l.recs[n]
	if err != nil || !strings.HasPrefix(m.MessageID, "m-") || r == nil {
		l.violate(vPhantom, nil, "delivered a message no producer sent: MessageId %q, sequence number %d, body %q", m.MessageID, seq, m.Body)
		return 0, false
	}
	l.note(r, "delivered: seq %d, DeliveryCount %d", seq, m.DeliveryCount)
	if !bytes.Equal(m.Body, body(n)) {
		l.violate(vCorrupt, r, "%s delivered with body %q, sent with %q", m.MessageID, m.Body, body(n))
	}
	if v, _ := m.ApplicationProperties["n"].(int64); v != n {
		l.violate(vCorrupt, r, "%s delivered with application property n = %#v, sent with %d", m.MessageID, m.ApplicationProperties["n"], n)
	}
	switch {
	case r.send == gone:
		l.violate(vResurrected, r, "%s delivered after a drain had shown its unacknowledged send absent", m.MessageID)
	case r.complete == acked:
		l.violate(vResurrected, r, "%s delivered again after its completion was acknowledged", m.MessageID)
	case r.complete == gone:
		l.violate(vResurrected, r, "%s delivered again after a drain had shown its unacknowledged completion done", m.MessageID)
	case r.cancel == acked:
		l.violate(vResurrected, r, "scheduled %s fired although its cancellation was acknowledged", m.MessageID)
	case r.cancel == gone:
		l.violate(vResurrected, r, "scheduled %s fired after a drain had shown its unacknowledged cancellation done", m.MessageID)
	}
	if !r.scheduled.IsZero() && at.Before(r.scheduled.Add(-schedTolerance)) {
		l.violate(vEarly, r, "scheduled %s delivered at %s, %v before its time %s", m.MessageID,
			at.Format(time.RFC3339Nano), r.scheduled.Sub(at), r.scheduled.Format(time.RFC3339Nano))
	}
	if m.DeliveryCount < r.floor {
		l.violate(vCount, r, "%s delivered with DeliveryCount %d, below %d, the count it had already reached", m.MessageID, m.DeliveryCount, r.floor)
	}
	r.floor = max(r.floor, m.DeliveryCount)
	if r.complete == unknown {
		r.complete = none // the failed completion did not happen: it is here
	}
	if r.cancel == unknown {
		r.cancel = none
	}
	if r.send == pending || r.send == unknown {
		r.send = acked // it is in the broker: from now on it must not be lost
	}
	r.deliveries++
	r.lockedRound = l.round
	if l.draining {
		r.drainedIn = l.round
	}
	return n, true
}

// completed records the answer to CompleteMessage for n.
func (l *ledger) completed(n int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[n]
	r.lockedRound = 0
	if err == nil {
		r.complete = acked
		l.note(r, "completion acknowledged")
	} else {
		r.complete = unknown
		l.note(r, "completion failed: %v", err)
	}
}

// abandoned records the answer to AbandonMessage for n, delivered with
// DeliveryCount count.
func (l *ledger) abandoned(n int64, count uint32, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.recs[n]
	if err == nil {
		r.lockedRound = 0
		r.floor = max(r.floor, count+1)
		l.note(r, "abandon acknowledged")
	} else {
		l.note(r, "abandon failed: %v", err)
	}
}

// setting and stateSet record a SetSessionState call.
func (l *ledger) setting(sid, v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.session(sid)
	s.inFlight, s.flying = v, true
}

func (l *ledger) stateSet(sid, v string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.session(sid)
	if err == nil {
		s.acked, s.inFlight, s.flying = v, "", false
	}
}

// stateRead checks a session state read back: before a crash only the last
// acknowledged value is right; after one, the value in flight may also be.
// The value read becomes the session's acknowledged state.
func (l *ledger) stateRead(sid string, got []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.session(sid)
	g := string(got)
	if g != s.acked && !(s.flying && g == s.inFlight) {
		want := fmt.Sprintf("%q", s.acked)
		if s.flying {
			want += fmt.Sprintf(" or %q (set in flight at the crash)", s.inFlight)
		}
		l.violate(vState, nil, "session %s state reads %q, want %s", sid, g, want)
	}
	s.acked, s.inFlight, s.flying = g, "", false
}

// ackedState returns the last acknowledged state of sid.
func (l *ledger) ackedState(sid string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.session(sid).acked
}

func (l *ledger) session(sid string) *sessionRecord {
	s := l.sessions[sid]
	if s == nil {
		s = &sessionRecord{}
		l.sessions[sid] = s
	}
	return s
}

// crashed marks the end of round's load: messages still locked are held
// at the crash and must come back.
func (l *ledger) crashed() (held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.lockedRound == l.round {
			r.heldAtCrash, r.heldFloor = true, r.floor
			r.lockedRound = 0
			held++
			l.note(r, "locked and unsettled at the crash")
		} else {
			r.heldAtCrash = false
		}
	}
	l.draining = true
	return held
}

// required reports whether r must still be in the broker (l.mu held): its
// send was acknowledged or it was delivered, no completion or cancellation
// of it may have happened, and it was not already reported lost.
func required(r *record) bool {
	return r.send == acked && r.complete == none && r.cancel == none && !r.lost
}

// missing returns the required messages the current drain has not
// delivered yet, in order.
func (l *ledger) missing() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for n, r := range l.recs {
		if required(r) && r.drainedIn != l.round {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// latestSchedule is the latest scheduled time of any scheduled message.
func (l *ledger) latestSchedule() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSched
}

// drainStats counts what the drain of the current round proved.
type drainStats struct {
	heldBack      int // locked at the crash and delivered again
	heldCounted   int // of those, with a DeliveryCount above 1 before the crash
	heldAtCrash   int
	scheduledBack int // scheduled, acknowledged before the crash, fired in the drain
	delivered     int
}

// endDrain closes the drain of the current round after it emptied the
// queue: a required message it did not deliver is lost, an unacknowledged
// batch must be whole or absent, and outcomes still unknown become known
// (absent). It starts the next round.
func (l *ledger) endDrain() drainStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	var st drainStats
	for _, r := range l.recs {
		in := r.drainedIn == l.round
		if in {
			st.delivered++
		}
		if r.heldAtCrash {
			st.heldAtCrash++
			if in {
				st.heldBack++
				if r.heldFloor > 1 {
					st.heldCounted++
				}
			}
		}
		if in && !r.scheduled.IsZero() && r.send == acked {
			st.scheduledBack++
		}
		if required(r) && !in {
			r.lost = true
			l.violate(vLost, r, "%s lost: %s, never completed, not delivered after the restart", messageID(r.n), describe(r))
		}
		if !in {
			if r.send == unknown {
				r.send = gone
			}
			if r.complete == unknown {
				r.complete = gone
			}
			if r.cancel == unknown {
				r.cancel = gone
			}
		}
	}
	for b, c := range l.batches {
		ns := c.ns
		seen, cancels := 0, false
		for _, n := range ns {
			r := l.recs[n]
			if r.deliveries > 0 {
				seen++
			}
			cancels = cancels || r.cancel != none
		}
		if !c.torn && !cancels && seen > 0 && seen < len(ns) {
			c.torn = true
			msg := fmt.Sprintf("%s call %d carried %d messages (%v) and was not acknowledged; only %d of them were ever delivered: the call took effect in part", c.name, b, len(ns), ns, seen)
			for _, n := range ns {
				msg += "\n\thistory of " + messageID(n) + ":\n\t\t" + strings.Join(l.recs[n].history, "\n\t\t")
			}
			l.violate(vTorn, nil, "%s", msg)
		}
	}
	l.round++
	l.draining = false
	return st
}

// describe says why r is required.
func describe(r *record) string {
	s := "send acknowledged"
	if r.deliveries > 0 {
		s = fmt.Sprintf("delivered %d times", r.deliveries)
	}
	if r.heldAtCrash {
		s += ", locked at the crash"
	}
	if !r.scheduled.IsZero() {
		s += ", scheduled for " + r.scheduled.Format(time.RFC3339Nano)
	}
	return s
}

// takeViolations returns and forgets the violations recorded so far.
func (l *ledger) takeViolations() []violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.violations
	l.violations = nil
	return v
}
