package consistent

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// wireMessage is an azservicebus.Message as the outbox stores it: every
// field a sender sets, with application properties tagged by type so that
// they come back with the type they had.
type wireMessage struct {
	MessageID        *string          `json:"id,omitempty"`
	Body             []byte           `json:"body,omitempty"`
	ContentType      *string          `json:"contentType,omitempty"`
	CorrelationID    *string          `json:"correlationId,omitempty"`
	Subject          *string          `json:"subject,omitempty"`
	SessionID        *string          `json:"sessionId,omitempty"`
	To               *string          `json:"to,omitempty"`
	ReplyTo          *string          `json:"replyTo,omitempty"`
	ReplyToSessionID *string          `json:"replyToSessionId,omitempty"`
	PartitionKey     *string          `json:"partitionKey,omitempty"`
	TimeToLive       *time.Duration   `json:"ttl,omitempty"`
	Scheduled        *time.Time       `json:"scheduled,omitempty"`
	Properties       map[string]typed `json:"props,omitempty"`
}

type typed struct {
	T string          `json:"t"`
	V json.RawMessage `json:"v"`
}

// EncodeMessage encodes m for an outbox. Application property values may be
// string, bool, the integer and float types, time.Time, time.Duration or
// []byte; any other type is an error.
func EncodeMessage(m *azservicebus.Message) ([]byte, error) {
	w := wireMessage{MessageID: m.MessageID, Body: m.Body, ContentType: m.ContentType, CorrelationID: m.CorrelationID,
		Subject: m.Subject, SessionID: m.SessionID, To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		PartitionKey: m.PartitionKey, TimeToLive: m.TimeToLive, Scheduled: m.ScheduledEnqueueTime}
	if len(m.ApplicationProperties) > 0 {
		w.Properties = make(map[string]typed, len(m.ApplicationProperties))
	}
	for k, v := range m.ApplicationProperties {
		var t string
		switch v.(type) {
		case string:
			t = "string"
		case bool:
			t = "bool"
		case int:
			t = "int"
		case int8:
			t = "int8"
		case int16:
			t = "int16"
		case int32:
			t = "int32"
		case int64:
			t = "int64"
		case uint8:
			t = "uint8"
		case uint16:
			t = "uint16"
		case uint32:
			t = "uint32"
		case uint64:
			t = "uint64"
		case float32:
			t = "float32"
		case float64:
			t = "float64"
		case time.Time:
			t = "time"
		case time.Duration:
			t = "duration"
		case []byte:
			t = "bytes"
		default:
			return nil, fmt.Errorf("consistent: application property %q has type %T, which the outbox cannot store", k, v)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("consistent: application property %q: %w", k, err)
		}
		w.Properties[k] = typed{T: t, V: raw}
	}
	return json.Marshal(w)
}

// DecodeMessage decodes what EncodeMessage encoded.
func DecodeMessage(b []byte) (*azservicebus.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("consistent: outbox message: %w", err)
	}
	m := &azservicebus.Message{MessageID: w.MessageID, Body: w.Body, ContentType: w.ContentType, CorrelationID: w.CorrelationID,
		Subject: w.Subject, SessionID: w.SessionID, To: w.To, ReplyTo: w.ReplyTo, ReplyToSessionID: w.ReplyToSessionID,
		PartitionKey: w.PartitionKey, TimeToLive: w.TimeToLive, ScheduledEnqueueTime: w.Scheduled}
	if len(w.Properties) > 0 {
		m.ApplicationProperties = make(map[string]any, len(w.Properties))
	}
	for k, p := range w.Properties {
		v, err := decodeTyped(p)
		if err != nil {
			return nil, fmt.Errorf("consistent: outbox message property %q: %w", k, err)
		}
		m.ApplicationProperties[k] = v
	}
	return m, nil
}

func decodeTyped(p typed) (any, error) {
	switch p.T {
	case "string":
		return decodeAs[string](p.V)
	case "bool":
		return decodeAs[bool](p.V)
	case "int":
		return decodeAs[int](p.V)
	case "int8":
		return decodeAs[int8](p.V)
	case "int16":
		return decodeAs[int16](p.V)
	case "int32":
		return decodeAs[int32](p.V)
	case "int64":
		return decodeAs[int64](p.V)
	case "uint8":
		return decodeAs[uint8](p.V)
	case "uint16":
		return decodeAs[uint16](p.V)
	case "uint32":
		return decodeAs[uint32](p.V)
	case "uint64":
		return decodeAs[uint64](p.V)
	case "float32":
		return decodeAs[float32](p.V)
	case "float64":
		return decodeAs[float64](p.V)
	case "time":
		return decodeAs[time.Time](p.V)
	case "duration":
		return decodeAs[time.Duration](p.V)
	case "bytes":
		return decodeAs[[]byte](p.V)
	}
	return nil, fmt.Errorf("unknown type %q", p.T)
}

func decodeAs[T any](raw json.RawMessage) (any, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
