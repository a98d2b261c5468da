package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// entityRef names what a data-plane command works on: a queue, a topic (to
// send), or a topic's subscription.
type entityRef struct {
	name string // queue or topic
	sub  string // subscription, "" for a queue or topic
}

func (e entityRef) String() string {
	if e.sub == "" {
		return e.name
	}
	return e.name + "/Subscriptions/" + e.sub
}

// parseEntity reads ENTITY and --subscription. "topic/Subscriptions/sub"
// (the Service Bus path) is accepted too.
func parseEntity(arg, sub string) (entityRef, error) {
	if sub != "" {
		return entityRef{name: arg, sub: sub}, nil
	}
	segs := strings.Split(arg, "/")
	for i := 1; i+1 < len(segs); i++ {
		if strings.EqualFold(segs[i], "Subscriptions") {
			if i+2 != len(segs) || segs[i+1] == "" {
				return entityRef{}, usageErrorf("%q: want TOPIC/Subscriptions/SUBSCRIPTION", arg)
			}
			return entityRef{name: strings.Join(segs[:i], "/"), sub: segs[i+1]}, nil
		}
	}
	return entityRef{name: arg}, nil
}

// msgReceiver is what Receiver and SessionReceiver have in common.
type msgReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
	Close(ctx context.Context) error
}

// dataSession is what a message command needs: a context honouring
// --timeout, the SDK client, the endpoints and the output.
type dataSession struct {
	env    *cliEnv
	ctx    context.Context
	cancel context.CancelFunc
	client *azservicebus.Client
	ep     endpoints
	out    output
	set    map[string]bool // the flags given on the command line
}

// close releases the client and the context.
func (s *dataSession) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.client.Close(ctx)
	s.cancel()
}

// dataCommand is the skeleton of a message command: flags, connection,
// body.
func dataCommand(env *cliEnv, c command, args []string, minArgs, maxArgs int, defTimeout time.Duration,
	register func(fs *flagSet), body func(s *dataSession, pos []string) error) error {
	fs := newFlagSet(c)
	var cf connFlags
	cf.register(fs, defTimeout)
	if register != nil {
		register(fs)
	}
	pos, err := parseArgs(env, c, fs, args, minArgs, maxArgs)
	if err != nil {
		return err
	}
	ep, err := cf.resolve()
	if err != nil {
		return err
	}
	client, err := ep.client()
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(env.ctx, cf.timeout)
	s := &dataSession{env: env, ctx: ctx, cancel: cancel, client: client, ep: ep, out: output{w: env.stdout, json: cf.json}, set: setFlags(fs)}
	defer s.close()
	return body(s, pos)
}

// receiver opens a receiver on e (or its dead-letter queue).
func (s *dataSession) receiver(e entityRef, mode azservicebus.ReceiveMode, dlq bool) (*azservicebus.Receiver, error) {
	opts := &azservicebus.ReceiverOptions{ReceiveMode: mode}
	if dlq {
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	}
	if e.sub != "" {
		return s.client.NewReceiverForSubscription(e.name, e.sub, opts)
	}
	return s.client.NewReceiverForQueue(e.name, opts)
}

// sessionReceiver accepts session id of e (or the next available session
// when id is nil).
func (s *dataSession) sessionReceiver(ctx context.Context, e entityRef, id *string, mode azservicebus.ReceiveMode) (*azservicebus.SessionReceiver, error) {
	opts := &azservicebus.SessionReceiverOptions{ReceiveMode: mode}
	switch {
	case id != nil && e.sub != "":
		return s.client.AcceptSessionForSubscription(ctx, e.name, e.sub, *id, opts)
	case id != nil:
		return s.client.AcceptSessionForQueue(ctx, e.name, *id, opts)
	case e.sub != "":
		return s.client.AcceptNextSessionForSubscription(ctx, e.name, e.sub, opts)
	}
	return s.client.AcceptNextSessionForQueue(ctx, e.name, opts)
}

// peekPage is the most messages asked for in one peek request.
const peekPage = 250

// peekMessages peeks up to max messages (all, when max <= 0) starting at
// sequence number from (the beginning when from is 0), keeping those keep
// accepts (all when keep is nil).
func peekMessages(ctx context.Context, r msgReceiver, from int64, max int, keep func(*azservicebus.ReceivedMessage) bool) ([]*azservicebus.ReceivedMessage, error) {
	var out []*azservicebus.ReceivedMessage
	next := from
	if next <= 0 {
		next = 1
	}
	for max <= 0 || len(out) < max {
		n := peekPage
		if max > 0 && keep == nil {
			n = min(n, max-len(out))
		}
		page, err := r.PeekMessages(ctx, n, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &next})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if m.SequenceNumber != nil && *m.SequenceNumber >= next {
				next = *m.SequenceNumber + 1
			}
			if keep == nil || keep(m) {
				out = append(out, m)
				if max > 0 && len(out) == max {
					break
				}
			}
		}
	}
	return out, nil
}

// messageJSON is the --json shape of a message.
type messageJSON struct {
	SequenceNumber             *int64         `json:"sequenceNumber,omitempty"`
	State                      string         `json:"state,omitempty"`
	MessageID                  string         `json:"messageId"`
	SessionID                  *string        `json:"sessionId,omitempty"`
	CorrelationID              *string        `json:"correlationId,omitempty"`
	Subject                    *string        `json:"subject,omitempty"`
	ContentType                *string        `json:"contentType,omitempty"`
	ReplyTo                    *string        `json:"replyTo,omitempty"`
	ReplyToSessionID           *string        `json:"replyToSessionId,omitempty"`
	To                         *string        `json:"to,omitempty"`
	PartitionKey               *string        `json:"partitionKey,omitempty"`
	EnqueuedTime               *time.Time     `json:"enqueuedTime,omitempty"`
	ScheduledEnqueueTime       *time.Time     `json:"scheduledEnqueueTime,omitempty"`
	ExpiresAt                  *time.Time     `json:"expiresAt,omitempty"`
	TimeToLive                 string         `json:"timeToLive,omitempty"`
	DeliveryCount              uint32         `json:"deliveryCount"`
	DeadLetterReason           *string        `json:"deadLetterReason,omitempty"`
	DeadLetterErrorDescription *string        `json:"deadLetterErrorDescription,omitempty"`
	DeadLetterSource           *string        `json:"deadLetterSource,omitempty"`
	Properties                 map[string]any `json:"properties,omitempty"`
	Body                       *string        `json:"body,omitempty"`
	BodyBase64                 []byte         `json:"bodyBase64,omitempty"`
}

// stateName names a message state.
func stateName(s azservicebus.MessageState) string {
	switch s {
	case azservicebus.MessageStateDeferred:
		return "deferred"
	case azservicebus.MessageStateScheduled:
		return "scheduled"
	}
	return "active"
}

func messageView(m *azservicebus.ReceivedMessage) messageJSON {
	v := messageJSON{
		SequenceNumber: m.SequenceNumber, State: stateName(m.State), MessageID: m.MessageID, SessionID: m.SessionID,
		CorrelationID: m.CorrelationID, Subject: m.Subject, ContentType: m.ContentType, ReplyTo: m.ReplyTo,
		ReplyToSessionID: m.ReplyToSessionID, To: m.To, PartitionKey: m.PartitionKey, EnqueuedTime: m.EnqueuedTime,
		ScheduledEnqueueTime: m.ScheduledEnqueueTime, ExpiresAt: m.ExpiresAt, DeliveryCount: m.DeliveryCount,
		DeadLetterReason: m.DeadLetterReason, DeadLetterErrorDescription: m.DeadLetterErrorDescription,
		DeadLetterSource: m.DeadLetterSource, Properties: m.ApplicationProperties,
	}
	if m.TimeToLive != nil && *m.TimeToLive > 0 {
		v.TimeToLive = m.TimeToLive.String()
	} else {
		// Without a time to live the SDK computes an expiry equal to the
		// enqueued time, which would mislead.
		v.ExpiresAt = nil
	}
	if utf8.Valid(m.Body) {
		v.Body = ptr(string(m.Body))
	} else {
		v.BodyBase64 = m.Body
	}
	return v
}

func messageViews(msgs []*azservicebus.ReceivedMessage) []messageJSON {
	out := make([]messageJSON, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, messageView(m))
	}
	return out
}

// column is one column of a message table.
type column struct {
	name  string
	value func(*azservicebus.ReceivedMessage) string
}

var (
	colSeq      = column{"SEQ", func(m *azservicebus.ReceivedMessage) string { return orDash(m.SequenceNumber) }}
	colState    = column{"STATE", func(m *azservicebus.ReceivedMessage) string { return stateName(m.State) }}
	colEnqueued = column{"ENQUEUED", func(m *azservicebus.ReceivedMessage) string { return formatTime(m.EnqueuedTime) }}
	colSchedule = column{"SCHEDULED-FOR", func(m *azservicebus.ReceivedMessage) string { return formatTime(m.ScheduledEnqueueTime) }}
	colID       = column{"MESSAGE-ID", func(m *azservicebus.ReceivedMessage) string { return m.MessageID }}
	colSession  = column{"SESSION", func(m *azservicebus.ReceivedMessage) string { return orDash(m.SessionID) }}
	colSubject  = column{"SUBJECT", func(m *azservicebus.ReceivedMessage) string { return orDash(m.Subject) }}
	colDeliv    = column{"DELIVERIES", func(m *azservicebus.ReceivedMessage) string { return fmt.Sprint(m.DeliveryCount) }}
	colReason   = column{"REASON", func(m *azservicebus.ReceivedMessage) string { return orDash(m.DeadLetterReason) }}
	colDesc     = column{"DESCRIPTION", func(m *azservicebus.ReceivedMessage) string {
		return preview([]byte(orDash(m.DeadLetterErrorDescription)), 40)
	}}
	colBody = column{"BODY", func(m *azservicebus.ReceivedMessage) string { return preview(m.Body, 60) }}
)

// messageTable writes msgs with the given columns.
func messageTable(w io.Writer, msgs []*azservicebus.ReceivedMessage, cols ...column) {
	head := make([]any, len(cols))
	for i, c := range cols {
		head[i] = c.name
	}
	row(w, head...)
	for _, m := range msgs {
		cells := make([]any, len(cols))
		for i, c := range cols {
			cells[i] = c.value(m)
		}
		row(w, cells...)
	}
}

// preview renders a body on one line: text quoted-escaped and cut at n
// runes, binary as its size.
func preview(b []byte, n int) string {
	if !utf8.Valid(b) {
		return fmt.Sprintf("<%d bytes>", len(b))
	}
	s := string(b)
	cut := false
	if utf8.RuneCountInString(s) > n {
		s, cut = string([]rune(s)[:n]), true
	}
	r := strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)
	s = r.Replace(s)
	if cut {
		s += "…"
	}
	return s
}

// messageDetail writes every field of one message, body last and whole.
func messageDetail(w io.Writer, m *azservicebus.ReceivedMessage) {
	v := messageView(m)
	row(w, "SequenceNumber", orDash(v.SequenceNumber))
	row(w, "State", v.State)
	row(w, "MessageID", v.MessageID)
	for _, f := range []struct {
		name string
		val  *string
	}{{"SessionID", v.SessionID}, {"CorrelationID", v.CorrelationID}, {"Subject", v.Subject}, {"ContentType", v.ContentType},
		{"ReplyTo", v.ReplyTo}, {"ReplyToSessionID", v.ReplyToSessionID}, {"To", v.To},
		{"DeadLetterReason", v.DeadLetterReason}, {"DeadLetterErrorDescription", v.DeadLetterErrorDescription},
		{"DeadLetterSource", v.DeadLetterSource}} {
		if f.val != nil {
			row(w, f.name, *f.val)
		}
	}
	row(w, "EnqueuedTime", formatTime(v.EnqueuedTime))
	if v.ScheduledEnqueueTime != nil {
		row(w, "ScheduledEnqueueTime", formatTime(v.ScheduledEnqueueTime))
	}
	if v.ExpiresAt != nil {
		row(w, "ExpiresAt", formatTime(v.ExpiresAt))
	}
	row(w, "DeliveryCount", v.DeliveryCount)
	for _, k := range sortedKeys(v.Properties) {
		row(w, "Property "+k, fmt.Sprintf("%v (%T)", v.Properties[k], v.Properties[k]))
	}
	if v.Body != nil {
		row(w, "Body", strings.ReplaceAll(*v.Body, "\n", "\n\t"))
	} else {
		row(w, "Body", fmt.Sprintf("<%d bytes of binary>", len(v.BodyBase64)))
	}
}

// isWaitOver reports whether err is the wait context's deadline (and not
// the command's): the wait ended without a message.
func isWaitOver(cmdCtx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && cmdCtx.Err() == nil
}
