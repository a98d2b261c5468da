package servicebus

import (
	"errors"
	"sync"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
)

// Status keys: CBS uses kebab-case, $management camelCase.
var (
	keyStatusCode = [2]string{"statusCode", "status-code"}
	keyStatusDesc = [2]string{"statusDescription", "status-description"}
	keyErrorCond  = [2]string{"errorCondition", "error-condition"}
)

// response is a reply to a $cbs or $management request.
type response struct {
	status int32
	desc   string
	cond   encoding.Symbol
	cbs    bool
	body   any // the amqp-value body; nil encodes an empty map
}

// reply sends resp, pre-settled, on the link whose target is the request's
// reply-to, correlated by the request's message-id (same AMQP type).
func (c *conn) reply(req *request, resp *response) {
	k := 0
	if resp.cbs {
		k = 1
	}
	app := map[string]any{keyStatusCode[k]: resp.status, keyStatusDesc[k]: resp.desc}
	if resp.cond != "" {
		app[keyErrorCond[k]] = resp.cond
	}
	body := resp.body
	if body == nil {
		body = encoding.Map{}
	}
	payload, err := message.AppendBare(nil, &message.Properties{CorrelationID: req.id}, app, message.Body{Kind: message.BodyValue, Value: body})
	if err != nil {
		c.h.log.Error("cannot encode a management response", "err", err)
		return
	}
	c.mu.Lock()
	l := c.replies[req.replyTo]
	c.mu.Unlock()
	if l == nil {
		c.h.log.Debug("no reply link for a request", "reply-to", req.replyTo)
		return
	}
	l.send(payload)
}

// replyLink is a client receiver of $cbs or $management replies, found by
// its target address, or its name when it has none (the requests' reply-to). Replies wait for credit: the
// SDKs grant it only after the attach, racing their first request.
type replyLink struct {
	c    *conn
	s    *amqp.Sender
	addr string
	node string

	mu      sync.Mutex
	pending [][]byte
}

func (c *conn) attachReply(s *amqp.Sender, addr Address) (amqp.SenderHandler, error) {
	// Go and .NET name the reply address in the link's target; the JS SDK
	// attaches with no target and uses the link's name as the reply-to.
	replyTo := s.Name()
	if t := s.Remote().Target; t != nil && t.Address != "" {
		replyTo = t.Address
	}
	node := "$cbs"
	if addr.Node == NodeManagement {
		node = addr.Path() + "/$management"
	} else if err := c.takeCBS(1); err != nil {
		return nil, err
	}
	l := &replyLink{c: c, s: s, addr: replyTo, node: node}
	c.mu.Lock()
	c.replies[replyTo] = l
	c.mu.Unlock()
	c.h.metrics.LinkAttached(node, true)
	return l, nil
}

// send sends a reply pre-settled, or queues it until the client grants
// credit.
func (l *replyLink) send(payload []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 && l.trySend(payload) {
		return
	}
	l.pending = append(l.pending, payload)
}

// trySend reports false when the link has no credit.
func (l *replyLink) trySend(payload []byte) bool {
	_, err := l.s.TrySend(&amqp.Message{Payload: payload, Settled: true})
	if errors.Is(err, amqp.ErrNoCredit) {
		return false
	}
	if err != nil {
		l.c.h.log.Debug("cannot send a reply", "reply-to", l.addr, "err", err)
	}
	return true
}

// Flow sends the replies that waited for credit.
func (l *replyLink) Flow(*amqp.Sender, amqp.Flow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.pending) > 0 && l.trySend(l.pending[0]) {
		l.pending[0] = nil
		l.pending = l.pending[1:]
	}
}

// Outcome ignores outcomes: replies are pre-settled.
func (*replyLink) Outcome(*amqp.Sender, amqp.Outcome) {}

// Detach forgets the reply address.
func (l *replyLink) Detach(*amqp.Sender, error) {
	l.c.mu.Lock()
	if l.c.replies[l.addr] == l {
		delete(l.c.replies, l.addr)
	}
	l.c.mu.Unlock()
	if l.node == "$cbs" {
		l.c.releaseCBS(1)
	}
	l.c.h.metrics.LinkDetached(l.node, true)
}
