package servicebus

import (
	"context"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/sas"
)

// Management operations (reference §3.2, §3.3).
const (
	opRenewLock         = "com.microsoft:renew-lock"
	opPeek              = "com.microsoft:peek-message"
	opReceiveBySeq      = "com.microsoft:receive-by-sequence-number"
	opUpdateDisposition = "com.microsoft:update-disposition"
	opSchedule          = "com.microsoft:schedule-message"
	opCancelScheduled   = "com.microsoft:cancel-scheduled-message"
	opRenewSessionLock  = "com.microsoft:renew-session-lock"
	opGetSessionState   = "com.microsoft:get-session-state"
	opSetSessionState   = "com.microsoft:set-session-state"
	opGetMessageSession = "com.microsoft:get-message-sessions"
	opAddRule           = "com.microsoft:add-rule"
	opRemoveRule        = "com.microsoft:remove-rule"
	opEnumerateRules    = "com.microsoft:enumerate-rules"
	opBatchDelete       = "com.microsoft:batch-delete-messages"
)

// operation is one management operation: the right it needs and its
// implementation, which returns the response body (nil: 200 with an empty
// map) or an error.
type operation struct {
	right sas.Right
	do    func(m *mgmtLink, ctx context.Context, req *request) (status int32, body any, err error)
}

var operations = map[string]operation{
	opRenewLock:         {sas.Listen, (*mgmtLink).renewLock},
	opPeek:              {sas.Listen, (*mgmtLink).peek},
	opReceiveBySeq:      {sas.Listen, (*mgmtLink).receiveBySeq},
	opUpdateDisposition: {sas.Listen, (*mgmtLink).updateDisposition},
	opSchedule:          {sas.Send, (*mgmtLink).schedule},
	opCancelScheduled:   {sas.Send, (*mgmtLink).cancelScheduled},
	opRenewSessionLock:  {sas.Listen, (*mgmtLink).renewSessionLock},
	opGetSessionState:   {sas.Listen, (*mgmtLink).getSessionState},
	opSetSessionState:   {sas.Listen, (*mgmtLink).setSessionState},
	opGetMessageSession: {sas.Listen, (*mgmtLink).getMessageSessions},
	opAddRule:           {sas.Manage, (*mgmtLink).addRule},
	opRemoveRule:        {sas.Manage, (*mgmtLink).removeRule},
	opEnumerateRules:    {sas.Manage, (*mgmtLink).enumerateRules},
	opBatchDelete:       {sas.Listen, (*mgmtLink).batchDelete},
}

// mgmtLink is a client sender to <entity>/$management. Requests are
// decoded on the reader goroutine and run in order by a worker (many reach
// the store); each reply goes out pre-settled on the client's reply link.
type mgmtLink struct {
	c      *conn
	addr   Address
	node   string
	target string // the link's target address, the reply-to of requests without one
	q      serial[mgmtItem]
}

type mgmtItem struct {
	d   amqp.Delivery
	req *request
	err error
}

func (c *conn) attachManagement(r *amqp.Receiver, addr Address) (amqp.ReceiverHandler, error) {
	if err := c.h.entityExists(context.Background(), addr.Entity); err != nil {
		return nil, amqpError(err)
	}
	l := &mgmtLink{c: c, addr: addr, node: addr.Path() + "/$management", target: r.Remote().Target.Address}
	l.q.run = l.run
	c.h.metrics.LinkAttached(l.node, false)
	return l, nil
}

// Transfer decodes a request and queues it.
func (l *mgmtLink) Transfer(_ *amqp.Receiver, d amqp.Delivery) {
	it := mgmtItem{d: d}
	it.req, it.err = parseRequest(append([]byte(nil), d.Payload...), l.target)
	it.d.Tag, it.d.Payload = nil, nil
	l.q.push(it)
}

func (l *mgmtLink) run(batch []mgmtItem) {
	for _, it := range batch {
		if it.err != nil {
			settle(it.d, &frames.Rejected{Error: amqpError(it.err)})
			continue
		}
		l.c.reply(it.req, l.handle(it.req))
		settle(it.d, &frames.Accepted{})
	}
}

// handle runs one request and builds its response.
func (l *mgmtLink) handle(req *request) *response {
	op, ok := operations[req.op]
	if !ok {
		return &response{status: 501, cond: amqp.CondNotImplemented, desc: "The operation '" + req.op + "' is not supported."}
	}
	if err := l.c.authorize(l.addr.Entity, op.right); err != nil {
		return errorResponse(err)
	}
	if req.body == nil {
		return errorResponse(badRequest("the request body must be an amqp-value map"))
	}
	ctx := context.Background()
	if req.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.timeout)
		defer cancel()
	}
	status, body, err := op.do(l, ctx, req)
	if err != nil {
		return errorResponse(err)
	}
	if status == 0 {
		status = 200
	}
	return &response{status: status, desc: statusText(status), body: body}
}

func errorResponse(err error) *response {
	m := mapError(err)
	return &response{status: m.status, cond: m.cond, desc: m.desc}
}

func statusText(s int32) string {
	if s == 204 {
		return "No Content"
	}
	return "OK"
}

// Detach counts the link's end.
func (l *mgmtLink) Detach(*amqp.Receiver, error) { l.c.h.metrics.LinkDetached(l.node, false) }

// entries builds a response map with string keys.
func entries(kv ...any) encoding.Map {
	m := make(encoding.Map, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m = append(m, encoding.Pair{Key: kv[i], Value: kv[i+1]})
	}
	return m
}
