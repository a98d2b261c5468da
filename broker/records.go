package broker

import (
	"encoding/binary"
	"fmt"
	"time"
)

type entityKind uint8

const (
	kindQueue        entityKind = 1
	kindTopic        entityKind = 2
	kindSubscription entityKind = 3
)

func (k entityKind) String() string {
	switch k {
	case kindQueue:
		return "queue"
	case kindTopic:
		return "topic"
	case kindSubscription:
		return "subscription"
	}
	return "entity"
}

// entityRecord is the persisted form of an entity.
type entityRecord struct {
	id, parent       uint64
	kind             entityKind
	name             string
	created, updated time.Time
	p                props
}

func encodeEntity(r *entityRecord) []byte {
	e := enc{b: make([]byte, 0, 128)}
	e.u8(entityRecordV2)
	e.u8(uint8(r.kind))
	e.uv(r.id)
	e.uv(r.parent)
	e.str(r.name)
	e.time(r.created)
	e.time(r.updated)
	p := &r.p
	e.dur(p.LockDuration)
	e.sv(p.MaxSizeMB)
	e.boolean(p.DupDetection)
	e.dur(p.DupWindow)
	e.boolean(p.RequiresSession)
	e.dur(p.DefaultTTL)
	e.boolean(p.DLOnExpiration)
	e.boolean(p.DLOnFilterException)
	e.sv(int64(p.MaxDeliveryCount))
	e.str(string(p.Status))
	e.str(p.ForwardTo)
	e.str(p.ForwardDLTo)
	e.dur(p.AutoDeleteOnIdle)
	e.sv(p.MaxMessageSizeKB)
	e.str(p.UserMetadata)
	e.boolean(p.EnablePartitioning)
	e.boolean(p.EnableBatchedOps)
	e.boolean(p.SupportOrdering)
	encodeAuthRules(&e, p.AuthRules) // V2
	e.str(p.ForwardToURI)
	e.str(p.ForwardDLToURI)
	return e.b
}

func decodeEntity(b []byte) (*entityRecord, error) {
	d := dec{b: b}
	v := d.u8()
	if v != entityRecordV1 && v != entityRecordV2 {
		return nil, fmt.Errorf("%w: entity record version %d", errCorrupt, v)
	}
	r := &entityRecord{}
	r.kind = entityKind(d.u8())
	if r.kind < kindQueue || r.kind > kindSubscription {
		return nil, fmt.Errorf("%w: entity kind %d", errCorrupt, r.kind)
	}
	r.id = d.uv()
	r.parent = d.uv()
	r.name = d.str()
	r.created = d.time()
	r.updated = d.time()
	p := &r.p
	p.LockDuration = d.dur()
	p.MaxSizeMB = d.sv()
	p.DupDetection = d.boolean()
	p.DupWindow = d.dur()
	p.RequiresSession = d.boolean()
	p.DefaultTTL = d.dur()
	p.DLOnExpiration = d.boolean()
	p.DLOnFilterException = d.boolean()
	p.MaxDeliveryCount = int32(d.sv())
	p.Status = EntityStatus(d.str())
	p.ForwardTo = d.str()
	p.ForwardDLTo = d.str()
	p.AutoDeleteOnIdle = d.dur()
	p.MaxMessageSizeKB = d.sv()
	p.UserMetadata = d.str()
	p.EnablePartitioning = d.boolean()
	p.EnableBatchedOps = d.boolean()
	p.SupportOrdering = d.boolean()
	if v >= entityRecordV2 {
		p.AuthRules = decodeAuthRules(&d)
		p.ForwardToURI = d.str()
		p.ForwardDLToURI = d.str()
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in entity record", errCorrupt, len(d.b))
	}
	return r, nil
}

// FilterKind is the kind of a rule's filter.
type FilterKind uint8

// Filter kinds. The zero value is the TrueFilter.
const (
	FilterTrue FilterKind = iota
	FilterFalse
	FilterSQL
	FilterCorrelation
)

// CorrelationFilter matches by exact, case-sensitive equality of every
// non-empty field and every listed application property (AND).
type CorrelationFilter struct {
	CorrelationID    string
	MessageID        string
	To               string
	ReplyTo          string
	Subject          string
	SessionID        string
	ReplyToSessionID string
	ContentType      string
	Properties       map[string]any
}

// RuleFilter is a rule's filter: Kind selects which other fields apply.
type RuleFilter struct {
	Kind        FilterKind
	SQL         string         // FilterSQL
	Parameters  map[string]any // FilterSQL: @name values
	Correlation CorrelationFilter
}

// RuleProperties describe a subscription rule.
type RuleProperties struct {
	Name   string
	Filter RuleFilter
	// Action is a SQL rule action ("SET x = 1; REMOVE y"); "" for none.
	Action string
	// ActionParameters are the action's @name values.
	ActionParameters map[string]any
	CreatedAt        time.Time // set by the broker
}

func encodeRule(r *RuleProperties) ([]byte, error) {
	e := enc{b: make([]byte, 0, 64)}
	e.u8(ruleRecordV2)
	e.str(r.Name)
	e.time(r.CreatedAt)
	f := &r.Filter
	e.u8(uint8(f.Kind))
	e.str(f.SQL)
	if err := e.valueMap(f.Parameters); err != nil {
		return nil, err
	}
	c := &f.Correlation
	for _, s := range []string{c.CorrelationID, c.MessageID, c.To, c.ReplyTo, c.Subject, c.SessionID, c.ReplyToSessionID, c.ContentType} {
		e.str(s)
	}
	if err := e.valueMap(c.Properties); err != nil {
		return nil, err
	}
	e.str(r.Action)
	if err := e.valueMap(r.ActionParameters); err != nil { // V2
		return nil, err
	}
	return e.b, nil
}

func decodeRule(b []byte) (*RuleProperties, error) {
	d := dec{b: b}
	v := d.u8()
	if v != ruleRecordV1 && v != ruleRecordV2 {
		return nil, fmt.Errorf("%w: rule record version %d", errCorrupt, v)
	}
	r := &RuleProperties{}
	r.Name = d.str()
	r.CreatedAt = d.time()
	f := &r.Filter
	f.Kind = FilterKind(d.u8())
	if f.Kind > FilterCorrelation {
		return nil, fmt.Errorf("%w: filter kind %d", errCorrupt, f.Kind)
	}
	f.SQL = d.str()
	f.Parameters = d.valueMap()
	c := &f.Correlation
	for _, p := range []*string{&c.CorrelationID, &c.MessageID, &c.To, &c.ReplyTo, &c.Subject, &c.SessionID, &c.ReplyToSessionID, &c.ContentType} {
		*p = d.str()
	}
	c.Properties = d.valueMap()
	r.Action = d.str()
	if v >= ruleRecordV2 {
		r.ActionParameters = d.valueMap()
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes in rule record", errCorrupt, len(d.b))
	}
	return r, nil
}

// msgMeta is a message's index record: everything the in-memory index
// holds, so that state changes (lock expiry, abandon, defer, activation) are
// written from memory without reading the message back.
type msgMeta struct {
	sub        Subqueue
	state      MessageState
	deliveries uint32
	enqueued   int64 // unix nanoseconds
	expires    int64 // 0 = never; for a scheduled message: scheduled time + TTL
	scheduled  int64 // 0 = not scheduled
	bodyRef    uint64
	size       int64
	sessionID  string
	// inline: the message's record follows this one in the same value
	// (metaRecordInline); decodeMetaRecord returns it.
	inline bool
}

func encodeMeta(mm *msgMeta) []byte {
	return appendMeta(make([]byte, 0, metaRecordLen(mm)), mm)
}

// metaRecordLen bounds the length of mm's record: three bytes, six varints
// of at most ten bytes and the session id with its length.
func metaRecordLen(mm *msgMeta) int {
	return 3 + 6*binary.MaxVarintLen64 + binary.MaxVarintLen64 + len(mm.sessionID)
}

// appendMeta appends mm's record to dst.
func appendMeta(dst []byte, mm *msgMeta) []byte {
	e := enc{b: dst}
	if mm.inline {
		e.u8(metaRecordInline) // the caller appends the message record
	} else {
		e.u8(metaRecordV1)
	}
	e.u8(uint8(mm.sub))
	e.u8(uint8(mm.state))
	e.uv(uint64(mm.deliveries))
	e.sv(mm.enqueued)
	e.sv(mm.expires)
	e.sv(mm.scheduled)
	e.uv(mm.bodyRef)
	e.sv(mm.size)
	e.str(mm.sessionID)
	return e.b
}

func decodeMeta(b []byte) (msgMeta, error) {
	mm, _, err := decodeMetaRecord(b)
	return mm, err
}

// decodeMetaRecord decodes an index record and, when the message's record
// follows it (inline), returns that too (aliasing b).
func decodeMetaRecord(b []byte) (mm msgMeta, rec []byte, err error) {
	d := dec{b: b}
	switch v := d.u8(); v {
	case metaRecordV1:
	case metaRecordInline:
		mm.inline = true
	default:
		return mm, nil, fmt.Errorf("%w: message index record version %d", errCorrupt, v)
	}
	mm.sub = Subqueue(d.u8())
	mm.state = MessageState(d.u8())
	mm.deliveries = uint32(d.uv())
	mm.enqueued = d.sv()
	mm.expires = d.sv()
	mm.scheduled = d.sv()
	mm.bodyRef = d.uv()
	mm.size = d.sv()
	mm.sessionID = d.str()
	if d.err != nil {
		return mm, nil, d.err
	}
	if mm.inline {
		rec = d.b
		if len(rec) == 0 {
			return mm, nil, fmt.Errorf("%w: inline message index record without the message", errCorrupt)
		}
	}
	if mm.sub > SubqueueTransferDeadLetter || mm.state > StateScheduled || mm.size < 0 || (!mm.inline && len(d.b) != 0) {
		return mm, nil, fmt.Errorf("%w: message index record subqueue %d state %d size %d, %d trailing bytes", errCorrupt, mm.sub, mm.state, mm.size, len(d.b))
	}
	return mm, rec, nil
}

const flagPropsModified, flagSysModified = 1, 2

// encodeMessage writes a message record: the headers and application
// properties, then the body (not the index fields, kept apart). A message
// whose Body was built behind its record's header (Seal) and still matches
// it returns that record, without copying the body.
func encodeMessage(m *Message) ([]byte, error) {
	if rec := m.sealed(); rec != nil {
		return rec, nil
	}
	e := enc{b: make([]byte, 0, messageRecordSize(m))}
	if err := e.recordHead(m); err != nil {
		return nil, err
	}
	e.b = append(e.b, m.Body...)
	return e.b, nil
}

// recordHead writes a message record up to its body: everything but the
// body's bytes, the body's length included.
func (e *enc) recordHead(m *Message) error {
	e.b = appendRecordFields(e.b, m)
	if err := e.valueMap(m.Properties); err != nil {
		return err
	}
	e.uv(uint64(len(m.Body)))
	return nil
}

// appendRecordFields appends a message record's fields before its
// properties. It is a plain append (no enc) so that a caller's stack buffer
// stays on the stack.
func appendRecordFields(b []byte, m *Message) []byte {
	var flags uint8
	if m.PropertiesModified {
		flags |= flagPropsModified
	}
	if m.SystemPropertiesModified {
		flags |= flagSysModified
	}
	b = append(b, messageRecordV1, flags, m.hops)
	for _, s := range m.recordStrings() {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, int64(m.TimeToLive))
	b = appendTime(b, m.ScheduledEnqueueTime)
	return binary.AppendVarint(b, m.EnqueueSequenceNumber)
}

// recordStrings are the strings of a message record, in its order (see
// decodeMessage).
func (m *Message) recordStrings() [11]string {
	return [11]string{m.MessageID, m.SessionID, m.CorrelationID, m.To, m.ReplyTo, m.ReplyToSessionID, m.Subject,
		m.ContentType, m.PartitionKey, m.ViaPartitionKey, m.DeadLetterSource}
}

// messageRecordSize is what encodeMessage's record of m is expected to
// take: every string and the body with their lengths, the fixed fields, and
// a guess for the properties (a record that outgrew its first buffer was
// copied whole, body included).
func messageRecordSize(m *Message) int {
	n := 64 + len(m.Body)
	for _, s := range m.recordStrings() {
		n += 2 + len(s)
	}
	for k, v := range m.Properties {
		n += 16 + len(k)
		switch x := v.(type) {
		case string:
			n += len(x)
		case []byte:
			n += len(x)
		}
	}
	return n
}

// decodeMessage decodes a message record (index fields left zero). Body
// aliases b.
func decodeMessage(b []byte) (*Message, error) {
	d := dec{b: b}
	if v := d.u8(); v != messageRecordV1 {
		return nil, fmt.Errorf("%w: message record version %d", errCorrupt, v)
	}
	m := &Message{}
	flags := d.u8()
	m.PropertiesModified = flags&flagPropsModified != 0
	m.SystemPropertiesModified = flags&flagSysModified != 0
	m.hops = d.u8()
	for _, p := range []*string{&m.MessageID, &m.SessionID, &m.CorrelationID, &m.To, &m.ReplyTo, &m.ReplyToSessionID, &m.Subject,
		&m.ContentType, &m.PartitionKey, &m.ViaPartitionKey, &m.DeadLetterSource} {
		*p = d.str()
	}
	m.TimeToLive = d.dur()
	m.ScheduledEnqueueTime = d.time()
	m.EnqueueSequenceNumber = d.sv()
	m.Properties = d.valueMap()
	m.Body = d.raw()
	if d.err != nil {
		return nil, d.err
	}
	if flags > 3 || len(d.b) != 0 {
		return nil, fmt.Errorf("%w: message record flags %d, %d trailing bytes", errCorrupt, flags, len(d.b))
	}
	return m, nil
}
