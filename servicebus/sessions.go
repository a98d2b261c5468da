package servicebus

import (
	"context"
	"errors"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/internal/gopool"
)

// Session receiver vocabulary (reference §2.7).
const (
	filterSession   encoding.Symbol = "com.microsoft:session-filter"
	propTimeout     encoding.Symbol = "com.microsoft:timeout"
	propLockedUntil encoding.Symbol = "com.microsoft:locked-until-utc"
	// descSessionFilter is the descriptor the Go SDK writes (0x137000000C);
	// Microsoft's domain:code convention gives 0x000001370000000C.
	descSessionFilter       uint64 = 0x137000000C
	descSessionFilterDomain uint64 = 0x000001370000000C
	// defaultSessionTimeout is how long an accept-next-session waits when
	// the client gives no com.microsoft:timeout.
	defaultSessionTimeout = 60 * time.Second
	// sessionTimeoutMargin caps how much earlier than the client's timeout
	// an accept-next-session gives up.
	sessionTimeoutMargin = 500 * time.Millisecond
	// dotnetEpochTicks is 1970-01-01 in .NET ticks (100 ns since 0001-01-01).
	dotnetEpochTicks = 621355968000000000
)

// sessionRequest is what a session receiver's attach asks for.
type sessionRequest struct {
	id         string // the named session, when next is false
	next       bool   // accept the next available session
	descriptor any    // echoed in the reply's filter
	plain      bool   // the client sent the filter undescribed (JS): reply in kind
}

// sessionFilter reads the session filter of a source: described with
// either descriptor (Go, .NET) or plain (JS); a string names a session, null
// asks for the next available one.
func sessionFilter(src *frames.Source) (sessionRequest, bool) {
	if src == nil {
		return sessionRequest{}, false
	}
	v, ok := src.Filter[filterSession]
	if !ok {
		return sessionRequest{}, false
	}
	req := sessionRequest{descriptor: descSessionFilter, plain: true}
	if d, ok := v.(*encoding.Described); ok {
		req.plain = false
		if d == nil {
			return sessionRequest{next: true, descriptor: descSessionFilter}, true
		}
		req.descriptor = d.Descriptor
		v = d.Value
	}
	switch x := v.(type) {
	case string:
		req.id = x
	case encoding.Symbol:
		req.id = string(x)
	default:
		req.next = true
	}
	return req, true
}

// dotnetTicks converts a time to .NET ticks.
func dotnetTicks(t time.Time) int64 {
	return t.UnixNano()/100 + dotnetEpochTicks
}

// attachTimeout reads com.microsoft:timeout (milliseconds) from the attach.
func attachTimeout(props encoding.Fields) time.Duration {
	if v, ok := props[propTimeout]; ok {
		if ms, ok := asInt64(v); ok && ms >= 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return defaultSessionTimeout
}

// attachSession attaches a session receiver. A named session, or a next
// session available at once, is answered now; otherwise the attach is
// deferred while the broker waits (up to com.microsoft:timeout) for a
// session, without holding up the connection. None in time refuses the
// link with com.microsoft:timeout.
func (l *recvLink) attachSession(req sessionRequest, opts broker.ConsumerOptions) (amqp.SenderHandler, error) {
	ctx := context.Background()
	var err error
	if !req.next {
		l.cons, err = l.c.h.b.AcceptSession(ctx, l.path, req.id, opts)
	} else {
		l.cons, err = l.c.h.b.AcceptNextSession(ctx, l.path, 0, opts)
	}
	if err == nil {
		l.register()
		l.writeSessionReply(l.s.Reply(), req) // in the attach callback
		l.start()
		return l, nil
	}
	timeout := attachTimeout(l.s.Remote().Properties)
	if !req.next || !errors.Is(err, broker.ErrTimeout) || timeout <= 0 {
		return nil, amqpError(err)
	}
	// Answer a little before the client's own deadline (the SDKs send
	// their context's), so that it sees com.microsoft:timeout rather than
	// giving up first.
	wait := timeout - min(timeout/10, sessionTimeoutMargin)
	gopool.Go(func() {
		cons, err := l.c.h.b.AcceptNextSession(ctx, l.path, wait, opts)
		if err != nil {
			_ = l.s.CompleteAttach(nil, nil, amqpError(err))
			return
		}
		l.cons = cons
		l.register()
		l.start()
		// The reply is edited by the engine, under its lock: the link may
		// be refused meanwhile (the client gave up, or the session lock was
		// lost). On failure the engine has called Detach, which released
		// the session.
		_ = l.s.CompleteAttach(l, func(reply *frames.Attach) { l.writeSessionReply(reply, req) }, nil)
	})
	return nil, amqp.ErrDeferAttach
}

// linkSession returns the session of the receiver link a $management
// request names as its associated-link-name, if that is a session receiver
// of this connection.
func (c *conn) linkSession(req *request) (string, bool) {
	name, _ := req.appProps["associated-link-name"].(string)
	if name == "" {
		return "", false
	}
	c.mu.Lock()
	l := c.sessLinks[name]
	c.mu.Unlock()
	if l == nil || l.cons == nil {
		return "", false
	}
	return l.cons.SessionID(), true
}

// register makes the session link findable by its name, for the
// $management requests that name it (peek within the session).
func (l *recvLink) register() {
	l.c.mu.Lock()
	l.c.sessLinks[l.s.Name()] = l
	l.c.mu.Unlock()
}

// setSessionFilter names the locked session id in a session receiver's
// attach reply, in the form the client's filter had.
func setSessionFilter(reply *frames.Attach, req sessionRequest, id any) {
	// The reply's source is the engine's copy of the client's, filter set
	// included (amqp's Reply): it is edited in place.
	if reply.Source == nil {
		reply.Source = &frames.Source{}
	}
	if reply.Source.Filter == nil {
		reply.Source.Filter = make(encoding.Fields, 1)
	}
	// Go and .NET read the locked id from a described value; the JS SDK
	// reads the filter value itself, so it gets the form it sent.
	if req.plain {
		reply.Source.Filter[filterSession] = id
	} else {
		reply.Source.Filter[filterSession] = &encoding.Described{Descriptor: req.descriptor, Value: id}
	}
}

// writeSessionReply writes the attach reply of a session receiver: the
// locked session id as the filter value (described or plain, as the client
// sent it) and the lock's expiry in .NET ticks.
func (l *recvLink) writeSessionReply(reply *frames.Attach, req sessionRequest) {
	setSessionFilter(reply, req, l.cons.SessionID())
	// The reply's properties are its own: edited in place.
	if reply.Properties == nil {
		reply.Properties = make(encoding.Fields, 1)
	}
	reply.Properties[propLockedUntil] = dotnetTicks(l.cons.LockedUntil())
}
