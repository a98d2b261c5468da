package servicebus

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
)

// Options configure a Handler.
type Options struct {
	// Broker is the namespace the handler serves. Required.
	Broker *broker.Broker
	// Authorizer validates SAS tokens presented on $cbs and SASL PLAIN
	// credentials. nil disables authorization: every connection may do
	// everything (the official emulator's behaviour).
	Authorizer *sas.Authorizer
	// Clock reads the time for token expiry; default the real clock.
	// Clients sign tokens with their wall clocks, so keep the real clock
	// even when the broker runs on a fake one (busbartest).
	Clock clock.Clock
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Metrics receives connection and link events; nil for none.
	Metrics Metrics
	// LinkCredit is the credit granted to each client sender link, which
	// bounds its messages in flight to the store; default 100.
	LinkCredit uint32
	// Forwarding, when not nil, relays links for queues and topics this
	// node does not serve (a dormant entity of a cluster) to the node that
	// does (see forward.go); nil refuses them with amqp:connection:forced.
	Forwarding *Forwarding
}

// Metrics receives connection and link events. Methods are called
// synchronously from connection goroutines and must not block.
type Metrics interface {
	// ConnectionOpened counts an accepted connection.
	ConnectionOpened()
	// ConnectionClosed counts a connection that ended.
	ConnectionClosed()
	// LinkAttached counts a link attached to entity (a queue, topic or
	// subscription path, "$cbs" or "<entity>/$management"); receiving is
	// true when the client receives on it.
	LinkAttached(entity string, receiving bool)
	// LinkDetached counts a link that ended, with LinkAttached's arguments.
	LinkDetached(entity string, receiving bool)
}

// Handler is the Service Bus dialect of AMQP: it implements amqp.Handler on
// top of a broker. Create it with NewHandler and pass it (and its
// Authenticate method) in amqp.Config.
type Handler struct {
	b       *broker.Broker
	auth    *sas.Authorizer
	clk     clock.Clock
	log     *slog.Logger
	metrics Metrics
	credit  uint32
	peers   *peers // nil without Options.Forwarding

	conns sync.Map // *amqp.Conn -> *conn
}

var _ amqp.Handler = (*Handler)(nil)

// NewHandler returns a Handler serving o.Broker.
func NewHandler(o Options) (*Handler, error) {
	if o.Broker == nil {
		return nil, errors.New("servicebus: Options.Broker is nil")
	}
	h := &Handler{b: o.Broker, auth: o.Authorizer, clk: o.Clock, log: o.Logger, metrics: o.Metrics, credit: o.LinkCredit}
	if h.clk == nil {
		h.clk = clock.Real()
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil {
		h.metrics = noMetrics{}
	}
	if h.credit == 0 {
		h.credit = 100
	}
	if f := o.Forwarding; f != nil {
		if f.Owner == nil {
			return nil, errors.New("servicebus: Forwarding.Owner is nil")
		}
		h.peers = &peers{f: *f, conns: map[string][]*peerConn{}}
	}
	return h, nil
}

type noMetrics struct{}

func (noMetrics) ConnectionOpened()         {}
func (noMetrics) ConnectionClosed()         {}
func (noMetrics) LinkAttached(string, bool) {}
func (noMetrics) LinkDetached(string, bool) {}

// plainIdentity is the identity of a connection authenticated with SASL
// PLAIN: the rule whose key the client presented.
type plainIdentity struct {
	rule sas.Rule
}

// Authenticate is an amqp.Config.Authenticate for Service Bus clients:
// ANONYMOUS and MSSBCBS connections are accepted and must present tokens on
// $cbs; PLAIN connections are authorized as the shared access rule named by
// the user name, whose primary or secondary key must be the password.
func (h *Handler) Authenticate(c *amqp.Credentials) (any, error) {
	if c.Mechanism != amqp.MechPlain {
		return nil, nil
	}
	if h.auth == nil {
		return nil, nil
	}
	for _, r := range h.auth.Rules() {
		if r.KeyName == c.Username && c.Password != "" && (sameKey(c.Password, r.PrimaryKey) || sameKey(c.Password, r.SecondaryKey)) {
			return plainIdentity{rule: r}, nil
		}
	}
	return nil, fmt.Errorf("SASL PLAIN: unknown key name %q or wrong key", c.Username)
}

// sameKey compares a presented key with a rule's in constant time, so the
// time a refusal takes tells nothing about how much of the key matched.
func sameKey(presented, key string) bool {
	return key != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(key)) == 1
}

// conn is the dialect's state of one connection.
type conn struct {
	h  *Handler
	ac *amqp.Conn

	mu     sync.Mutex
	claims map[string]claim // normalized entity path -> claim
	// claimsGen counts changes to claims (sendAuth).
	claimsGen atomic.Uint64
	replies   map[string]*replyLink // reply-to address -> the client's reply link
	// cbsLinks counts the $cbs links attached now, [0] the client's sender
	// (requests), [1] its receiver (replies): one of each at a time.
	cbsLinks [2]int
	// sessLinks are the session receivers by link name: a $management
	// request naming one as its associated-link-name (the Go SDK's session
	// peek) is about that link's session.
	sessLinks map[string]*recvLink
	// peerConns are the connections to peer nodes this connection's
	// forwarded links use, by address (under Handler.peers.mu).
	peerConns map[string]*peerConn
}

func (h *Handler) connOf(ac *amqp.Conn) *conn {
	if v, ok := h.conns.Load(ac); ok {
		return v.(*conn)
	}
	// Not opened through Open (cannot happen with the engine); make one so
	// that callers never see nil.
	v, _ := h.conns.LoadOrStore(ac, h.newConn(ac))
	return v.(*conn)
}

func (h *Handler) newConn(ac *amqp.Conn) *conn {
	c := &conn{h: h, ac: ac, claims: map[string]claim{}, replies: map[string]*replyLink{}, sessLinks: map[string]*recvLink{}, peerConns: map[string]*peerConn{}}
	if id, ok := ac.Identity().(plainIdentity); ok {
		c.claims[sas.NormalizePath(id.rule.Entity)] = claim{rights: id.rule.Rights.Implied()}
	}
	return c
}

// Open accepts the connection.
func (h *Handler) Open(ac *amqp.Conn) error {
	h.conns.Store(ac, h.newConn(ac))
	h.metrics.ConnectionOpened()
	return nil
}

// Begin accepts every session.
func (h *Handler) Begin(*amqp.Session) error { return nil }

// End ignores the end of a session: its links were detached first.
func (h *Handler) End(*amqp.Session, error) {}

// Stop closes the connections to peer nodes that forwarding opened.
func (h *Handler) Stop() {
	if h.peers != nil {
		h.peers.close()
	}
}

// Close forgets the connection.
func (h *Handler) Close(ac *amqp.Conn, _ error) {
	h.conns.Delete(ac)
	h.metrics.ConnectionClosed()
}

// AttachSender handles a client receiver: a reply link of $cbs or
// $management, or a receiver of messages from an entity.
func (h *Handler) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	c := h.connOf(s.Session().Conn())
	src := s.Remote().Source
	if src == nil || src.Address == "" {
		return nil, amqp.NewError(amqp.CondInvalidField, "attach of link %q has no source address", s.Name())
	}
	addr, err := ParseAddress(src.Address)
	if err != nil {
		return nil, amqp.NewError(amqp.CondNotFound, "%v", err)
	}
	if addr.Node != NodeCBS && h.forwards(addr.Entity) {
		if addr.Node == NodeManagement {
			return c.forwardReceiver(s, addr.Entity, addr.Path()+"/$management", true)
		}
		return c.forwardReceiver(s, addr.Entity, addr.Path(), false)
	}
	switch addr.Node {
	case NodeCBS, NodeManagement:
		return c.attachReply(s, addr)
	}
	return c.attachReceiver(s, addr)
}

// AttachReceiver handles a client sender: requests to $cbs or $management,
// or messages to an entity.
func (h *Handler) AttachReceiver(r *amqp.Receiver) (amqp.ReceiverHandler, error) {
	c := h.connOf(r.Session().Conn())
	tgt := r.Remote().Target
	if tgt == nil || tgt.Address == "" {
		return nil, amqp.NewError(amqp.CondInvalidField, "attach of link %q has no target address", r.Name())
	}
	addr, err := ParseAddress(tgt.Address)
	if err != nil {
		return nil, amqp.NewError(amqp.CondNotFound, "%v", err)
	}
	if addr.Node != NodeCBS && h.forwards(addr.Entity) {
		if addr.Node == NodeManagement {
			return c.forwardManagement(r, addr)
		}
		if addr.SubQueue != SubQueueNone {
			return nil, amqp.NewError(amqp.CondNotAllowed, "cannot send to the dead-letter sub-queue %q", addr.Path())
		}
		return c.forwardSender(r, addr.Entity, addr.Path(), sas.Send, nil)
	}
	switch addr.Node {
	case NodeCBS:
		return c.attachCBS(r)
	case NodeManagement:
		return c.attachManagement(r, addr)
	}
	return c.attachSender(r, addr)
}

// entityExists reports a missing queue, topic or subscription as
// broker.ErrNotFound; entity is an Address.Entity.
func (h *Handler) entityExists(ctx context.Context, entity string) error {
	p, err := broker.ParsePath(entity)
	if err != nil {
		return fmt.Errorf("%w: %v", broker.ErrNotFound, err)
	}
	if p.Subscription != "" {
		_, err = h.b.GetSubscription(ctx, p.Entity, p.Subscription)
		return err
	}
	if _, err = h.b.GetQueue(ctx, p.Entity); errors.Is(err, broker.ErrNotFound) {
		_, err = h.b.GetTopic(ctx, p.Entity)
	}
	return err
}
