package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/isoduration"
	"github.com/busbar-io/busbar/sas"
)

// messageView is a message as the console shows it: every system property,
// the application properties and the body (base64, with its AMQP kind).
type messageView struct {
	SequenceNumber        int64          `json:"sequenceNumber"`
	State                 string         `json:"state"`
	MessageID             string         `json:"messageId"`
	SessionID             string         `json:"sessionId,omitempty"`
	CorrelationID         string         `json:"correlationId,omitempty"`
	Subject               string         `json:"subject,omitempty"`
	To                    string         `json:"to,omitempty"`
	ReplyTo               string         `json:"replyTo,omitempty"`
	ReplyToSessionID      string         `json:"replyToSessionId,omitempty"`
	ContentType           string         `json:"contentType,omitempty"`
	PartitionKey          string         `json:"partitionKey,omitempty"`
	EnqueuedTime          string         `json:"enqueuedTime"`
	ExpiresAt             string         `json:"expiresAt,omitempty"`
	ScheduledEnqueueTime  string         `json:"scheduledEnqueueTime,omitempty"`
	TimeToLive            string         `json:"timeToLive,omitempty"`
	DeliveryCount         uint32         `json:"deliveryCount"`
	EnqueueSequenceNumber int64          `json:"enqueueSequenceNumber,omitempty"`
	DeadLetterSource      string         `json:"deadLetterSource,omitempty"`
	DeadLetterReason      string         `json:"deadLetterReason,omitempty"`
	DeadLetterDescription string         `json:"deadLetterErrorDescription,omitempty"`
	Properties            map[string]any `json:"properties"`
	BodyKind              string         `json:"bodyKind"`
	Body                  string         `json:"body"` // base64
	Size                  int            `json:"size"`
}

func timeString(t time.Time) string {
	if t.IsZero() || t.Year() >= 9999 {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// jsonValue renders a property value for JSON.
func jsonValue(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return isoduration.Format(x)
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:])
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	}
	return v
}

func viewOf(m *broker.Message) messageView {
	v := messageView{SequenceNumber: m.SequenceNumber, State: m.State.String(), MessageID: m.MessageID, SessionID: m.SessionID,
		CorrelationID: m.CorrelationID, Subject: m.Subject, To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		ContentType: m.ContentType, PartitionKey: m.PartitionKey, EnqueuedTime: timeString(m.EnqueuedTime),
		ExpiresAt: timeString(m.ExpiresAt), ScheduledEnqueueTime: timeString(m.ScheduledEnqueueTime),
		DeliveryCount: m.DeliveryCount, EnqueueSequenceNumber: m.EnqueueSequenceNumber, DeadLetterSource: m.DeadLetterSource,
		Properties: map[string]any{}, Size: len(m.Body)}
	if m.TimeToLive > 0 {
		v.TimeToLive = isoduration.Format(m.TimeToLive)
	}
	for k, x := range m.Properties {
		v.Properties[k] = jsonValue(x)
	}
	v.DeadLetterReason, _ = m.Properties[broker.PropDeadLetterReason].(string)
	v.DeadLetterDescription, _ = m.Properties[broker.PropDeadLetterErrorDescription].(string)
	kind, body := bodyOf(m.Body)
	v.BodyKind, v.Body = kind, base64.StdEncoding.EncodeToString(body)
	return v
}

// bodyOf returns a stored message's body: the data sections' bytes, or an
// AMQP value or sequence rendered as JSON.
func bodyOf(raw []byte) (string, []byte) {
	p, err := message.Parse(raw)
	if err != nil {
		return "unreadable", raw
	}
	switch p.Body.Kind {
	case message.BodyData:
		var b []byte
		for _, d := range p.Body.Data {
			b = append(b, d...)
		}
		return "data", b
	case message.BodyValue:
		switch x := p.Body.Value.(type) {
		case string:
			return "amqp-value", []byte(x)
		case []byte:
			return "amqp-value", x
		}
		b, _ := json.Marshal(amqpJSON(p.Body.Value))
		return "amqp-value", b
	case message.BodySequence:
		b, _ := json.Marshal(amqpJSON(p.Body.Sequence))
		return "amqp-sequence", b
	}
	return "none", nil
}

// amqpJSON converts decoded AMQP values to what encoding/json can write.
func amqpJSON(v any) any {
	switch x := v.(type) {
	case encoding.List:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = amqpJSON(y)
		}
		return out
	case []encoding.List:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = amqpJSON(y)
		}
		return out
	case []any:
		return amqpJSON(encoding.List(x))
	case encoding.Map:
		out := map[string]any{}
		for _, p := range x {
			out[fmt.Sprint(amqpJSON(p.Key))] = amqpJSON(p.Value)
		}
		return out
	case encoding.Symbol:
		return string(x)
	case encoding.UUID:
		return jsonValue([16]byte(x))
	}
	return jsonValue(v)
}

// search selects messages: every non-empty field must match.
type search struct {
	MessageID string `json:"messageId"`
	SessionID string `json:"sessionId"`
	Subject   string `json:"subject"`
	Reason    string `json:"reason"`
	Property  string `json:"property"` // name=value, or name alone for presence
	Text      string `json:"text"`     // in the body
	State     string `json:"state"`    // Active, Deferred, Scheduled
}

func (s *search) empty() bool { return *s == search{} }

func (s *search) match(m *broker.Message) bool {
	if s.MessageID != "" && m.MessageID != s.MessageID || s.SessionID != "" && m.SessionID != s.SessionID ||
		s.Subject != "" && !strings.Contains(strings.ToLower(m.Subject), strings.ToLower(s.Subject)) ||
		s.State != "" && !strings.EqualFold(m.State.String(), s.State) {
		return false
	}
	if s.Reason != "" {
		if r, _ := m.Properties[broker.PropDeadLetterReason].(string); r != s.Reason {
			return false
		}
	}
	if s.Property != "" {
		name, want, hasValue := strings.Cut(s.Property, "=")
		v, ok := m.Properties[strings.TrimSpace(name)]
		if !ok || hasValue && fmt.Sprint(jsonValue(v)) != strings.TrimSpace(want) {
			return false
		}
	}
	if s.Text != "" {
		_, b := bodyOf(m.Body)
		if !strings.Contains(string(b), s.Text) {
			return false
		}
	}
	return true
}

func searchOf(r *http.Request) search {
	q := r.URL.Query()
	return search{MessageID: q.Get("messageId"), SessionID: q.Get("sessionId"), Subject: q.Get("subject"),
		Reason: q.Get("reason"), Property: q.Get("property"), Text: q.Get("text"), State: q.Get("state")}
}

// subqueuePath returns the broker path of an entity's subqueue.
func subqueuePath(path, subqueue string) (string, error) {
	switch subqueue {
	case "", "main":
		return path, nil
	case "deadletter":
		return path + "/$DeadLetterQueue", nil
	case "transferdeadletter":
		return path + "/$Transfer/$DeadLetterQueue", nil
	}
	return "", badRequest("subqueue %q is not main, deadletter or transferdeadletter", subqueue)
}

// maxScan bounds the messages one search request reads.
const maxScan = 20000

// messages peeks a page of an entity's messages, oldest first, from a
// sequence number, keeping those that match the search.
func (c *Console) messages(w http.ResponseWriter, r *http.Request, p *principal) error {
	q := r.URL.Query()
	path := q.Get("path")
	if _, err := splitPath(path); err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	sp, err := subqueuePath(path, q.Get("subqueue"))
	if err != nil {
		return err
	}
	from, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	count, _ := strconv.Atoi(q.Get("count"))
	if count <= 0 || count > 500 {
		count = 50
	}
	s := searchOf(r)
	out := struct {
		Messages []messageView `json:"messages"`
		Next     int64         `json:"next"` // 0: no more
		Scanned  int           `json:"scanned"`
	}{Messages: []messageView{}}
	for out.Scanned < maxScan {
		n := count
		if !s.empty() {
			n = 500
		}
		ms, err := c.b.Peek(r.Context(), sp, from, n)
		if err != nil {
			return err
		}
		for _, m := range ms {
			out.Scanned++
			from = m.SequenceNumber + 1
			if s.match(m) {
				out.Messages = append(out.Messages, viewOf(m))
				if len(out.Messages) == count {
					out.Next = from
					return writeJSON(w, out)
				}
			}
		}
		if len(ms) < n {
			return writeJSON(w, out)
		}
	}
	out.Next = from
	return writeJSON(w, out)
}

// outgoing is a message to send, as the send form fills it.
type outgoing struct {
	Path                 string         `json:"path"`
	Body                 string         `json:"body"`
	BodyBase64           bool           `json:"bodyBase64"`
	ContentType          string         `json:"contentType"`
	MessageID            string         `json:"messageId"`
	SessionID            string         `json:"sessionId"`
	CorrelationID        string         `json:"correlationId"`
	Subject              string         `json:"subject"`
	To                   string         `json:"to"`
	ReplyTo              string         `json:"replyTo"`
	TimeToLive           string         `json:"timeToLive"`           // ISO 8601
	ScheduledEnqueueTime string         `json:"scheduledEnqueueTime"` // RFC 3339
	Properties           map[string]any `json:"properties"`
	Count                int            `json:"count"` // copies, each with its own message id
}

func newMessageID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// build encodes the message as an SDK would and fills the broker fields
// the AMQP layer would read from it.
func (o *outgoing) build(id string) (*broker.Message, error) {
	body := []byte(o.Body)
	if o.BodyBase64 {
		b, err := base64.StdEncoding.DecodeString(o.Body)
		if err != nil {
			return nil, badRequest("the body is not base64: %v", err)
		}
		body = b
	}
	m := &broker.Message{MessageID: id, SessionID: o.SessionID, CorrelationID: o.CorrelationID, Subject: o.Subject,
		To: o.To, ReplyTo: o.ReplyTo, ContentType: o.ContentType}
	am := &message.Message{Header: &message.Header{Durable: true, Priority: message.DefaultPriority},
		Properties: &message.Properties{MessageID: id, To: o.To, Subject: o.Subject, ReplyTo: o.ReplyTo,
			ContentType: encoding.Symbol(o.ContentType), GroupID: o.SessionID},
		Body: message.Body{Kind: message.BodyData, Data: [][]byte{body}}}
	if o.CorrelationID != "" {
		am.Properties.CorrelationID = o.CorrelationID
	}
	if o.TimeToLive != "" {
		d, err := isoduration.Parse(o.TimeToLive)
		if err != nil || d <= 0 {
			return nil, badRequest("time to live %q is not a positive ISO 8601 duration such as PT5M", o.TimeToLive)
		}
		m.TimeToLive = d
		am.Header.TTL = uint32(min(d.Milliseconds(), 1<<32-1))
	}
	if o.ScheduledEnqueueTime != "" {
		t, err := time.Parse(time.RFC3339, o.ScheduledEnqueueTime)
		if err != nil {
			return nil, badRequest("scheduled enqueue time %q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", o.ScheduledEnqueueTime)
		}
		m.ScheduledEnqueueTime = t.UTC()
		am.MessageAnnotations = encoding.Annotations{encoding.Symbol("x-opt-scheduled-enqueue-time"): t.UTC()}
	}
	if len(o.Properties) > 0 {
		m.Properties = map[string]any{}
		am.ApplicationProperties = map[string]any{}
		for k, v := range o.Properties {
			switch x := v.(type) {
			case float64:
				if x == float64(int64(x)) {
					v = int64(x)
				}
			case string, bool, nil:
			default:
				return nil, badRequest("property %q must be text, a number, true or false", k)
			}
			m.Properties[k], am.ApplicationProperties[k] = v, v
		}
	}
	enc, err := message.Encode(nil, am)
	if err != nil {
		return nil, badRequest("encoding the message: %v", err)
	}
	m.Body = enc
	return m, nil
}

func (c *Console) send(w http.ResponseWriter, r *http.Request, p *principal) error {
	var o outgoing
	if err := readJSON(r, &o); err != nil {
		return err
	}
	if _, err := splitPath(o.Path); err != nil {
		return err
	}
	if err := c.need(p, o.Path, sas.Send); err != nil {
		return err
	}
	if o.Count <= 0 {
		o.Count = 1
	}
	if o.Count > 1000 {
		return badRequest("send at most 1000 copies at once")
	}
	msgs := make([]*broker.Message, o.Count)
	for i := range msgs {
		id := o.MessageID
		if id == "" || o.Count > 1 {
			id = newMessageID()
		}
		m, err := o.build(id)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	if err := c.b.Send(r.Context(), o.Path, msgs); err != nil {
		return err
	}
	return writeJSON(w, map[string]int{"sent": len(msgs)})
}

// taken is what a receive got: the messages, and the consumer holding
// their locks (peek-lock), to close when they are settled.
type taken struct {
	cons *broker.Consumer
	msgs []*broker.Message
}

// take receives up to n messages available now from path (a session's,
// for a session-enabled entity: session, or the next available one).
func (c *Console) take(ctx context.Context, path string, n int, mode broker.ReceiveMode, sessionful bool, sessionID string) (*taken, error) {
	var mu sync.Mutex
	t := &taken{}
	o := broker.ConsumerOptions{Mode: mode, AbandonOnClose: true, Deliver: func(m *broker.Message) {
		mu.Lock()
		t.msgs = append(t.msgs, m)
		mu.Unlock()
	}}
	var err error
	switch {
	case !sessionful:
		t.cons, err = c.b.NewConsumer(ctx, path, o)
	case sessionID != "":
		t.cons, err = c.b.AcceptSession(ctx, path, sessionID, o)
	default:
		t.cons, err = c.b.AcceptNextSession(ctx, path, 100*time.Millisecond, o)
		if errors.Is(err, broker.ErrTimeout) {
			return t, nil // no session has messages
		}
	}
	if err != nil {
		return nil, err
	}
	t.cons.AddCredit(n)
	t.cons.Drain()
	mu.Lock()
	defer mu.Unlock()
	t.msgs = append([]*broker.Message(nil), t.msgs...)
	return t, nil
}

func (t *taken) close() {
	if t.cons != nil {
		_ = t.cons.Close()
	}
}

func (t *taken) tokens() []broker.LockToken {
	out := make([]broker.LockToken, len(t.msgs))
	for i, m := range t.msgs {
		out[i] = m.LockToken
	}
	return out
}

// receive takes messages off an entity: deleting them (receive-and-delete)
// or dead-lettering them.
func (c *Console) receive(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Path        string `json:"path"`
		Subqueue    string `json:"subqueue"`
		Count       int    `json:"count"`
		Mode        string `json:"mode"` // delete, deadletter
		SessionID   string `json:"sessionId"`
		Reason      string `json:"reason"`
		Description string `json:"description"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if _, err := splitPath(in.Path); err != nil {
		return err
	}
	if err := c.need(p, in.Path, sas.Listen); err != nil {
		return err
	}
	sp, err := subqueuePath(in.Path, in.Subqueue)
	if err != nil {
		return err
	}
	if in.Count <= 0 || in.Count > 1000 {
		return badRequest("receive between 1 and 1000 messages")
	}
	mode := broker.ReceiveAndDelete
	switch in.Mode {
	case "delete":
	case "deadletter":
		if sp != in.Path {
			return badRequest("dead-letter messages of the entity itself, not of a subqueue")
		}
		mode = broker.PeekLock
	default:
		return badRequest("mode %q is not delete or deadletter", in.Mode)
	}
	ev, err := c.entity(r.Context(), mustPath(in.Path))
	if err != nil {
		return err
	}
	t, err := c.take(r.Context(), sp, in.Count, mode, sp == in.Path && ev.Counts.RequiresSession, in.SessionID)
	if err != nil {
		return err
	}
	defer t.close()
	if mode == broker.PeekLock && len(t.msgs) > 0 {
		reason := in.Reason
		if reason == "" {
			reason = "DeadLetteredFromConsole"
		}
		if err := c.b.DeadLetter(r.Context(), sp, reason, in.Description, nil, t.tokens()...); err != nil {
			return err
		}
	}
	out := struct {
		Messages []messageView `json:"messages"`
	}{Messages: []messageView{}}
	for _, m := range t.msgs {
		out.Messages = append(out.Messages, viewOf(m))
	}
	return writeJSON(w, out)
}

func mustPath(path string) broker.Path {
	p, _ := broker.ParsePath(path)
	return p
}

// cancelScheduled cancels scheduled messages of a queue or topic.
func (c *Console) cancelScheduled(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Path string  `json:"path"`
		Seqs []int64 `json:"sequenceNumbers"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if _, err := splitPath(in.Path); err != nil {
		return err
	}
	if err := c.need(p, in.Path, sas.Send); err != nil {
		return err
	}
	if len(in.Seqs) == 0 {
		return badRequest("name the sequence numbers of the scheduled messages to cancel")
	}
	if err := c.b.CancelScheduled(r.Context(), in.Path, in.Seqs); err != nil {
		return err
	}
	return writeJSON(w, map[string]int{"cancelled": len(in.Seqs)})
}

// resubmitted returns the copy of a dead-lettered message that goes back
// to an entity: the same bytes, without the dead-letter properties, and
// with the application properties as the broker holds them.
func resubmitted(m *broker.Message) (*broker.Message, error) {
	p, err := message.Parse(m.Body)
	if err != nil {
		return nil, fmt.Errorf("message %d cannot be read: %w", m.SequenceNumber, err)
	}
	props := map[string]any{}
	maps.Copy(props, p.ApplicationProperties) // values only the body keeps, too
	for k, v := range m.Properties {
		if b, ok := v.([16]byte); ok {
			v = encoding.UUID(b)
		}
		props[k] = v
	}
	delete(props, broker.PropDeadLetterReason)
	delete(props, broker.PropDeadLetterErrorDescription)
	bare, err := message.ReplaceApplicationProperties(nil, p.Bare(), props)
	if err != nil {
		return nil, fmt.Errorf("message %d cannot be re-encoded: %w", m.SequenceNumber, err)
	}
	body, err := message.Build(nil, p.Header, nil, p.MessageAnnotations, bare)
	if err != nil {
		return nil, fmt.Errorf("message %d cannot be re-encoded: %w", m.SequenceNumber, err)
	}
	n := &broker.Message{Body: body, MessageID: m.MessageID, SessionID: m.SessionID, CorrelationID: m.CorrelationID,
		To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID, Subject: m.Subject, ContentType: m.ContentType,
		PartitionKey: m.PartitionKey, ViaPartitionKey: m.ViaPartitionKey, TimeToLive: m.TimeToLive,
		EmptySessionID: m.SessionID == "" && p.Properties != nil && p.Properties.EmptyGroupID}
	n.Properties = map[string]any{}
	for k, v := range m.Properties {
		if k != broker.PropDeadLetterReason && k != broker.PropDeadLetterErrorDescription {
			n.Properties[k] = v
		}
	}
	return n, nil
}
