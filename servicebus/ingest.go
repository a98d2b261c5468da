package servicebus

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
)

// Message annotations the broker owns: set on delivery from broker fields,
// never passed through from what a client sent.
const (
	annSequenceNumber        encoding.Symbol = "x-opt-sequence-number"
	annEnqueuedTime          encoding.Symbol = "x-opt-enqueued-time"
	annLockedUntil           encoding.Symbol = "x-opt-locked-until"
	annMessageState          encoding.Symbol = "x-opt-message-state"
	annEnqueueSequenceNumber encoding.Symbol = "x-opt-enqueue-sequence-number"
	annDeadLetterSource      encoding.Symbol = "x-opt-deadletter-source"
	annPartitionKey          encoding.Symbol = "x-opt-partition-key"
	annViaPartitionKey       encoding.Symbol = "x-opt-via-partition-key"
	annScheduledEnqueueTime  encoding.Symbol = "x-opt-scheduled-enqueue-time"
	annLockToken             encoding.Symbol = "x-opt-lock-token"
)

// brokerOwned reports whether an annotation key is regenerated on delivery.
func brokerOwned(k any) bool {
	switch k {
	case annSequenceNumber, annEnqueuedTime, annLockedUntil, annMessageState, annEnqueueSequenceNumber,
		annDeadLetterSource, annPartitionKey, annViaPartitionKey, annScheduledEnqueueTime, annLockToken:
		return true
	}
	return false
}

// ingest maps a client's encoded message to a broker message. The stored
// Body is the whole message as received (header, annotations, bare message,
// footer); delivery rewrites the header and annotations. A message without
// a message-id gets a service-assigned one, written into the stored
// properties section.
func ingest(raw []byte) (*broker.Message, error) {
	var buf [8]span
	secs, err := scanSections(buf[:0], raw)
	if err == nil {
		raw, secs, err = moveTrailingDeliveryAnnotations(raw, secs)
	}
	if err != nil {
		return nil, badRequest("the message is not a valid AMQP message: %v", err)
	}
	var p message.Parsed
	if err := message.ParseInto(&p, raw); err != nil {
		return nil, badRequest("the message is not a valid AMQP message: %v", err)
	}
	m := &broker.Message{}
	if ma := p.MessageAnnotations; ma != nil {
		if err := fromAnnotations(m, ma); err != nil {
			return nil, err
		}
	}
	if h := p.Header; h != nil && h.TTL > 0 {
		m.TimeToLive = time.Duration(h.TTL) * time.Millisecond
	}
	props := p.PropertiesSection()
	if props != nil {
		m.MessageID = idString(props.MessageID)
		m.CorrelationID = idString(props.CorrelationID)
		m.SessionID, m.EmptySessionID = props.GroupID, props.EmptyGroupID
		m.To = props.To
		m.ReplyTo = props.ReplyTo
		m.ReplyToSessionID = props.ReplyToGroupID
		m.Subject = props.Subject
		m.ContentType = string(props.ContentType)
	}
	if len(p.ApplicationProperties) > 0 {
		m.Properties = make(map[string]any, len(p.ApplicationProperties))
		for k, v := range p.ApplicationProperties {
			// Values a filter cannot use (lists, maps, described values)
			// stay in Body only.
			if pv, ok := propertyValue(v); ok {
				if b, ok := pv.([]byte); ok {
					pv = append([]byte(nil), b...) // it aliases the delivery's buffer
				}
				m.Properties[k] = pv
			}
		}
	}
	if m.MessageID != "" {
		m.Body = append(m.BodyBuffer(len(raw)), raw...)
		m.Seal()
		return m, nil
	}
	// Assign a message-id and write it into the properties section.
	m.MessageID = newMessageID()
	// The new properties section goes where the old one was, or before the
	// first section of the bare message (or footer), or at the end.
	at, next := len(raw), len(raw)
	for _, s := range secs {
		if s.code >= message.DescProperties {
			at, next = s.start, s.start
			if s.code == message.DescProperties {
				next = s.end
			}
			break
		}
	}
	body := m.BodyBuffer(len(raw) + len(m.MessageID) + 16)
	body = append(body, raw[:at]...)
	// The sender's section (or none), its other fields as they are.
	if body, err = message.SpliceMessageID(body, raw[at:next], m.MessageID); err != nil {
		return nil, badRequest("cannot encode the properties: %v", err)
	}
	m.Body = append(body, raw[next:]...)
	m.Seal() // a body that outgrew its buffer is simply not sealed
	return m, nil
}

// fromAnnotations reads the message annotations a sender may set and
// refuses null values where Service Bus does.
func fromAnnotations(m *broker.Message, ma encoding.Annotations) error {
	for _, k := range []encoding.Symbol{annScheduledEnqueueTime, annMessageState, annEnqueueSequenceNumber} {
		if v, ok := ma[k]; ok && v == nil {
			return badRequest("the message annotation '%s' is null", k)
		}
	}
	if v, ok := ma[annScheduledEnqueueTime]; ok {
		t, ok := v.(time.Time)
		if !ok {
			return badRequest("the message annotation '%s' is a %T, want a timestamp", annScheduledEnqueueTime, v)
		}
		m.ScheduledEnqueueTime = t
	}
	if v, ok := ma[annPartitionKey].(string); ok {
		m.PartitionKey = v
	}
	if v, ok := ma[annViaPartitionKey].(string); ok {
		m.ViaPartitionKey = v
	}
	return nil
}

// idString renders a message-id or correlation-id of any AMQP type as the
// string the broker indexes (duplicate detection, filters).
func idString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case uint64:
		return strconv.FormatUint(x, 10)
	case encoding.UUID:
		return broker.LockToken(x).String()
	case []byte:
		return hex.EncodeToString(x)
	}
	return ""
}

// newMessageID returns a service-assigned message-id: 32 hex digits, as
// Service Bus' "N"-formatted GUIDs.
func newMessageID() string {
	var b [16]byte
	copy(b[:8], idPrefix[:])
	binary.BigEndian.PutUint64(b[8:], idSeq.Add(1))
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// idPrefix and idSeq make the service-assigned message ids: a random half
// drawn once per process and a counter. They are unique (a node of a
// cluster, or a restarted process, draws another half) without a call into
// the system's random generator for every message, which showed in profiles
// of the Go SDK's sends (it sets no message-id).
var (
	idPrefix = func() (p [8]byte) {
		_, _ = rand.Read(p[:]) // crypto/rand.Read does not fail
		return p
	}()
	idSeq atomic.Uint64
)

// propertyValue converts an application-property value to what the broker
// keeps (see broker.Message.Properties); ok is false for values a filter
// cannot use.
func propertyValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, string, []byte, time.Time,
		int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
		return v, true
	case encoding.Symbol:
		return string(x), true
	case encoding.UUID:
		return [16]byte(x), true
	case encoding.Char:
		return string(rune(x)), true
	}
	return nil, false
}

// amqpValue converts a broker property value back to an AMQP value.
func amqpValue(v any) any {
	switch x := v.(type) {
	case [16]byte:
		return encoding.UUID(x)
	case time.Duration:
		return int64(x / time.Millisecond)
	}
	return v
}

// span is one section of an encoded message.
type span struct {
	code       uint64
	start, end int
}

// sectionNames maps symbolic section descriptors to their codes.
var sectionNames = map[string]uint64{
	"amqp:header:list":                message.DescHeader,
	"amqp:delivery-annotations:map":   message.DescDeliveryAnnotations,
	"amqp:message-annotations:map":    message.DescMessageAnnotations,
	"amqp:properties:list":            message.DescProperties,
	"amqp:application-properties:map": message.DescApplicationProperties,
	"amqp:data:binary":                message.DescData,
	"amqp:amqp-sequence:list":         message.DescAMQPSequence,
	"amqp:amqp-value:*":               message.DescAMQPValue,
	"amqp:footer:map":                 message.DescFooter,
}

// scanSections appends the sections of an encoded message to out without
// decoding them (a caller passes an array's slice: a message has a handful).
func scanSections(out []span, b []byte) ([]span, error) {
	d := encoding.NewDecoder(b)
	for d.Len() > 0 {
		start := d.Pos()
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return nil, err
		}
		if sym != nil {
			code = sectionNames[string(sym)]
		}
		if err := d.Skip(); err != nil {
			return nil, err
		}
		out = append(out, span{code: code, start: start, end: d.Pos()})
	}
	return out, nil
}

// moveTrailingDeliveryAnnotations returns raw with a delivery-annotations
// section that comes last, after sections that belong behind it, moved to
// its place after the header. The Python SDK's AMQP stack (pyamqp) writes
// delivery annotations last, and Service Bus takes such messages; any
// other section out of order is still refused by message.Parse. secs are
// raw's sections; it returns those of the message it returns.
func moveTrailingDeliveryAnnotations(raw []byte, secs []span) ([]byte, []span, error) {
	if len(secs) < 2 {
		return raw, secs, nil
	}
	last := secs[len(secs)-1]
	if last.code != message.DescDeliveryAnnotations || secs[len(secs)-2].code <= message.DescDeliveryAnnotations {
		return raw, secs, nil
	}
	at := 0 // after the header, if any
	if secs[0].code == message.DescHeader {
		at = secs[0].end
	}
	out := make([]byte, 0, len(raw))
	out = append(out, raw[:at]...)
	out = append(out, raw[last.start:last.end]...)
	out = append(out, raw[at:last.start]...)
	secs, err := scanSections(secs[:0], out)
	return out, secs, err
}
