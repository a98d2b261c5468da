package geo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
)

// PositionProperty is the application property that carries a message's
// position in its session: 1 for the first message, one more for each
// next one, without gaps.
const PositionProperty = "GeoPosition"

// DefaultDelay is how much later the secondary copy becomes available
// unless SenderOptions.Delay says otherwise.
const DefaultDelay = 15 * time.Second

// SenderOptions configure a Sender. The zero value is usable.
type SenderOptions struct {
	// Delay is how much later than the primary copy the secondary copy
	// becomes available (its ScheduledEnqueueTime). Zero: DefaultDelay;
	// negative: no delay. The secondary copies of one session are
	// scheduled at least a millisecond apart, in the order of the calls to
	// Send (see Sender.Send).
	Delay time.Duration
	// Straggler bounds how long a Send waits for the second namespace
	// once the first has accepted (default 2 seconds): a namespace that is
	// down must not slow every send down to its timeouts. The straggling
	// send is cancelled and reported as failed with
	// context.DeadlineExceeded, although it may have reached the namespace.
	Straggler time.Duration
	// Clock gives the time the delay counts from (default clock.Real()).
	Clock clock.Clock
}

// Sender sends every message to two namespaces: the primary copy now, the
// secondary copy Delay later.
type Sender struct {
	primary, secondary *azservicebus.Sender
	delay, straggler   time.Duration
	clock              clock.Clock

	mu      sync.Mutex
	last    map[string]time.Time // session → its last secondary copy's ScheduledEnqueueTime
	pruneAt int                  // len(last) at which stale entries are dropped
}

// minPrune is the size below which the map of last scheduled times is not
// pruned.
const minPrune = 1024

// NewSender returns a Sender over a sender of the same queue or topic in
// each namespace.
func NewSender(primary, secondary *azservicebus.Sender, o *SenderOptions) (*Sender, error) {
	if primary == nil || secondary == nil {
		return nil, errors.New("geo: NewSender needs a primary and a secondary sender")
	}
	if o == nil {
		o = &SenderOptions{}
	}
	s := &Sender{primary: primary, secondary: secondary, delay: o.Delay, straggler: o.Straggler, clock: o.Clock,
		last: map[string]time.Time{}, pruneAt: minPrune}
	if s.straggler <= 0 {
		s.straggler = 2 * time.Second
	}
	if s.delay == 0 {
		s.delay = DefaultDelay
	}
	if s.delay < 0 {
		s.delay = 0
	}
	if s.clock == nil {
		s.clock = clock.Real()
	}
	return s, nil
}

// Sent reports what each namespace said to a Send: nil where it accepted
// the message.
type Sent struct {
	Primary, Secondary error
}

// Both reports whether both namespaces accepted the message.
func (s Sent) Both() bool { return s.Primary == nil && s.Secondary == nil }

// Accepted names the namespaces that accepted the message: "primary",
// "secondary", both or none.
func (s Sent) Accepted() []string {
	var out []string
	if s.Primary == nil {
		out = append(out, "primary")
	}
	if s.Secondary == nil {
		out = append(out, "secondary")
	}
	return out
}

// ErrNotSent wraps the error of a Send that neither namespace accepted.
var ErrNotSent = errors.New("geo: neither namespace accepted the message")

// Send sends m, which must have a MessageID and a SessionID, as message
// position of its session (≥ 1) to both namespaces at once. It returns an
// error wrapping ErrNotSent (and both namespaces' errors) only when neither
// accepted it; otherwise Sent says which did. Sending the same message
// again is safe where the entities have duplicate detection on (and the
// consumer completes a copy whose position is done in any case). m is not
// modified.
//
// The secondary copies of a session must become available in the order of
// their positions: the consumer handles a session's messages in the order
// the namespace delivers them, and waits at position k+1 for k, so a copy
// of k behind k+1 in the secondary would stall the session there once the
// primary region is gone. A scheduled message is ordered by when it
// becomes active, and Service Bus keeps ScheduledEnqueueTime in whole
// milliseconds and says nothing of the order of copies due in the same
// one (Busbar activates them in send order; this does not count on it).
// So each secondary copy of a
// session is scheduled at least a millisecond after the one Send scheduled
// before it: send a session's positions one after another, each once the
// Send of the one before returned.
func (s *Sender) Send(ctx context.Context, m *azservicebus.Message, position int64) (Sent, error) {
	if m == nil || m.MessageID == nil || *m.MessageID == "" || m.SessionID == nil || *m.SessionID == "" {
		return Sent{}, errors.New("geo: Send needs a message with a MessageID and a SessionID")
	}
	if position < 1 {
		return Sent{}, fmt.Errorf("geo: position %d: positions start at 1", position)
	}
	first := withPosition(m, position)
	second := withPosition(m, position)
	if s.delay > 0 {
		at := s.scheduleAt(*m.SessionID)
		second.ScheduledEnqueueTime = &at
	}
	type result struct {
		primary bool
		err     error
	}
	results := make(chan result, 2)
	pctx, cancelP := context.WithCancel(ctx)
	defer cancelP()
	sctx, cancelS := context.WithCancel(ctx)
	defer cancelS()
	go func() { results <- result{true, s.primary.SendMessage(pctx, first, nil)} }()
	go func() { results <- result{false, s.secondary.SendMessage(sctx, second, nil)} }()
	var sent Sent
	for i := range 2 {
		r := <-results
		if r.primary {
			sent.Primary = r.err
		} else {
			sent.Secondary = r.err
		}
		if i == 0 && r.err == nil {
			// One accepted: give the other Straggler, on real time (it
			// bounds a network call).
			t := time.AfterFunc(s.straggler, func() { cancelP(); cancelS() })
			defer t.Stop()
		}
	}
	if sent.Primary != nil && sent.Secondary != nil {
		return sent, fmt.Errorf("%w: primary: %w; secondary: %w", ErrNotSent, sent.Primary, sent.Secondary)
	}
	return sent, nil
}

// scheduleAt returns when the secondary copy of the next message of
// session becomes available: Delay from now, in whole milliseconds (the
// resolution of ScheduledEnqueueTime on the wire), and at least a
// millisecond after the session's copy scheduled before, so that the
// copies of a session become active in the order they were sent.
func (s *Sender) scheduleAt(session string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := s.clock.Now().Add(s.delay).Truncate(time.Millisecond)
	at := base
	if last, ok := s.last[session]; ok && !at.After(last) {
		at = last.Add(time.Millisecond)
	}
	s.last[session] = at
	if len(s.last) >= s.pruneAt {
		// A session whose last copy is due before base needs no entry:
		// its next copy gets base or later anyway.
		for sid, t := range s.last {
			if t.Before(base) {
				delete(s.last, sid)
			}
		}
		s.pruneAt = max(minPrune, 2*len(s.last))
	}
	return at
}

// withPosition returns a shallow copy of m with its own application
// properties, position among them.
func withPosition(m *azservicebus.Message, position int64) *azservicebus.Message {
	c := *m
	c.ApplicationProperties = make(map[string]any, len(m.ApplicationProperties)+1)
	for k, v := range m.ApplicationProperties {
		c.ApplicationProperties[k] = v
	}
	c.ApplicationProperties[PositionProperty] = position
	return &c
}

// Position returns the position m carries, or an error when it carries
// none.
func Position(m *azservicebus.ReceivedMessage) (int64, error) {
	v, ok := m.ApplicationProperties[PositionProperty]
	if !ok {
		return 0, fmt.Errorf("geo: message %s has no %s property", m.MessageID, PositionProperty)
	}
	var p int64
	switch n := v.(type) {
	case int64:
		p = n
	case int32:
		p = int64(n)
	case int:
		p = int64(n)
	default:
		return 0, fmt.Errorf("geo: message %s: %s is a %T, not an integer", m.MessageID, PositionProperty, v)
	}
	if p < 1 {
		return 0, fmt.Errorf("geo: message %s: %s %d is below 1", m.MessageID, PositionProperty, p)
	}
	return p, nil
}
