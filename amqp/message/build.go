package message

import (
	"fmt"
	"slices"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// fields writes a composite's fields, dropping trailing absent ones.
type fields struct {
	dst     []byte
	start   int
	n       int
	keepLen int
	keepN   int
}

func beginSection(dst []byte, code uint64) fields {
	dst = encoding.AppendDescriptor(dst, code)
	dst, start := encoding.BeginList(dst)
	return fields{dst: dst, start: start, keepLen: len(dst)}
}

func (f *fields) done(keep bool) {
	f.n++
	if keep {
		f.keepLen, f.keepN = len(f.dst), f.n
	}
}

func (f *fields) null() {
	f.dst = encoding.AppendNull(f.dst)
	f.done(false)
}

func (f *fields) string(s string) {
	if s == "" {
		f.null()
		return
	}
	f.dst = encoding.AppendString(f.dst, s)
	f.done(true)
}

func (f *fields) symbol(s encoding.Symbol) {
	if s == "" {
		f.null()
		return
	}
	f.dst = encoding.AppendSymbol(f.dst, s)
	f.done(true)
}

func (f *fields) end() []byte { return encoding.EndList(f.dst[:f.keepLen], f.start, f.keepN) }

// AppendHeader appends a header section. delivery-count is always written
// (the JavaScript SDK reads it without a default); the fields before it
// are written as null or their values.
func AppendHeader(dst []byte, h *Header) []byte {
	f := beginSection(dst, DescHeader)
	f.dst = encoding.AppendBool(f.dst, h.Durable)
	f.done(h.Durable)
	if h.Priority == DefaultPriority {
		f.null()
	} else {
		f.dst = encoding.AppendUbyte(f.dst, h.Priority)
		f.done(true)
	}
	if h.TTL == 0 {
		f.null()
	} else {
		f.dst = encoding.AppendUint(f.dst, h.TTL)
		f.done(true)
	}
	f.dst = encoding.AppendBool(f.dst, h.FirstAcquirer)
	f.done(h.FirstAcquirer)
	f.dst = encoding.AppendUint(f.dst, h.DeliveryCount)
	f.done(true) // always sent: @azure/service-bus reads deliveryCount from it
	return f.end()
}

// AppendAnnotations appends a delivery-annotations, message-annotations or
// footer section (code DescDeliveryAnnotations, DescMessageAnnotations or
// DescFooter) holding a.
func AppendAnnotations(dst []byte, code uint64, a encoding.Annotations) ([]byte, error) {
	switch code {
	case DescDeliveryAnnotations, DescMessageAnnotations, DescFooter:
	default:
		return dst, fmt.Errorf("message: 0x%02x is not an annotations section", code)
	}
	out, err := encoding.AppendAnnotations(encoding.AppendDescriptor(dst, code), a)
	if err != nil {
		return dst, fmt.Errorf("message: %s: %w", sectionName(code), err)
	}
	return out, nil
}

func appendMessageID(f *fields, v any, field string) error {
	switch v.(type) {
	case nil:
		f.null()
		return nil
	case uint64, encoding.UUID, []byte, string:
	default:
		return fmt.Errorf("message: %s is %T, want uint64, encoding.UUID, []byte or string", field, v)
	}
	var err error
	if f.dst, err = encoding.Append(f.dst, v); err != nil {
		return err
	}
	f.done(true)
	return nil
}

// AppendProperties appends a properties section, omitting trailing absent fields.
func AppendProperties(dst []byte, p *Properties) ([]byte, error) {
	f := beginSection(dst, DescProperties)
	if err := appendMessageID(&f, p.MessageID, "message-id"); err != nil {
		return dst, err
	}
	if p.UserID == nil {
		f.null()
	} else {
		f.dst = encoding.AppendBinary(f.dst, p.UserID)
		f.done(true)
	}
	f.string(p.To)
	f.string(p.Subject)
	f.string(p.ReplyTo)
	if err := appendMessageID(&f, p.CorrelationID, "correlation-id"); err != nil {
		return dst, err
	}
	f.symbol(p.ContentType)
	f.symbol(p.ContentEncoding)
	for _, t := range [...]struct {
		zero bool
		ms   int64
	}{
		{p.AbsoluteExpiryTime.IsZero(), p.AbsoluteExpiryTime.UnixMilli()},
		{p.CreationTime.IsZero(), p.CreationTime.UnixMilli()},
	} {
		if t.zero {
			f.null()
		} else {
			f.dst = encoding.AppendTimestampMillis(f.dst, t.ms)
			f.done(true)
		}
	}
	if p.EmptyGroupID && p.GroupID == "" {
		f.dst = encoding.AppendString(f.dst, "")
		f.done(true)
	} else {
		f.string(p.GroupID)
	}
	if p.GroupSequence == 0 {
		f.null()
	} else {
		f.dst = encoding.AppendUint(f.dst, p.GroupSequence)
		f.done(true)
	}
	f.string(p.ReplyToGroupID)
	return f.end(), nil
}

// SpliceMessageID appends the properties section sec, as received (empty
// when the message has none, or a null list), with its message-id replaced
// by the string id: a broker's assigned id is written without decoding and
// encoding the other fields again (they are copied byte for byte).
func SpliceMessageID(dst, sec []byte, id string) ([]byte, error) {
	var rest []byte
	n := 0 // fields after the message-id
	if len(sec) > 0 {
		d := encoding.NewDecoder(sec)
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return dst, err
		}
		if sym != nil {
			code = sectionCode(sym)
		}
		if code != DescProperties {
			return dst, fmt.Errorf("not a properties section")
		}
		if !d.ReadNull() {
			list, count, err := d.ReadList()
			if err != nil {
				return dst, err
			}
			if count > 0 {
				if err := list.Skip(); err != nil { // the message-id
					return dst, err
				}
				rest, n = list.Rest(), count-1
			}
		}
		if d.Len() != 0 {
			return dst, fmt.Errorf("%d bytes after the properties section", d.Len())
		}
	}
	f := beginSection(dst, DescProperties)
	f.dst = append(encoding.AppendString(f.dst, id), rest...)
	return encoding.EndList(f.dst, f.start, n+1), nil
}

// AppendApplicationProperties appends an application-properties section
// with its keys in sorted order.
func AppendApplicationProperties(dst []byte, props map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := encoding.AppendDescriptor(dst, DescApplicationProperties)
	out, start := encoding.BeginMap(out)
	var err error
	for _, k := range keys {
		out = encoding.AppendString(out, k)
		if out, err = encoding.Append(out, props[k]); err != nil {
			return dst, fmt.Errorf("message: application property %q: %w", k, err)
		}
	}
	return encoding.EndMap(out, start, 2*len(keys)), nil
}

// AppendData appends one data section.
func AppendData(dst, data []byte) []byte {
	return encoding.AppendBinary(encoding.AppendDescriptor(dst, DescData), data)
}

// AppendBody appends the body sections of b.
func AppendBody(dst []byte, b Body) ([]byte, error) {
	switch b.Kind {
	case BodyNone:
		return dst, nil
	case BodyData:
		for _, d := range b.Data {
			dst = AppendData(dst, d)
		}
		return dst, nil
	case BodySequence:
		out := dst
		var err error
		for _, l := range b.Sequence {
			if out, err = encoding.Append(encoding.AppendDescriptor(out, DescAMQPSequence), l); err != nil {
				return dst, fmt.Errorf("message: amqp-sequence: %w", err)
			}
		}
		return out, nil
	case BodyValue:
		out, err := encoding.Append(encoding.AppendDescriptor(dst, DescAMQPValue), b.Value)
		if err != nil {
			return dst, fmt.Errorf("message: amqp-value: %w", err)
		}
		return out, nil
	}
	return dst, fmt.Errorf("message: unknown body kind %d", b.Kind)
}

// Build appends a message made of a header, delivery and message
// annotations (each omitted when nil) and an already encoded bare message,
// which is copied untouched. Append a footer with AppendAnnotations and
// DescFooter if one is needed.
func Build(dst []byte, h *Header, deliveryAnnotations, messageAnnotations encoding.Annotations, bare []byte) ([]byte, error) {
	out := dst
	if h != nil {
		out = AppendHeader(out, h)
	}
	var err error
	if deliveryAnnotations != nil {
		if out, err = AppendAnnotations(out, DescDeliveryAnnotations, deliveryAnnotations); err != nil {
			return dst, err
		}
	}
	if messageAnnotations != nil {
		if out, err = AppendAnnotations(out, DescMessageAnnotations, messageAnnotations); err != nil {
			return dst, err
		}
	}
	return append(out, bare...), nil
}

// AppendBare appends a bare message: properties and application-properties
// (each omitted when nil) and the body.
func AppendBare(dst []byte, p *Properties, appProps map[string]any, body Body) ([]byte, error) {
	out := dst
	var err error
	if p != nil {
		if out, err = AppendProperties(out, p); err != nil {
			return dst, err
		}
	}
	if appProps != nil {
		if out, err = AppendApplicationProperties(out, appProps); err != nil {
			return dst, err
		}
	}
	if out, err = AppendBody(out, body); err != nil {
		return dst, err
	}
	return out, nil
}

// Encode appends m as a complete message, every section in order.
func Encode(dst []byte, m *Message) ([]byte, error) {
	out, err := Build(dst, m.Header, m.DeliveryAnnotations, m.MessageAnnotations, nil)
	if err != nil {
		return dst, err
	}
	if out, err = AppendBare(out, m.Properties, m.ApplicationProperties, m.Body); err != nil {
		return dst, err
	}
	if m.Footer != nil {
		if out, err = AppendAnnotations(out, DescFooter, m.Footer); err != nil {
			return dst, err
		}
	}
	return out, nil
}

// ReplaceApplicationProperties appends to dst a copy of the bare message
// bare whose application-properties section is replaced by one holding
// props (or removed when props is nil). The properties and body sections
// are copied byte for byte.
func ReplaceApplicationProperties(dst, bare []byte, props map[string]any) ([]byte, error) {
	p, err := Parse(bare)
	if err != nil {
		return dst, err
	}
	if p.Header != nil || p.DeliveryAnnotations != nil || p.MessageAnnotations != nil || p.Footer != nil {
		return dst, fmt.Errorf("message: ReplaceApplicationProperties needs a bare message, got header, annotations or footer")
	}
	out := append(dst, bare[:p.appStart]...)
	if props != nil {
		if out, err = AppendApplicationProperties(out, props); err != nil {
			return dst, err
		}
	}
	return append(out, bare[p.appEnd:]...), nil
}
