package message

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// SplitBatch splits the payload of a batch delivery (message-format
// FormatBatch) into its inner encoded messages: the contents of each data
// section of the envelope's body, in order. The results alias payload. The
// envelope's other sections (Service Bus clients copy the first message's
// properties and annotations onto it) are checked for order and skipped.
// The inner messages are not parsed here: the caller parses each one (with
// Parse) as it would a single message.
func SplitBatch(payload []byte) ([][]byte, error) {
	d := encoding.NewDecoder(payload)
	var out [][]byte
	next := 0
	for d.Len() > 0 {
		start := d.Pos()
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return nil, &ParseError{Section: "batch", Offset: start, Err: err}
		}
		if sym != nil {
			code = sectionCode(sym)
		}
		if code < DescHeader || code > DescFooter {
			return nil, &ParseError{Section: "batch", Offset: start, Err: fmt.Errorf("unknown section descriptor 0x%02x", code)}
		}
		rank := rankOf(code)
		if rank < next {
			return nil, &ParseError{Section: sectionName(code), Offset: start, Err: fmt.Errorf("section out of order or repeated")}
		}
		next = rank + 1
		switch {
		case code == DescData:
			next = rankBody
			b, err := d.ReadBinary()
			if err != nil {
				return nil, &ParseError{Section: "data", Offset: start, Err: err}
			}
			out = append(out, b)
		case rank == rankBody:
			return nil, &ParseError{Section: sectionName(code), Offset: start,
				Err: fmt.Errorf("a batch body must be data sections")}
		default:
			if err := d.Skip(); err != nil {
				return nil, &ParseError{Section: sectionName(code), Offset: start, Err: err}
			}
		}
	}
	if len(out) == 0 {
		return nil, &ParseError{Section: "batch", Offset: 0, Err: fmt.Errorf("no data sections")}
	}
	return out, nil
}
