// Package message implements the AMQP 1.0 message format (messaging §3.2):
// parsing an encoded message into its sections, building messages, and
// editing the parts a broker changes.
//
// It owns the bytes of a message and nothing else: it knows no links,
// deliveries or queues, and it never re-encodes the bare message (properties,
// application-properties and body) it was given; Parse keeps the bare message
// as the exact bytes received, and Build re-emits them untouched with a new
// header and annotations. Only ReplaceApplicationProperties and
// SpliceMessageID rewrite part of a bare message (the application
// properties; the properties' message-id), and they copy everything else
// byte for byte.
package message

import (
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// Section descriptor codes (messaging §3.2).
const (
	DescHeader                uint64 = 0x70
	DescDeliveryAnnotations   uint64 = 0x71
	DescMessageAnnotations    uint64 = 0x72
	DescProperties            uint64 = 0x73
	DescApplicationProperties uint64 = 0x74
	DescData                  uint64 = 0x75
	DescAMQPSequence          uint64 = 0x76
	DescAMQPValue             uint64 = 0x77
	DescFooter                uint64 = 0x78
)

// FormatBatch is the message-format of a Service Bus batch: a message whose
// body is one data section per inner message, each an encoded message.
const FormatBatch uint32 = 0x80013700

// DefaultPriority is the header priority when none is given.
const DefaultPriority uint8 = 4

// Header is the header section (0x70).
type Header struct {
	Durable       bool
	Priority      uint8  // DefaultPriority when absent
	TTL           uint32 // milliseconds; 0 = none (an absent ttl)
	FirstAcquirer bool
	DeliveryCount uint32
}

// Properties is the properties section (0x73). String fields are "" and
// times are zero when absent; MessageID and CorrelationID are nil when
// absent and otherwise one of uint64, encoding.UUID, []byte or string.
type Properties struct {
	MessageID          any
	UserID             []byte
	To                 string
	Subject            string
	ReplyTo            string
	CorrelationID      any
	ContentType        encoding.Symbol
	ContentEncoding    encoding.Symbol
	AbsoluteExpiryTime time.Time
	CreationTime       time.Time
	GroupID            string
	EmptyGroupID       bool   // group-id is present and "" (for Service Bus, session "")
	GroupSequence      uint32 // 0 = absent
	ReplyToGroupID     string
}

// BodyKind says which kind of body a message carries.
type BodyKind uint8

// Body kinds.
const (
	BodyNone     BodyKind = iota // no body section
	BodyData                     // one or more data sections
	BodySequence                 // one or more amqp-sequence sections
	BodyValue                    // one amqp-value section
)

// String names the body kind.
func (k BodyKind) String() string {
	switch k {
	case BodyData:
		return "data"
	case BodySequence:
		return "amqp-sequence"
	case BodyValue:
		return "amqp-value"
	}
	return "none"
}

// Body is a message body: Data for BodyData, Sequence for BodySequence,
// Value for BodyValue.
type Body struct {
	Kind     BodyKind
	Data     [][]byte
	Sequence []encoding.List
	Value    any
}

// Message is a message as Go values. Nil pointers and maps are absent
// sections.
type Message struct {
	Header                *Header
	DeliveryAnnotations   encoding.Annotations
	MessageAnnotations    encoding.Annotations
	Properties            *Properties
	ApplicationProperties map[string]any
	Body                  Body
	Footer                encoding.Annotations
}
