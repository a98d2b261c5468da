package servicebus

import (
	"context"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/broker"
)

// sessionsSentinel is the last-updated-time the SDKs send to list every
// session with messages or state: 10000-01-01T00:00:00Z.
var sessionsSentinel = time.UnixMilli(253402300800000).UTC()

func (l *mgmtLink) path() string { return l.addr.Path() }

func (l *mgmtLink) renewLock(ctx context.Context, req *request) (int32, any, error) {
	toks, err := req.body.tokens("lock-tokens")
	if err != nil {
		return 0, nil, err
	}
	exps := make([]any, len(toks))
	for i, t := range toks {
		until, err := l.c.h.b.RenewLock(ctx, l.path(), t)
		if err != nil {
			return 0, nil, err
		}
		exps[i] = until
	}
	return 200, entries("expirations", encoding.Array{Code: encoding.CodeTimestamp, Elems: exps}), nil
}

// messageList renders messages as the list of maps the SDKs expect, each
// holding the encoded message (and, when locked, its lock token).
func messageList(msgs []*broker.Message, locked bool) (encoding.List, error) {
	list := make(encoding.List, len(msgs))
	for i, m := range msgs {
		b, err := encodeMessage(nil, m, locked)
		if err != nil {
			return nil, err
		}
		e := entries("message", b)
		if locked {
			e = append(e, encoding.Pair{Key: "lock-token", Value: encoding.UUID(m.LockToken)})
		}
		list[i] = e
	}
	return list, nil
}

func (l *mgmtLink) peek(ctx context.Context, req *request) (int32, any, error) {
	from, err := req.body.int("from-sequence-number", 0)
	if err != nil {
		return 0, nil, err
	}
	count, err := req.body.int("message-count", 1)
	if err != nil {
		return 0, nil, err
	}
	count = max(1, min(count, broker.MaxPeek))
	sid, err := req.body.optStr("session-id")
	if err != nil {
		return 0, nil, err
	}
	var msgs []*broker.Message
	hasSID := req.body["session-id"] != nil
	if !hasSID {
		// A session receiver of the Go SDK names itself instead.
		if name, ok := req.appProps["associated-link-name"].(string); ok {
			sid, hasSID = l.c.linkSession(name)
		}
	}
	if hasSID {
		msgs, err = l.c.h.b.PeekSession(ctx, l.path(), sid, from, int(count))
	} else {
		msgs, err = l.c.h.b.Peek(ctx, l.path(), from, int(count))
	}
	if err != nil {
		return 0, nil, err
	}
	if len(msgs) == 0 {
		return 204, nil, nil
	}
	list, err := messageList(msgs, false)
	if err != nil {
		return 0, nil, err
	}
	return 200, entries("messages", list), nil
}

func (l *mgmtLink) receiveBySeq(ctx context.Context, req *request) (int32, any, error) {
	seqs, err := req.body.longs("sequence-numbers")
	if err != nil {
		return 0, nil, err
	}
	rsm, err := req.body.int("receiver-settle-mode", 1)
	if err != nil {
		return 0, nil, err
	}
	mode := broker.PeekLock
	if rsm == 0 {
		mode = broker.ReceiveAndDelete
	}
	msgs, err := l.c.h.b.ReceiveDeferred(ctx, l.path(), seqs, mode)
	if err != nil {
		return 0, nil, err
	}
	if len(msgs) == 0 {
		return 204, nil, nil
	}
	list, err := messageList(msgs, mode == broker.PeekLock)
	if err != nil {
		return 0, nil, err
	}
	return 200, entries("messages", list), nil
}

func (l *mgmtLink) updateDisposition(ctx context.Context, req *request) (int32, any, error) {
	status, err := req.body.str("disposition-status")
	if err != nil {
		return 0, nil, err
	}
	toks, err := req.body.tokens("lock-tokens")
	if err != nil {
		return 0, nil, err
	}
	reason, err := req.body.optStr("deadletter-reason")
	if err != nil {
		return 0, nil, err
	}
	desc, err := req.body.optStr("deadletter-description")
	if err != nil {
		return 0, nil, err
	}
	props, err := req.body.properties("properties-to-modify")
	if err != nil {
		return 0, nil, err
	}
	b := l.c.h.b
	switch status {
	case "completed":
		err = b.Complete(ctx, l.path(), toks...)
	case "abandoned":
		err = b.Abandon(ctx, l.path(), props, toks...)
	case "defered", "deferred":
		err = b.Defer(ctx, l.path(), props, toks...)
	case "suspended":
		err = b.DeadLetter(ctx, l.path(), reason, desc, props, toks...)
	default:
		return 0, nil, badRequest("unknown disposition-status '%s'", status)
	}
	if err != nil {
		return 0, nil, err
	}
	return 200, nil, nil
}

func (l *mgmtLink) schedule(ctx context.Context, req *request) (int32, any, error) {
	items, ok := elems(req.body["messages"])
	if !ok {
		return 0, nil, badRequest("'messages' must be a list of maps")
	}
	msgs := make([]*broker.Message, 0, len(items))
	for i, it := range items {
		mm, ok := it.(encoding.Map)
		if !ok {
			return 0, nil, badRequest("'messages' element %d is a %T, want a map", i, it)
		}
		fm, err := toFieldMap(mm)
		if err != nil {
			return 0, nil, err
		}
		raw, ok := fm["message"].([]byte)
		if !ok {
			return 0, nil, badRequest("'messages' element %d lacks the binary 'message'", i)
		}
		m, err := ingest(raw)
		if err != nil {
			return 0, nil, err
		}
		if sid, _ := fm.optStr("session-id"); sid != "" {
			m.SessionID = sid
		}
		if pk, _ := fm.optStr("partition-key"); pk != "" {
			m.PartitionKey = pk
		}
		if m.ScheduledEnqueueTime.IsZero() {
			return 0, nil, badRequest("'messages' element %d has no x-opt-scheduled-enqueue-time annotation", i)
		}
		msgs = append(msgs, m)
	}
	// One request is one atomic schedule: all its messages or none.
	s, err := l.c.h.b.ScheduleEach(ctx, l.addr.Entity, msgs)
	if err != nil {
		return 0, nil, err
	}
	seqs := make([]any, len(s))
	for i, x := range s {
		seqs[i] = x
	}
	return 200, entries("sequence-numbers", encoding.Array{Code: encoding.CodeLong, Elems: seqs}), nil
}

func (l *mgmtLink) cancelScheduled(ctx context.Context, req *request) (int32, any, error) {
	seqs, err := req.body.longs("sequence-numbers")
	if err != nil {
		return 0, nil, err
	}
	return 200, nil, l.c.h.b.CancelScheduled(ctx, l.addr.Entity, seqs)
}

func (l *mgmtLink) renewSessionLock(ctx context.Context, req *request) (int32, any, error) {
	sid, err := req.body.str("session-id")
	if err != nil {
		return 0, nil, err
	}
	until, err := l.c.h.b.RenewSessionLock(ctx, l.path(), sid)
	if err != nil {
		return 0, nil, err
	}
	return 200, entries("expiration", until), nil
}

func (l *mgmtLink) getSessionState(ctx context.Context, req *request) (int32, any, error) {
	sid, err := req.body.str("session-id")
	if err != nil {
		return 0, nil, err
	}
	st, err := l.c.h.b.GetSessionState(ctx, l.path(), sid)
	if err != nil {
		return 0, nil, err
	}
	var v any
	if len(st) > 0 {
		v = st
	}
	return 200, entries("session-state", v), nil
}

func (l *mgmtLink) setSessionState(ctx context.Context, req *request) (int32, any, error) {
	sid, err := req.body.str("session-id")
	if err != nil {
		return 0, nil, err
	}
	var st []byte
	switch v := req.body["session-state"].(type) {
	case nil:
	case []byte:
		st = v
	default:
		return 0, nil, badRequest("'session-state' is a %T, want binary", v)
	}
	return 200, nil, l.c.h.b.SetSessionState(ctx, l.path(), sid, st)
}

func (l *mgmtLink) getMessageSessions(ctx context.Context, req *request) (int32, any, error) {
	var since time.Time
	switch v := req.body["last-updated-time"].(type) {
	case nil:
	case time.Time:
		if v.Before(sessionsSentinel) {
			since = v
		}
	default:
		return 0, nil, badRequest("'last-updated-time' is a %T, want a timestamp", v)
	}
	skip, err := req.body.int("skip", 0)
	if err != nil {
		return 0, nil, err
	}
	top, err := req.body.int("top", 100)
	if err != nil {
		return 0, nil, err
	}
	if skip < 0 || top < 0 {
		return 0, nil, badRequest("'skip' and 'top' must not be negative")
	}
	ids, err := l.c.h.b.ListSessions(ctx, l.path(), since, int(skip), int(top))
	if err != nil {
		return 0, nil, err
	}
	if len(ids) == 0 {
		return 204, nil, nil
	}
	return 200, entries("sessions-ids", ids, "skip", int32(skip)+int32(len(ids))), nil
}

func (l *mgmtLink) batchDelete(ctx context.Context, req *request) (int32, any, error) {
	count, err := req.body.int("message-count", 0)
	if err != nil {
		return 0, nil, err
	}
	if count <= 0 {
		return 0, nil, badRequest("'message-count' must be positive")
	}
	var before time.Time
	switch v := req.body["enqueued-time-utc"].(type) {
	case nil:
	case time.Time:
		before = v
	default:
		return 0, nil, badRequest("'enqueued-time-utc' is a %T, want a timestamp", v)
	}
	n, err := l.c.h.b.DeleteMessages(ctx, l.path(), int(count), before)
	if err != nil {
		return 0, nil, err
	}
	return 200, entries("message-count", int32(n)), nil
}
