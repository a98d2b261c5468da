package schedule

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Application properties of a fired message.
const (
	// PropScheduleName is the schedule's name.
	PropScheduleName = "ScheduleName"
	// PropScheduledFireTime is the nominal fire time, RFC 3339 in UTC:
	// the firing's identity, whatever time the message was sent at.
	PropScheduledFireTime = "ScheduledFireTime"
	// PropTrigger is why the message was sent: TriggerSchedule,
	// TriggerMisfire, TriggerQueued or TriggerManual.
	PropTrigger = "ScheduleTrigger"
	// PropConversationID is a conversation id of the firing's own: the
	// message's CorrelationId carries the same value, so each firing
	// starts a conversation of its own.
	PropConversationID = "ConversationId"
	// PropControlQueue is the control queue the schedule lives in, where
	// Done reports go.
	PropControlQueue = "ScheduleQueue"
)

// Values of PropTrigger.
const (
	TriggerSchedule = "schedule" // on time
	TriggerMisfire  = "misfire"  // late, under the misfire policy
	TriggerQueued   = "queued"   // held back by OverlapQueue, sent when the previous firing was done
	TriggerManual   = "manual"   // by Trigger
)

// Application properties of the control queue's own messages.
const (
	propKind       = "ScheduleMessage" // "tick" or "done"
	propGeneration = "ScheduleGeneration"
	kindTick       = "tick"
	kindDone       = "done"
)

// formatNominal renders a nominal time as ScheduledFireTime does.
func formatNominal(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// FiringID returns the MessageId of the firing of schedule name at nominal
// time t: "name@20260329T010000Z", or a hash of both when that would be
// longer than a MessageId may be.
func FiringID(name string, t time.Time) string {
	id := name + "@" + t.UTC().Format("20060102T150405.999999999Z")
	if len(id) <= 128 {
		return id
	}
	return "schedule-" + digest(name, formatNominal(t))[:48]
}

// ConversationID returns the conversation (and correlation) id of the
// firing of schedule name at nominal time t, a UUID-shaped value that is
// the same for the same firing and different for every other.
func ConversationID(name string, t time.Time) string {
	h := digest(name, formatNominal(t), "conversation")
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// jitter returns the delay of the firing of name at nominal, in [0, max).
func jitter(name string, nominal time.Time, max Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	sum := sha256.Sum256([]byte(name + "\x00" + formatNominal(nominal)))
	return time.Duration(binary.BigEndian.Uint64(sum[:8]) % uint64(max))
}

// firedMessage builds the message of one firing.
func (s *Scheduler) firedMessage(d Definition, nominal time.Time, trigger string) *azservicebus.Message {
	props := make(map[string]any, len(d.Message.Properties)+5)
	maps.Copy(props, d.Message.Properties)
	conv := ConversationID(d.Name, nominal)
	props[PropScheduleName] = d.Name
	props[PropScheduledFireTime] = formatNominal(nominal)
	props[PropTrigger] = trigger
	props[PropConversationID] = conv
	props[PropControlQueue] = s.queue
	id := FiringID(d.Name, nominal)
	body := d.Message.Body
	if body == nil {
		body = []byte{}
	}
	m := &azservicebus.Message{MessageID: &id, CorrelationID: &conv, Body: body, ApplicationProperties: props}
	if d.Message.Subject != "" {
		m.Subject = &d.Message.Subject
	}
	if d.Message.ContentType != "" {
		m.ContentType = &d.Message.ContentType
	}
	if d.Message.SessionID != "" {
		m.SessionID = &d.Message.SessionID
	}
	return m
}

// tickMessage builds the scheduled message that wakes the schedule for
// its firing at nominal.
func tickMessage(name string, generation int64, nominal time.Time) *azservicebus.Message {
	id := "tick-" + strconv.FormatInt(generation, 10) + "-" + nominal.UTC().Format("20060102T150405.999999999Z")
	return &azservicebus.Message{MessageID: &id, SessionID: &name, Body: []byte{}, ApplicationProperties: map[string]any{
		propKind: kindTick, propGeneration: generation, PropScheduledFireTime: formatNominal(nominal)}}
}

// Firing is a fired message as its worker sees it.
type Firing struct {
	Schedule       string    // the schedule's name
	Nominal        time.Time // the nominal fire time
	Trigger        string    // TriggerSchedule, TriggerMisfire, TriggerQueued or TriggerManual
	ConversationID string
	ControlQueue   string // where Done reports go
}

// ParseFiring reads the schedule properties of a received message; ok is
// false when it is not a fired message.
func ParseFiring(m *azservicebus.ReceivedMessage) (f Firing, ok bool) {
	name, _ := m.ApplicationProperties[PropScheduleName].(string)
	at, _ := m.ApplicationProperties[PropScheduledFireTime].(string)
	t, err := time.Parse(time.RFC3339Nano, at)
	if name == "" || err != nil {
		return Firing{}, false
	}
	f = Firing{Schedule: name, Nominal: t}
	f.Trigger, _ = m.ApplicationProperties[PropTrigger].(string)
	f.ConversationID, _ = m.ApplicationProperties[PropConversationID].(string)
	f.ControlQueue, _ = m.ApplicationProperties[PropControlQueue].(string)
	return f, true
}

// controlMessage reads the kind, generation and nominal time of a message
// of the control queue.
func controlMessage(m *azservicebus.ReceivedMessage) (kind string, gen int64, nominal time.Time, err error) {
	kind, _ = m.ApplicationProperties[propKind].(string)
	switch g := m.ApplicationProperties[propGeneration].(type) {
	case int64:
		gen = g
	case int32:
		gen = int64(g)
	case int:
		gen = int64(g)
	}
	at, _ := m.ApplicationProperties[PropScheduledFireTime].(string)
	if nominal, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return "", 0, time.Time{}, fmt.Errorf("control message %s: %s %q: %w", m.MessageID, PropScheduledFireTime, at, err)
	}
	return kind, gen, nominal, nil
}
