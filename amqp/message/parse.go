package message

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// Parsed is an encoded message split into its sections. The embedded
// Message holds the decoded sections; Body.Data slices alias the input, as
// do Raw and Bare.
type Parsed struct {
	Message
	raw                []byte
	bareStart, bareEnd int
	// appStart..appEnd is the application-properties section; when it is
	// absent both hold the offset where it would go.
	appStart, appEnd int
	// props and data1 hold the properties and the first data section, so
	// that a parse allocates neither on its own; Parse points Properties
	// and Body.Data at them (ParseInto leaves that to its caller).
	props    Properties
	hasProps bool
	data1    [1][]byte
	ndata    int
}

// PropertiesSection returns the properties section, nil when absent. After
// ParseInto it is the only way to it.
func (p *Parsed) PropertiesSection() *Properties {
	if !p.hasProps {
		return nil
	}
	return &p.props
}

// link points Properties and a lone data section's Body.Data at p's own
// fields.
func (p *Parsed) link() {
	if p.hasProps {
		p.Properties = &p.props
	}
	if p.ndata == 1 {
		p.Body.Data = p.data1[:1:1]
	}
}

// Raw returns the whole encoded message.
func (p *Parsed) Raw() []byte { return p.raw }

// Bare returns the bare message (properties through the last body section)
// exactly as received.
func (p *Parsed) Bare() []byte { return p.raw[p.bareStart:p.bareEnd:p.bareEnd] }

// ParseError is a message that could not be parsed: which section, at which
// offset of the input, and why.
type ParseError struct {
	Section string // "header", "properties", ..., or "message" for the layout
	Offset  int
	Err     error
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("message: %s at offset %d: %v", e.Section, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *ParseError) Unwrap() error { return e.Err }

// section order ranks; body sections share one rank and may repeat.
const (
	rankHeader = iota
	rankDeliveryAnnotations
	rankMessageAnnotations
	rankProperties
	rankApplicationProperties
	rankBody
	rankFooter
)

func sectionName(code uint64) string {
	switch code {
	case DescHeader:
		return "header"
	case DescDeliveryAnnotations:
		return "delivery-annotations"
	case DescMessageAnnotations:
		return "message-annotations"
	case DescProperties:
		return "properties"
	case DescApplicationProperties:
		return "application-properties"
	case DescData:
		return "data"
	case DescAMQPSequence:
		return "amqp-sequence"
	case DescAMQPValue:
		return "amqp-value"
	case DescFooter:
		return "footer"
	}
	return "unknown section"
}

func sectionCode(sym []byte) uint64 {
	switch string(sym) {
	case "amqp:header:list":
		return DescHeader
	case "amqp:delivery-annotations:map":
		return DescDeliveryAnnotations
	case "amqp:message-annotations:map":
		return DescMessageAnnotations
	case "amqp:properties:list":
		return DescProperties
	case "amqp:application-properties:map":
		return DescApplicationProperties
	case "amqp:data:binary":
		return DescData
	case "amqp:amqp-sequence:list":
		return DescAMQPSequence
	case "amqp:amqp-value:*":
		return DescAMQPValue
	case "amqp:footer:map":
		return DescFooter
	}
	return 0
}

func rankOf(code uint64) int {
	switch code {
	case DescHeader:
		return rankHeader
	case DescDeliveryAnnotations:
		return rankDeliveryAnnotations
	case DescMessageAnnotations:
		return rankMessageAnnotations
	case DescProperties:
		return rankProperties
	case DescApplicationProperties:
		return rankApplicationProperties
	case DescFooter:
		return rankFooter
	}
	return rankBody
}

// Parse splits an encoded message into its sections and decodes them. It
// checks the section order of messaging §3.2 (each section at most once,
// body sections of one kind, an amqp-value only once). A message without a
// body section parses with Body.Kind BodyNone.
func Parse(b []byte) (*Parsed, error) {
	p := new(Parsed)
	if err := ParseInto(p, b); err != nil {
		return nil, err
	}
	p.link()
	return p, nil
}

// ParseInto is Parse into p, which it overwrites, for a caller on a hot
// path that keeps p on its stack: nothing in p points into p itself, so it
// does not escape. That leaves Properties nil (read PropertiesSection) and,
// when the body is a single data section, Body.Data nil.
func ParseInto(p *Parsed, b []byte) error {
	*p = Parsed{raw: b, bareStart: -1}
	d := encoding.NewDecoder(b)
	next := 0 // the lowest rank allowed next
	for d.Len() > 0 {
		start := d.Pos()
		code, sym, err := d.ReadDescriptor()
		if err != nil {
			return &ParseError{Section: "message", Offset: start, Err: err}
		}
		if sym != nil {
			if code = sectionCode(sym); code == 0 {
				return &ParseError{Section: "message", Offset: start, Err: fmt.Errorf("unknown section descriptor %q", sym)}
			}
		}
		if code < DescHeader || code > DescFooter {
			return &ParseError{Section: "message", Offset: start, Err: fmt.Errorf("unknown section descriptor 0x%02x", code)}
		}
		name := sectionName(code)
		rank := rankOf(code)
		if rank < next {
			return &ParseError{Section: name, Offset: start, Err: fmt.Errorf("section out of order or repeated")}
		}
		if rank == rankBody {
			kind := bodyKind(code)
			if p.Body.Kind != BodyNone && (p.Body.Kind != kind || kind == BodyValue) {
				return &ParseError{Section: name, Offset: start,
					Err: fmt.Errorf("%s section after a %s body", name, p.Body.Kind)}
			}
			p.Body.Kind = kind
			next = rankBody
		} else {
			next = rank + 1
		}
		if err := p.decodeSection(&d, code); err != nil {
			return &ParseError{Section: name, Offset: start, Err: err}
		}
		end := d.Pos()
		if rank >= rankProperties && rank <= rankBody {
			if p.bareStart < 0 {
				p.bareStart = start
			}
			p.bareEnd = end
		}
		if rank < rankApplicationProperties {
			p.appStart, p.appEnd = end, end
		} else if rank == rankApplicationProperties {
			p.appStart, p.appEnd = start, end
		}
	}
	if p.bareStart < 0 {
		p.bareStart, p.bareEnd = p.appStart, p.appStart
	}
	return nil
}

func bodyKind(code uint64) BodyKind {
	switch code {
	case DescData:
		return BodyData
	case DescAMQPSequence:
		return BodySequence
	}
	return BodyValue
}

func (p *Parsed) decodeSection(d *encoding.Decoder, code uint64) error {
	var err error
	switch code {
	case DescHeader:
		p.Header, err = decodeHeader(d)
	case DescDeliveryAnnotations:
		p.DeliveryAnnotations, err = readAnnotations(d)
	case DescMessageAnnotations:
		p.MessageAnnotations, err = readAnnotations(d)
	case DescProperties:
		p.hasProps = true
		err = decodeProperties(d, &p.props)
	case DescApplicationProperties:
		p.ApplicationProperties, err = decodeApplicationProperties(d)
	case DescData:
		var b []byte
		if b, err = d.ReadBinary(); err == nil {
			switch p.ndata {
			case 0:
				p.data1[0] = b
			case 1:
				p.Body.Data = append(make([][]byte, 0, 4), p.data1[0], b)
			default:
				p.Body.Data = append(p.Body.Data, b)
			}
			p.ndata++
		}
	case DescAMQPSequence:
		var v any
		if v, err = d.ReadValue(); err == nil {
			l, ok := v.(encoding.List)
			if !ok {
				return fmt.Errorf("amqp-sequence holds %T, want a list", v)
			}
			p.Body.Sequence = append(p.Body.Sequence, l)
		}
	case DescAMQPValue:
		p.Body.Value, err = d.ReadValue()
	case DescFooter:
		p.Footer, err = readAnnotations(d)
	}
	return err
}

// readAnnotations reads an annotations map; a null reads as an empty map so
// the section's presence is kept.
func readAnnotations(d *encoding.Decoder) (encoding.Annotations, error) {
	a, err := d.ReadAnnotations()
	if err == nil && a == nil {
		a = encoding.Annotations{}
	}
	return a, err
}

// fieldList walks a composite's fields in order.
type fieldList struct {
	d    encoding.Decoder
	n, i int
}

func openList(d *encoding.Decoder) (fieldList, error) {
	if d.ReadNull() {
		return fieldList{}, nil
	}
	c, n, err := d.ReadList()
	return fieldList{d: c, n: n}, err
}

// next reports whether the next field is present (and not null).
func (f *fieldList) next() bool {
	i := f.i
	f.i++
	return i < f.n && !f.d.ReadNull()
}

func fieldErr(field string, err error) error { return fmt.Errorf("%s: %w", field, err) }

// stringField reads the next field as a string, "" when absent.
func (f *fieldList) stringField(name string) (string, error) {
	if !f.next() {
		return "", nil
	}
	v, err := f.d.ReadString()
	if err != nil {
		return "", fieldErr(name, err)
	}
	return v, nil
}

func decodeHeader(d *encoding.Decoder) (*Header, error) {
	f, err := openList(d)
	if err != nil {
		return nil, err
	}
	h := &Header{Priority: DefaultPriority}
	if f.next() {
		if h.Durable, err = f.d.ReadBool(); err != nil {
			return nil, fieldErr("durable", err)
		}
	}
	if f.next() {
		if h.Priority, err = f.d.ReadUint8(); err != nil {
			return nil, fieldErr("priority", err)
		}
	}
	if f.next() {
		if h.TTL, err = f.d.ReadUint32(); err != nil {
			return nil, fieldErr("ttl", err)
		}
	}
	if f.next() {
		if h.FirstAcquirer, err = f.d.ReadBool(); err != nil {
			return nil, fieldErr("first-acquirer", err)
		}
	}
	if f.next() {
		if h.DeliveryCount, err = f.d.ReadUint32(); err != nil {
			return nil, fieldErr("delivery-count", err)
		}
	}
	return h, nil
}

// readMessageID reads a message-id or correlation-id: ulong, uuid, binary or string.
func readMessageID(d *encoding.Decoder, field string) (any, error) {
	at := d.Offset()
	v, err := d.ReadValue()
	if err != nil {
		return nil, fieldErr(field, err)
	}
	switch v.(type) {
	case uint64, encoding.UUID, []byte, string:
		return v, nil
	}
	return nil, fmt.Errorf("%s at offset %d is %T, want ulong, uuid, binary or string", field, at, v)
}

func decodeProperties(d *encoding.Decoder, p *Properties) error {
	f, err := openList(d)
	if err != nil {
		return err
	}
	if f.next() {
		if p.MessageID, err = readMessageID(&f.d, "message-id"); err != nil {
			return err
		}
	}
	if f.next() {
		b, err := f.d.ReadBinary()
		if err != nil {
			return fieldErr("user-id", err)
		}
		p.UserID = append([]byte{}, b...)
	}
	// One at a time: a table of pointers into p would make p escape.
	if p.To, err = f.stringField("to"); err != nil {
		return err
	}
	if p.Subject, err = f.stringField("subject"); err != nil {
		return err
	}
	if p.ReplyTo, err = f.stringField("reply-to"); err != nil {
		return err
	}
	if f.next() {
		if p.CorrelationID, err = readMessageID(&f.d, "correlation-id"); err != nil {
			return err
		}
	}
	if f.next() {
		if p.ContentType, err = f.d.ReadSymbol(); err != nil {
			return fieldErr("content-type", err)
		}
	}
	if f.next() {
		if p.ContentEncoding, err = f.d.ReadSymbol(); err != nil {
			return fieldErr("content-encoding", err)
		}
	}
	if f.next() {
		if p.AbsoluteExpiryTime, err = f.d.ReadTimestamp(); err != nil {
			return fieldErr("absolute-expiry-time", err)
		}
	}
	if f.next() {
		if p.CreationTime, err = f.d.ReadTimestamp(); err != nil {
			return fieldErr("creation-time", err)
		}
	}
	if f.next() {
		if p.GroupID, err = f.d.ReadString(); err != nil {
			return fieldErr("group-id", err)
		}
		p.EmptyGroupID = p.GroupID == ""
	}
	if f.next() {
		if p.GroupSequence, err = f.d.ReadUint32(); err != nil {
			return fieldErr("group-sequence", err)
		}
	}
	if f.next() {
		if p.ReplyToGroupID, err = f.d.ReadString(); err != nil {
			return fieldErr("reply-to-group-id", err)
		}
	}
	return nil
}

// decodeApplicationProperties reads a map with string keys. Values may be
// of any type (the specification restricts them to simple types, but some
// SDKs send described types there, e.g. .NET's DateTimeOffset).
func decodeApplicationProperties(d *encoding.Decoder) (map[string]any, error) {
	if d.ReadNull() {
		return map[string]any{}, nil
	}
	c, n, err := d.ReadMap()
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, n)
	for range n {
		at := c.Offset()
		k, err := c.ReadStringBytes()
		if err != nil {
			return nil, fmt.Errorf("key at offset %d: %w", at, err)
		}
		v, err := c.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		m[string(k)] = v
	}
	return m, nil
}
