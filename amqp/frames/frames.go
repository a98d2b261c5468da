// Package frames defines the AMQP 1.0 frame layout (transport §2.3) and the
// performatives and SASL frames carried in it, with their encoding and decoding.
//
// It owns the mapping between the wire (composite lists of described types) and
// Go structs; it knows nothing of connection state. Field defaults follow the
// specification: a decoded struct holds the default where the peer omitted a
// field, and the encoder writes every field up to the last non-default one, so
// peers that read composites by position (Python's uamqp) see the full list.
package frames

import (
	"github.com/busbar-io/busbar/amqp/encoding"
)

// Frame types (transport §2.3.1).
const (
	TypeAMQP uint8 = 0x00 // an AMQP frame; the type-specific bytes hold the channel
	TypeSASL uint8 = 0x01 // a SASL frame
)

// HeaderSize is the size of the fixed frame header; MinMaxFrameSize is the
// smallest max-frame-size a peer may announce, and the limit before open.
const (
	HeaderSize      = 8
	MinMaxFrameSize = 512
)

// Role is a link endpoint's role; false is sender, true is receiver.
type Role bool

// Link roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SenderSettleMode is attach's snd-settle-mode.
type SenderSettleMode uint8

// Sender settle modes.
const (
	SenderSettleUnsettled SenderSettleMode = 0
	SenderSettleSettled   SenderSettleMode = 1
	SenderSettleMixed     SenderSettleMode = 2 // the default
)

// ReceiverSettleMode is attach's rcv-settle-mode.
type ReceiverSettleMode uint8

// Receiver settle modes.
const (
	ReceiverSettleFirst  ReceiverSettleMode = 0 // the default
	ReceiverSettleSecond ReceiverSettleMode = 1
)

// Body is implemented by every performative and SASL frame body.
type Body interface{ frameBody() }

// Open is the open performative (0x10).
type Open struct {
	ContainerID         string
	Hostname            string
	MaxFrameSize        uint32 // default 4294967295; 0 is encoded as absent (the default)
	ChannelMax          uint16 // default 65535; always encoded as given
	IdleTimeout         uint32 // milliseconds; 0 = none
	OutgoingLocales     []encoding.Symbol
	IncomingLocales     []encoding.Symbol
	OfferedCapabilities []encoding.Symbol
	DesiredCapabilities []encoding.Symbol
	Properties          encoding.Fields
}

// Begin is the begin performative (0x11).
type Begin struct {
	RemoteChannel       *uint16 // nil when the peer initiates
	NextOutgoingID      uint32
	IncomingWindow      uint32
	OutgoingWindow      uint32
	HandleMax           uint32 // default 4294967295; always encoded as given
	OfferedCapabilities []encoding.Symbol
	DesiredCapabilities []encoding.Symbol
	Properties          encoding.Fields
}

// Attach is the attach performative (0x12).
type Attach struct {
	Name                 string
	Handle               uint32
	Role                 Role
	SndSettleMode        SenderSettleMode   // default mixed
	RcvSettleMode        ReceiverSettleMode // default first
	Source               *Source            // nil = null
	Target               *Target            // nil = null
	Unsettled            encoding.Map       // delivery-tag -> delivery-state
	IncompleteUnsettled  bool
	InitialDeliveryCount uint32 // written only when Role is sender (it must be null for receivers)
	MaxMessageSize       uint64 // 0 = no limit
	OfferedCapabilities  []encoding.Symbol
	DesiredCapabilities  []encoding.Symbol
	Properties           encoding.Fields
}

// Source is the source terminus (0x28). An empty Address is absent.
// ExpiryPolicy decodes as "session-end" when absent; "" and "session-end"
// are both encoded as absent.
type Source struct {
	Address               string
	Durable               uint32 // terminus-durability
	ExpiryPolicy          encoding.Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties encoding.Fields
	DistributionMode      encoding.Symbol
	Filter                encoding.Fields // filter-set: values are usually *encoding.Described
	DefaultOutcome        DeliveryState
	Outcomes              []encoding.Symbol
	Capabilities          []encoding.Symbol
}

// Target is the target terminus (0x29); its fields follow Source's rules.
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          encoding.Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties encoding.Fields
	Capabilities          []encoding.Symbol
}

// Flow is the flow performative (0x13). Pointer fields are nil when absent.
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32
	NextOutgoingID uint32
	OutgoingWindow uint32
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     encoding.Fields
}

// Transfer is the transfer performative (0x14) with its payload. Payload
// and DeliveryTag alias the decoded frame's buffer; copy them to keep them
// past the next read. An empty payload decodes as nil.
type Transfer struct {
	Handle        uint32
	DeliveryID    *uint32 // nil on continuation frames
	DeliveryTag   []byte  // nil when absent
	MessageFormat *uint32
	Settled       bool
	More          bool
	RcvSettleMode *ReceiverSettleMode
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool
	Payload       []byte
}

// Disposition is the disposition performative (0x15).
type Disposition struct {
	Role      Role
	First     uint32
	Last      *uint32 // nil = First
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Detach is the detach performative (0x16).
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

// End is the end performative (0x17).
type End struct{ Error *Error }

// Close is the close performative (0x18).
type Close struct{ Error *Error }

// Error is the error type (0x1d).
type Error struct {
	Condition   encoding.Symbol
	Description string
	Info        encoding.Fields
}

// Error implements error.
func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return string(e.Condition) + ": " + e.Description
}

// DeliveryState is a delivery state or outcome: *Received, *Accepted,
// *Rejected, *Released or *Modified.
type DeliveryState interface{ deliveryState() }

// Received is the received delivery state (0x23).
type Received struct {
	SectionNumber uint32
	SectionOffset uint64
}

// Accepted is the accepted outcome (0x24).
type Accepted struct{}

// Rejected is the rejected outcome (0x25).
type Rejected struct{ Error *Error }

// Released is the released outcome (0x26).
type Released struct{}

// Modified is the modified outcome (0x27).
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations encoding.Annotations
}

// SASLCode is sasl-outcome's code.
type SASLCode uint8

// SASL outcome codes.
const (
	SASLOK      SASLCode = 0
	SASLAuth    SASLCode = 1
	SASLSys     SASLCode = 2
	SASLSysPerm SASLCode = 3
	SASLSysTemp SASLCode = 4
)

// SASLMechanisms is sasl-mechanisms (0x40).
type SASLMechanisms struct{ Mechanisms []encoding.Symbol }

// SASLInit is sasl-init (0x41).
type SASLInit struct {
	Mechanism       encoding.Symbol
	InitialResponse []byte
	Hostname        string
}

// SASLChallenge is sasl-challenge (0x42).
type SASLChallenge struct{ Challenge []byte }

// SASLResponse is sasl-response (0x43).
type SASLResponse struct{ Response []byte }

// SASLOutcome is sasl-outcome (0x44).
type SASLOutcome struct {
	Code           SASLCode
	AdditionalData []byte
}

func (*Open) frameBody()           {}
func (*Begin) frameBody()          {}
func (*Attach) frameBody()         {}
func (*Flow) frameBody()           {}
func (*Transfer) frameBody()       {}
func (*Disposition) frameBody()    {}
func (*Detach) frameBody()         {}
func (*End) frameBody()            {}
func (*Close) frameBody()          {}
func (*SASLMechanisms) frameBody() {}
func (*SASLInit) frameBody()       {}
func (*SASLChallenge) frameBody()  {}
func (*SASLResponse) frameBody()   {}
func (*SASLOutcome) frameBody()    {}

func (*Received) deliveryState() {}
func (*Accepted) deliveryState() {}
func (*Rejected) deliveryState() {}
func (*Released) deliveryState() {}
func (*Modified) deliveryState() {}

// Header is a decoded frame header.
type Header struct {
	Size    uint32 // the whole frame, header included
	DataOff uint8  // in 4-byte words, >= 2
	Type    uint8
	Channel uint16 // AMQP frames; the type-specific bytes otherwise
}

// The codec (codec.go, decode.go, encode.go, states.go):
//
//	ParseHeader(b) (Header, error)            the fixed 8-byte header
//	Decode(h, frame) (Body, error)            one whole frame; nil Body for a heartbeat
//	(*Decoder).Decode(h, frame) (Body, error) the same, reusing storage: no allocations
//	                                          for transfer, flow and disposition
//	Append(dst, typ, channel, body) ([]byte, error)
//	                                          one whole frame; nil body for a heartbeat
//	TransferOverhead(t) int                   frame bytes besides t.Payload
//
// Decoding errors are *DecodeError carrying the condition (amqp:decode-error
// or amqp:invalid-field), the frame and the field.
