package servicebus

import (
	"fmt"
	"math"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
)

// dotnetTag returns a lock token as a delivery-tag in .NET GUID byte order
// (the first three fields little-endian), as the SDKs read it.
func dotnetTag(t broker.LockToken) []byte {
	return []byte{t[3], t[2], t[1], t[0], t[5], t[4], t[7], t[6],
		t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15]}
}

// tokenOfTag is the inverse of dotnetTag.
func tokenOfTag(tag []byte) (broker.LockToken, bool) {
	if len(tag) != 16 {
		return broker.LockToken{}, false
	}
	return broker.LockToken{tag[3], tag[2], tag[1], tag[0], tag[5], tag[4], tag[7], tag[6],
		tag[8], tag[9], tag[10], tag[11], tag[12], tag[13], tag[14], tag[15]}, true
}

// effectiveTTL is the time to live the message really has: its own, capped
// by the entity's default (which also applies when it set none), as the
// broker computed its expiry. Zero means it never expires.
func effectiveTTL(m *broker.Message) time.Duration {
	if !m.ExpiresAt.IsZero() && !m.EnqueuedTime.IsZero() {
		return m.ExpiresAt.Sub(m.EnqueuedTime)
	}
	if m.TimeToLive == broker.InfiniteTTL {
		return 0
	}
	return m.TimeToLive
}

// encodeMessage appends m as a complete message for a client: a header with
// the delivery count and time to live, delivery annotations (the client's,
// plus x-opt-lock-token when locked is set), message annotations (the
// client's, plus the broker's of reference §2.8 in their exact types), then
// the stored bare message and footer, untouched unless the broker changed
// the properties.
func encodeMessage(dst []byte, m *broker.Message, locked bool) ([]byte, error) {
	body := m.Body
	// The stored body starts with what the client sent ahead of the bare
	// message: header and annotations, each optional.
	userH, userDA, userMA, body, err := splitPrefix(body)
	if err != nil {
		return dst, fmt.Errorf("stored message %d: %w", m.SequenceNumber, err)
	}
	h := message.Header{Priority: message.DefaultPriority}
	if userH != nil {
		h = *userH // durable, priority and first-acquirer pass through
	}
	h.DeliveryCount = m.DeliveryCount
	if ttl := effectiveTTL(m).Milliseconds(); ttl > 0 {
		h.TTL = uint32(min(ttl, math.MaxUint32))
	}
	out := message.AppendHeader(dst, &h)

	if locked || len(userDA) > 0 {
		out = encoding.AppendDescriptor(out, message.DescDeliveryAnnotations)
		var st, n int
		out, st = encoding.BeginMap(out)
		if out, n, err = appendUserAnnotations(out, userDA); err != nil {
			return dst, err
		}
		if locked {
			out = encoding.AppendSymbol(out, annLockToken)
			out = encoding.AppendUUID(out, encoding.UUID(m.LockToken))
			n += 2
		}
		out = encoding.EndMap(out, st, n)
	}

	out = encoding.AppendDescriptor(out, message.DescMessageAnnotations)
	out, st := encoding.BeginMap(out)
	var n int
	if out, n, err = appendUserAnnotations(out, userMA); err != nil {
		return dst, err
	}
	out = encoding.AppendSymbol(out, annSequenceNumber)
	out = encoding.AppendLong(out, m.SequenceNumber)
	out = encoding.AppendSymbol(out, annEnqueuedTime)
	out = encoding.AppendTimestamp(out, m.EnqueuedTime)
	n += 4
	if locked && !m.LockedUntil.IsZero() {
		out = encoding.AppendSymbol(out, annLockedUntil)
		out = encoding.AppendTimestamp(out, m.LockedUntil)
		n += 2
	}
	if m.State != broker.StateActive {
		out = encoding.AppendSymbol(out, annMessageState)
		out = encoding.AppendInt(out, int32(m.State))
		n += 2
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		out = encoding.AppendSymbol(out, annScheduledEnqueueTime)
		out = encoding.AppendTimestamp(out, m.ScheduledEnqueueTime)
		n += 2
	}
	if m.EnqueueSequenceNumber != 0 {
		out = encoding.AppendSymbol(out, annEnqueueSequenceNumber)
		out = encoding.AppendLong(out, m.EnqueueSequenceNumber)
		n += 2
	}
	if m.DeadLetterSource != "" {
		out = encoding.AppendSymbol(out, annDeadLetterSource)
		out = encoding.AppendString(out, m.DeadLetterSource)
		n += 2
	}
	if m.PartitionKey != "" {
		out = encoding.AppendSymbol(out, annPartitionKey)
		out = encoding.AppendString(out, m.PartitionKey)
		n += 2
	}
	out = encoding.EndMap(out, st, n)

	if !m.PropertiesModified && !m.SystemPropertiesModified {
		return append(out, body...), nil
	}
	return appendModifiedBare(out, body, m)
}

// appendUserAnnotations appends the client's annotations, without the keys
// the broker sets, and returns the number of map items written.
func appendUserAnnotations(out []byte, a encoding.Annotations) ([]byte, int, error) {
	n := 0
	for k, v := range a {
		if brokerOwned(k) {
			continue
		}
		var err error
		if out, err = encoding.Append(out, k); err != nil {
			return out, 0, err
		}
		if out, err = encoding.Append(out, v); err != nil {
			return out, 0, fmt.Errorf("annotation %v: %w", k, err)
		}
		n += 2
	}
	return out, n, nil
}

// splitPrefix reads the header and the delivery and message annotations
// stored ahead of the bare message, and returns the rest.
func splitPrefix(b []byte) (h *message.Header, da, ma encoding.Annotations, rest []byte, err error) {
	d := encoding.NewDecoder(b)
	for d.Len() > 0 {
		save := d
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if sym != nil {
			code = sectionNames[string(sym)]
		}
		switch code {
		case message.DescHeader:
			if err := d.Skip(); err != nil {
				return nil, nil, nil, nil, err
			}
			p, err := message.Parse(b[save.Pos():d.Pos()])
			if err != nil {
				return nil, nil, nil, nil, err
			}
			h = p.Header
		case message.DescDeliveryAnnotations:
			if da, err = d.ReadAnnotations(); err != nil {
				return nil, nil, nil, nil, err
			}
		case message.DescMessageAnnotations:
			if ma, err = d.ReadAnnotations(); err != nil {
				return nil, nil, nil, nil, err
			}
		default:
			return h, da, ma, save.Rest(), nil
		}
	}
	return h, da, ma, nil, nil
}

// appendModifiedBare appends the bare message (and footer) with the
// sections the broker changed re-encoded from m's fields.
func appendModifiedBare(out, body []byte, m *broker.Message) ([]byte, error) {
	var buf [8]span
	secs, err := scanSections(buf[:0], body)
	if err != nil {
		return out, fmt.Errorf("stored message %d: %w", m.SequenceNumber, err)
	}
	var props *message.Properties
	propsEnd, appStart, appEnd := 0, -1, -1
	bareEnd := len(body)
	for _, s := range secs {
		switch s.code {
		case message.DescProperties:
			p, err := message.Parse(body[s.start:s.end])
			if err != nil {
				return out, err
			}
			props, propsEnd = p.Properties, s.end
		case message.DescApplicationProperties:
			appStart, appEnd = s.start, s.end
		case message.DescFooter:
			bareEnd = s.start
		}
	}
	if appStart < 0 {
		appStart, appEnd = propsEnd, propsEnd
	}
	if m.SystemPropertiesModified {
		np := message.Properties{}
		if props != nil {
			np = *props
		}
		np.MessageID = m.MessageID
		if m.MessageID == "" {
			np.MessageID = nil
		}
		np.CorrelationID = nil
		if m.CorrelationID != "" {
			np.CorrelationID = m.CorrelationID
		}
		np.To, np.ReplyTo, np.ReplyToGroupID = m.To, m.ReplyTo, m.ReplyToSessionID
		np.Subject, np.ContentType, np.GroupID = m.Subject, encoding.Symbol(m.ContentType), m.SessionID
		if out, err = message.AppendProperties(out, &np); err != nil {
			return out, err
		}
	} else {
		out = append(out, body[:propsEnd]...)
	}
	if m.PropertiesModified {
		if len(m.Properties) > 0 {
			app := make(map[string]any, len(m.Properties))
			for k, v := range m.Properties {
				app[k] = amqpValue(v)
			}
			if out, err = message.AppendApplicationProperties(out, app); err != nil {
				return out, err
			}
		}
	} else {
		out = append(out, body[appStart:appEnd]...)
	}
	out = append(out, body[appEnd:bareEnd]...)
	return append(out, body[bareEnd:]...), nil
}
