package broker

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"
)

// MessageState is where a message is in its entity (x-opt-message-state).
type MessageState uint8

// Message states, with the values Service Bus puts on the wire.
const (
	StateActive    MessageState = 0
	StateDeferred  MessageState = 1
	StateScheduled MessageState = 2
)

// String names the state.
func (s MessageState) String() string {
	switch s {
	case StateActive:
		return "Active"
	case StateDeferred:
		return "Deferred"
	case StateScheduled:
		return "Scheduled"
	}
	return fmt.Sprintf("MessageState(%d)", uint8(s))
}

// LockToken is a message lock token: a random (version 4) UUID in RFC byte
// order. The AMQP layer puts it on the wire in .NET GUID byte order.
type LockToken [16]byte

// String renders the token in the canonical 8-4-4-4-12 form.
func (t LockToken) String() string {
	var b [36]byte
	hex.Encode(b[0:8], t[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], t[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], t[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], t[8:10])
	b[23] = '-'
	hex.Encode(b[24:], t[10:])
	return string(b[:])
}

// Message is the broker's message. The protocol layer fills the fields of the
// first group from the client's message; the broker never parses Body. The
// broker fills the second group on every message it hands out; handed-out
// messages are copies the caller may keep but must not modify in place
// (Body and Properties may be shared with the broker's cache).
type Message struct {
	// Body is the client's encoded bare message (properties, application
	// properties, body sections), passed through untouched.
	Body []byte

	MessageID string
	SessionID string // "" = no session, unless EmptySessionID
	// EmptySessionID says the sender gave SessionID "": the SDKs allow ""
	// as a session id, so on a session-enabled entity such a message
	// belongs to session "". Only Send reads it (every message of a
	// session-enabled entity is in a session).
	EmptySessionID   bool
	CorrelationID    string
	To               string
	ReplyTo          string
	ReplyToSessionID string
	Subject          string
	ContentType      string
	PartitionKey     string
	ViaPartitionKey  string
	// TimeToLive: 0 = the entity's default (which is also a ceiling).
	TimeToLive time.Duration
	// ScheduledEnqueueTime: zero = enqueue now.
	ScheduledEnqueueTime time.Time
	// Properties are the application properties, as filters see them.
	// Values are nil, bool, string, []byte, time.Time, time.Duration,
	// [16]byte (uuid), signed and unsigned integers and floats.
	Properties map[string]any

	// Broker-assigned fields.

	SequenceNumber        int64
	EnqueuedTime          time.Time
	EnqueueSequenceNumber int64 // the sequence number in the entity a forwarded message came from
	ExpiresAt             time.Time
	LockToken             LockToken // zero for peeked and receive-and-delete messages
	LockedUntil           time.Time // zero unless locked
	// DeliveryCount is the number of earlier deliveries of this message
	// that ended in abandon or lock expiry: the AMQP header delivery-count
	// (the SDKs show DeliveryCount+1).
	DeliveryCount    uint32
	State            MessageState
	DeadLetterSource string // the entity where dead-lettering happened, on forwarded dead letters
	// PropertiesModified is true when Properties differ from the
	// application properties encoded in Body (changed by a rule action,
	// abandon, defer or dead-letter): the protocol layer re-encodes that
	// section on delivery.
	PropertiesModified bool
	// SystemPropertiesModified is true when a rule action changed a system
	// property (MessageID, CorrelationID, To, ReplyTo, ReplyToSessionID,
	// Subject, ContentType, SessionID, TimeToLive) away from Body's.
	SystemPropertiesModified bool

	hops uint8 // auto-forwarding hops so far
	// rec is, once Seal has run, m's store record: its header, then Body
	// (Body is rec's tail). Before, it is the room BodyBuffer left for the
	// header. Never written after Seal: copies of m share it.
	rec []byte
}

// BodyBuffer returns an empty buffer of capacity n for m's Body, allocated
// with room in front of it for the header of m's store record. The protocol
// layer appends the message's bytes to it, sets Body to it and calls Seal:
// the send that stores m then writes its record without copying the body
// again. Set every other field first: they size the room.
func (m *Message) BodyBuffer(n int) []byte {
	room := messageRecordSize(m) - len(m.Body) // its header, with room for the body's length
	buf := make([]byte, room+n)
	m.rec = buf[:room]
	return buf[room:room]
}

// Seal writes the header of m's store record in front of Body, when Body
// was built in m's BodyBuffer and the header fits the room left for it.
// Fields changed afterwards are no error: a record that no longer matches
// the message is encoded anew.
func (m *Message) Seal() {
	room := m.rec
	m.rec = nil
	n := len(m.Body)
	if n == 0 || cap(room) < len(room)+n || &room[:len(room)+1][len(room)] != &m.Body[0] {
		return // Body is not in the buffer
	}
	e := enc{b: room[:0:len(room)]} // capped: a longer header is written elsewhere, not over Body
	if e.recordHead(m) != nil || len(e.b) > len(room) {
		return
	}
	start := len(room) - len(e.b)
	copy(room[start:], e.b)
	m.rec = room[start : len(room)+n]
}

// recordHeadBuf is the stack buffer sealed checks a header in: most fit.
const recordHeadBuf = 256

// sealed returns m's sealed record when it still is m's record: Body is its
// tail and the header encodes m's fields as they are now.
func (m *Message) sealed() []byte {
	r, n := m.rec, len(m.Body)
	if n == 0 || len(r) <= n {
		return nil
	}
	h := len(r) - n
	if &r[h] != &m.Body[0] {
		return nil
	}
	var head []byte
	if len(m.Properties) == 0 {
		var hb [recordHeadBuf]byte
		head = appendRecordFields(hb[:0], m)
		head = binary.AppendUvarint(append(head, 0), uint64(n)) // no properties, the body's length
	} else {
		e := enc{b: make([]byte, 0, h)}
		if e.recordHead(m) != nil {
			return nil
		}
		head = e.b
	}
	if !bytes.Equal(head, r[:h]) {
		return nil
	}
	return r
}

// Dead-letter properties Service Bus sets as application properties.
const (
	PropDeadLetterReason           = "DeadLetterReason"
	PropDeadLetterErrorDescription = "DeadLetterErrorDescription"
)

// System dead-letter reasons.
const (
	ReasonMaxDeliveryCountExceeded    = "MaxDeliveryCountExceeded"
	ReasonTTLExpired                  = "TTLExpiredException"
	ReasonMaxTransferHopCountExceeded = "MaxTransferHopCountExceeded"
	ReasonFilterEvaluation            = "FilterEvaluationException"
	ReasonForwardingFailed            = "TransferFailed"
)

// clone returns a shallow copy with its own Properties map.
func (m *Message) clone() *Message {
	c := *m
	c.Properties = maps.Clone(m.Properties)
	return &c
}

// filterView adapts a Message to filter.MutableMessage.
type filterView struct{ m *Message }

// SystemProperty implements filter.Message.
func (v filterView) SystemProperty(name string) (any, bool) {
	m := v.m
	str := func(s string) (any, bool) { return s, s != "" }
	switch strings.ToLower(name) {
	case "messageid":
		return str(m.MessageID)
	case "correlationid":
		return str(m.CorrelationID)
	case "sessionid":
		return str(m.SessionID)
	case "replytosessionid":
		return str(m.ReplyToSessionID)
	case "to":
		return str(m.To)
	case "replyto":
		return str(m.ReplyTo)
	case "label", "subject":
		return str(m.Subject)
	case "contenttype":
		return str(m.ContentType)
	case "partitionkey":
		return str(m.PartitionKey)
	case "viapartitionkey":
		return str(m.ViaPartitionKey)
	case "timetolive":
		return m.TimeToLive, m.TimeToLive != 0
	case "scheduledenqueuetimeutc":
		return m.ScheduledEnqueueTime, !m.ScheduledEnqueueTime.IsZero()
	case "enqueuedtimeutc":
		return m.EnqueuedTime, !m.EnqueuedTime.IsZero()
	case "sequencenumber":
		return m.SequenceNumber, true
	case "enqueuedsequencenumber":
		return m.EnqueueSequenceNumber, true
	case "deliverycount":
		return int32(m.DeliveryCount), true
	case "size":
		return int64(len(m.Body)), true
	case "expiresatutc":
		return m.ExpiresAt, !m.ExpiresAt.IsZero()
	}
	return nil, false
}

// UserProperty implements filter.Message.
func (v filterView) UserProperty(name string) (any, bool) {
	x, ok := v.m.Properties[name]
	return x, ok
}

// SetUserProperty implements filter.MutableMessage.
func (v filterView) SetUserProperty(name string, x any) {
	if v.m.Properties == nil {
		v.m.Properties = map[string]any{}
	}
	v.m.Properties[name] = x
	v.m.PropertiesModified = true
}

// DeleteUserProperty implements filter.MutableMessage.
func (v filterView) DeleteUserProperty(name string) {
	if _, ok := v.m.Properties[name]; ok {
		delete(v.m.Properties, name)
		v.m.PropertiesModified = true
	}
}

// SetSystemProperty implements filter.MutableMessage: the string-valued
// header properties and TimeToLive may be set; MessageId, SessionId and
// ScheduledEnqueueTimeUtc are accepted but ignored, as Service Bus does at
// subscription level.
func (v filterView) SetSystemProperty(name string, x any) error {
	m := v.m
	lname := strings.ToLower(name)
	switch lname {
	case "messageid", "sessionid", "scheduledenqueuetimeutc":
		return nil
	case "timetolive":
		d, ok := x.(time.Duration)
		if !ok {
			return fmt.Errorf("TimeToLive must be a time span, not %T", x)
		}
		m.TimeToLive = d
		m.SystemPropertiesModified = true
		return nil
	}
	var dst *string
	switch lname {
	case "correlationid":
		dst = &m.CorrelationID
	case "replytosessionid":
		dst = &m.ReplyToSessionID
	case "to":
		dst = &m.To
	case "replyto":
		dst = &m.ReplyTo
	case "label", "subject":
		dst = &m.Subject
	case "contenttype":
		dst = &m.ContentType
	default:
		return fmt.Errorf("system property %q cannot be set", name)
	}
	s, ok := x.(string)
	if !ok {
		if x != nil {
			return fmt.Errorf("system property %q must be a string, not %T", name, x)
		}
	}
	*dst = s
	m.SystemPropertiesModified = true
	return nil
}

// Bounds of the times the broker can represent (int64 Unix nanoseconds).
var (
	minTime = time.Unix(0, math.MinInt64+1).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// satNano returns t as Unix nanoseconds, saturated to the representable
// range (years 1678 to 2262), so that far-off times from clients (year
// 9999, the .NET "forever") keep their order instead of wrapping.
func satNano(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64 + 1
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}
