package frames

import (
	"encoding/binary"
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// Descriptor codes of the performatives, SASL frames and the types they carry
// (domain 0x00000000; transport §2.7, messaging §3.4-3.5, security §5.3).
const (
	DescOpen           uint64 = 0x10
	DescBegin          uint64 = 0x11
	DescAttach         uint64 = 0x12
	DescFlow           uint64 = 0x13
	DescTransfer       uint64 = 0x14
	DescDisposition    uint64 = 0x15
	DescDetach         uint64 = 0x16
	DescEnd            uint64 = 0x17
	DescClose          uint64 = 0x18
	DescError          uint64 = 0x1d
	DescReceived       uint64 = 0x23
	DescAccepted       uint64 = 0x24
	DescRejected       uint64 = 0x25
	DescReleased       uint64 = 0x26
	DescModified       uint64 = 0x27
	DescSource         uint64 = 0x28
	DescTarget         uint64 = 0x29
	DescSASLMechanisms uint64 = 0x40
	DescSASLInit       uint64 = 0x41
	DescSASLChallenge  uint64 = 0x42
	DescSASLResponse   uint64 = 0x43
	DescSASLOutcome    uint64 = 0x44
)

// descriptorCode maps a symbolic descriptor to its numeric code; 0 when unknown.
func descriptorCode(sym []byte) uint64 {
	switch string(sym) {
	case "amqp:open:list":
		return DescOpen
	case "amqp:begin:list":
		return DescBegin
	case "amqp:attach:list":
		return DescAttach
	case "amqp:flow:list":
		return DescFlow
	case "amqp:transfer:list":
		return DescTransfer
	case "amqp:disposition:list":
		return DescDisposition
	case "amqp:detach:list":
		return DescDetach
	case "amqp:end:list":
		return DescEnd
	case "amqp:close:list":
		return DescClose
	case "amqp:error:list":
		return DescError
	case "amqp:received:list":
		return DescReceived
	case "amqp:accepted:list":
		return DescAccepted
	case "amqp:rejected:list":
		return DescRejected
	case "amqp:released:list":
		return DescReleased
	case "amqp:modified:list":
		return DescModified
	case "amqp:source:list":
		return DescSource
	case "amqp:target:list":
		return DescTarget
	case "amqp:sasl-mechanisms:list":
		return DescSASLMechanisms
	case "amqp:sasl-init:list":
		return DescSASLInit
	case "amqp:sasl-challenge:list":
		return DescSASLChallenge
	case "amqp:sasl-response:list":
		return DescSASLResponse
	case "amqp:sasl-outcome:list":
		return DescSASLOutcome
	}
	return 0
}

// Error conditions a DecodeError carries (transport §2.8.15).
const (
	CondDecodeError  encoding.Symbol = "amqp:decode-error"
	CondInvalidField encoding.Symbol = "amqp:invalid-field"
)

// DecodeError is a frame that could not be decoded. Condition is
// CondDecodeError when the bytes are malformed (bad encoding, wrong type,
// truncated) and CondInvalidField when they are well formed but a field is
// missing or holds a value the specification forbids; the connection engine
// closes with that condition.
type DecodeError struct {
	Condition encoding.Symbol
	Frame     string // "open", "transfer", "sasl-init", ...; "frame" for the header
	Field     string // the offending field, "" when not about one field
	Err       error  // the underlying cause, may be nil
}

// Error implements error.
func (e *DecodeError) Error() string {
	s := e.Frame
	if e.Field != "" {
		s += "." + e.Field
	}
	s += ": " + string(e.Condition)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

func decodeErr(frame, field string, err error) error {
	return &DecodeError{Condition: CondDecodeError, Frame: frame, Field: field, Err: err}
}

func invalidField(frame, field string, format string, args ...any) error {
	return &DecodeError{Condition: CondInvalidField, Frame: frame, Field: field, Err: fmt.Errorf(format, args...)}
}

func missing(frame, field string) error {
	return &DecodeError{Condition: CondInvalidField, Frame: frame, Field: field,
		Err: fmt.Errorf("mandatory field is absent")}
}

// ParseHeader parses the fixed frame header at the start of b, which holds
// at least HeaderSize bytes. It checks Size >= 8 and DataOff >= 2 and that
// the data offset lies within the frame.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &DecodeError{Condition: CondDecodeError, Frame: "frame",
			Err: fmt.Errorf("header needs %d bytes, have %d", HeaderSize, len(b))}
	}
	h := Header{
		Size:    binary.BigEndian.Uint32(b),
		DataOff: b[4],
		Type:    b[5],
		Channel: binary.BigEndian.Uint16(b[6:]),
	}
	switch {
	case h.Size < HeaderSize:
		return h, &DecodeError{Condition: CondDecodeError, Frame: "frame", Field: "size",
			Err: fmt.Errorf("frame size %d is smaller than the header", h.Size)}
	case h.DataOff < 2:
		return h, &DecodeError{Condition: CondDecodeError, Frame: "frame", Field: "doff",
			Err: fmt.Errorf("data offset %d is below the minimum 2", h.DataOff)}
	case uint32(h.DataOff)*4 > h.Size:
		return h, &DecodeError{Condition: CondDecodeError, Frame: "frame", Field: "doff",
			Err: fmt.Errorf("data offset %d words lies beyond the %d-byte frame", h.DataOff, h.Size)}
	}
	return h, nil
}

// Decode decodes a whole frame (header included, h.Size bytes) whose header
// is h. It returns a nil Body for an empty (heartbeat) frame. Transfer.Payload and
// other byte-slice fields (delivery tags, SASL responses) alias frame.
// Every call allocates its result; use a Decoder on the hot path.
func Decode(h Header, frame []byte) (Body, error) {
	var d Decoder
	b, err := d.Decode(h, frame)
	if err != nil || b == nil {
		return b, err
	}
	// Detach the hot-path bodies from d's storage.
	switch v := b.(type) {
	case *Transfer:
		t := *v
		t.DeliveryID = cloneU32(t.DeliveryID)
		t.MessageFormat = cloneU32(t.MessageFormat)
		if t.RcvSettleMode != nil {
			m := *t.RcvSettleMode
			t.RcvSettleMode = &m
		}
		return &t, nil
	case *Flow:
		f := *v
		f.NextIncomingID = cloneU32(f.NextIncomingID)
		f.Handle = cloneU32(f.Handle)
		f.DeliveryCount = cloneU32(f.DeliveryCount)
		f.LinkCredit = cloneU32(f.LinkCredit)
		f.Available = cloneU32(f.Available)
		return &f, nil
	case *Disposition:
		disp := *v
		disp.Last = cloneU32(disp.Last)
		return &disp, nil
	}
	return b, nil
}

func cloneU32(p *uint32) *uint32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Decoder decodes frames, reusing storage for the hot-path performatives:
// the *Transfer, *Flow and *Disposition it returns point into the Decoder
// and stay valid only until its next Decode. Only a Transfer's delivery tag
// and payload alias the frame: the bodies a connection keeps for the life of
// a session or link (Begin, Attach) alias nothing (binary values are
// copied). Decoding those three (with no
// delivery state other than accepted or released, and no flow properties)
// allocates nothing. The zero Decoder is ready to use; it is not safe for
// concurrent use.
type Decoder struct {
	transfer    Transfer
	flow        Flow
	disposition Disposition
	u32         [8]uint32 // backing for the optional uint fields above
	rsm         ReceiverSettleMode
}

// Decode decodes a whole frame (header included) whose header is h; see the
// package-level Decode for what it returns.
func (d *Decoder) Decode(h Header, frame []byte) (Body, error) {
	if uint64(len(frame)) != uint64(h.Size) {
		return nil, &DecodeError{Condition: CondDecodeError, Frame: "frame", Field: "size",
			Err: fmt.Errorf("frame holds %d bytes, its header says %d", len(frame), h.Size)}
	}
	off := int(h.DataOff) * 4
	if off > len(frame) {
		return nil, &DecodeError{Condition: CondDecodeError, Frame: "frame", Field: "doff",
			Err: fmt.Errorf("data offset %d bytes lies beyond the %d-byte frame", off, len(frame))}
	}
	if off == len(frame) {
		if h.Type == TypeSASL {
			return nil, &DecodeError{Condition: CondDecodeError, Frame: "frame",
				Err: fmt.Errorf("empty SASL frame")}
		}
		return nil, nil
	}
	dec := encoding.NewDecoder(frame[off:])
	code, sym, err := dec.ReadDescriptor()
	if err != nil {
		return nil, decodeErr("frame", "", err)
	}
	if sym != nil {
		if code = descriptorCode(sym); code == 0 {
			return nil, &DecodeError{Condition: CondDecodeError, Frame: "frame",
				Err: fmt.Errorf("unknown descriptor %q", sym)}
		}
	}
	isSASL := code >= DescSASLMechanisms && code <= DescSASLOutcome
	isAMQP := code >= DescOpen && code <= DescClose
	switch {
	case h.Type == TypeAMQP && !isAMQP, h.Type == TypeSASL && !isSASL, h.Type != TypeAMQP && h.Type != TypeSASL:
		return nil, &DecodeError{Condition: CondDecodeError, Frame: "frame",
			Err: fmt.Errorf("descriptor 0x%02x not allowed in a frame of type 0x%02x", code, h.Type)}
	}
	switch code {
	case DescTransfer:
		t := &d.transfer
		if err := d.decodeTransfer(&dec, t); err != nil {
			return nil, err
		}
		if dec.Len() > 0 {
			t.Payload = dec.Rest()
		}
		return t, nil
	case DescFlow:
		if err := d.decodeFlow(&dec, &d.flow); err != nil {
			return nil, err
		}
		return &d.flow, trailing(&dec, "flow")
	case DescDisposition:
		if err := decodeDisposition(&dec, &d.disposition, &d.u32[7]); err != nil {
			return nil, err
		}
		return &d.disposition, trailing(&dec, "disposition")
	}
	var body Body
	switch code {
	case DescOpen:
		body, err = decodeOpen(&dec)
	case DescBegin:
		body, err = decodeBegin(&dec)
	case DescAttach:
		body, err = decodeAttach(&dec)
	case DescDetach:
		body, err = decodeDetach(&dec)
	case DescEnd:
		var e End
		e.Error, err = decodeErrorField(&dec, "end")
		body = &e
	case DescClose:
		var c Close
		c.Error, err = decodeErrorField(&dec, "close")
		body = &c
	default:
		body, err = decodeSASL(&dec, code)
	}
	if err != nil {
		return nil, err
	}
	return body, trailing(&dec, frameName(code))
}

// trailing rejects bytes after a performative that carries no payload.
func trailing(dec *encoding.Decoder, frame string) error {
	if dec.Len() != 0 {
		return &DecodeError{Condition: CondDecodeError, Frame: frame,
			Err: fmt.Errorf("%d unexpected bytes after the %s performative at offset %d", dec.Len(), frame, dec.Offset())}
	}
	return nil
}

func frameName(code uint64) string {
	switch code {
	case DescOpen:
		return "open"
	case DescBegin:
		return "begin"
	case DescAttach:
		return "attach"
	case DescFlow:
		return "flow"
	case DescTransfer:
		return "transfer"
	case DescDisposition:
		return "disposition"
	case DescDetach:
		return "detach"
	case DescEnd:
		return "end"
	case DescClose:
		return "close"
	case DescSASLMechanisms:
		return "sasl-mechanisms"
	case DescSASLInit:
		return "sasl-init"
	case DescSASLChallenge:
		return "sasl-challenge"
	case DescSASLResponse:
		return "sasl-response"
	case DescSASLOutcome:
		return "sasl-outcome"
	}
	return "frame"
}

// Append appends one whole frame of type typ on channel: the header, the
// encoded body and, for a *Transfer, its Payload. A nil body appends an
// empty (heartbeat) frame. Appending a Transfer allocates nothing beyond
// growing dst.
func Append(dst []byte, typ uint8, channel uint16, body Body) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 2, typ, byte(channel>>8), byte(channel))
	var err error
	switch b := body.(type) {
	case nil:
	case *Transfer:
		dst, err = appendTransfer(dst, b)
		dst = append(dst, b.Payload...)
	case *Flow:
		dst, err = appendFlow(dst, b)
	case *Disposition:
		dst, err = appendDisposition(dst, b)
	case *Open:
		dst, err = appendOpen(dst, b)
	case *Begin:
		dst, err = appendBegin(dst, b)
	case *Attach:
		dst, err = appendAttach(dst, b)
	case *Detach:
		dst, err = appendDetach(dst, b)
	case *End:
		dst, err = appendErrorOnly(dst, DescEnd, b.Error)
	case *Close:
		dst, err = appendErrorOnly(dst, DescClose, b.Error)
	default:
		dst, err = appendSASL(dst, body)
	}
	if err != nil {
		return dst[:start], err
	}
	size := len(dst) - start
	if uint64(size) > 0xffffffff {
		return dst[:start], fmt.Errorf("frame of %d bytes exceeds the 4 GiB limit", size)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// TransferOverhead returns the bytes a frame carrying t takes besides its
// payload (header and performative), for splitting a delivery at the
// peer's max-frame-size. It allocates nothing unless t carries a State.
func TransferOverhead(t *Transfer) int {
	uintSize := func(v uint32) int {
		switch {
		case v == 0:
			return 1
		case v < 256:
			return 2
		}
		return 5
	}
	optUint := func(p *uint32) (int, bool) {
		if p == nil {
			return 1, false
		}
		return uintSize(*p), true
	}
	var sizes [11]int
	var keep [11]bool
	sizes[0], keep[0] = uintSize(t.Handle), true
	sizes[1], keep[1] = optUint(t.DeliveryID)
	sizes[2] = 1
	if t.DeliveryTag != nil {
		sizes[2], keep[2] = 2+len(t.DeliveryTag), true
		if len(t.DeliveryTag) > 255 {
			sizes[2] = 5 + len(t.DeliveryTag)
		}
	}
	sizes[3], keep[3] = optUint(t.MessageFormat)
	sizes[4], keep[4] = 1, t.Settled
	sizes[5], keep[5] = 1, t.More
	sizes[6] = 1
	if t.RcvSettleMode != nil {
		sizes[6], keep[6] = 2, true
	}
	sizes[7] = 1
	if t.State != nil {
		b, _ := appendDeliveryState(nil, t.State)
		sizes[7], keep[7] = len(b), true
	}
	sizes[8], keep[8] = 1, t.Resume
	sizes[9], keep[9] = 1, t.Aborted
	sizes[10], keep[10] = 1, t.Batchable
	content, count := 0, 0
	for i, n := 0, 0; i < len(sizes); i++ {
		n += sizes[i]
		if keep[i] {
			content, count = n, i+1
		}
	}
	header := 3 // list8: code, size, count
	if content+1 > 255 || count > 255 {
		header = 9
	}
	return HeaderSize + 3 + header + content // 3: the descriptor 0x00 0x53 0x14
}
