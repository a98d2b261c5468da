package amqp

import (
	"github.com/busbar-io/busbar/amqp/frames"
)

// Handler is the application's side of every connection: it accepts or
// refuses connections, sessions and links, and is told when they end.
//
// The engine calls these methods on the connection's reader goroutine, one at
// a time per connection, without holding any engine lock, so they may call
// any method of this package. They must not block waiting for the peer (the
// peer's frames are read on that same goroutine); blocking on the
// application's own resources only slows this connection down.
//
// Errors returned to refuse something are sent to the peer: a *frames.Error
// (see NewError) as it is, any other error as amqp:internal-error.
type Handler interface {
	// Open is called when the peer's open arrives, after SASL. c.Identity
	// holds what the Authenticator returned and c.RemoteOpen what the peer
	// sent; c.Reply may be edited (properties, capabilities) before
	// returning. A non-nil error refuses the connection: the engine answers
	// with open then close carrying the error.
	Open(c *Conn) error
	// Begin is called for each session the peer begins; s.Reply may be
	// edited. A non-nil error ends the session with that error.
	Begin(s *Session) error
	// AttachSender is called when the peer attaches a link as receiver, so
	// that this end is the sender. s.Remote is the peer's attach and s.Reply
	// the reply to be sent, pre-filled by echoing the peer's source, target
	// and settle modes; edit it to set source, target, properties or
	// max-message-size. The returned handler receives the link's events. A
	// non-nil error refuses the link: the reply carries a null source and is
	// followed by a detach with the error.
	AttachSender(s *Sender) (SenderHandler, error)
	// AttachReceiver is the same for a peer attaching as sender: this end
	// receives. r.SetCreditWindow chooses between automatic credit (the
	// default, Config.LinkCredit) and credit the application issues with
	// r.AddCredit. A refused link's reply carries a null target.
	AttachReceiver(r *Receiver) (ReceiverHandler, error)
	// End is called once when a session that Begin accepted has ended, for
	// whatever reason, after the Detach of each of its links. err is nil
	// for a clean end, a *PeerError when the peer sent an error, and the
	// engine's own error otherwise.
	End(s *Session, err error)
	// Close is called once when a connection that Open accepted has closed,
	// after the End of each of its sessions. err is as for End; a peer that
	// vanished gives the I/O error.
	Close(c *Conn, err error)
}

// ReceiverHandler receives the events of a link on which the peer sends.
type ReceiverHandler interface {
	// Transfer is called once for each complete, unaborted delivery. The
	// delivery's Payload and Tag alias engine buffers that are reused after
	// Transfer returns: copy them to keep them. Settle the delivery (unless
	// the peer pre-settled it) with d.Settle or r.Settle, now or later, from
	// any goroutine.
	Transfer(r *Receiver, d Delivery)
	// Detach is called once when the link has ended, for whatever reason.
	// Deliveries still unsettled can no longer be settled. err is as for
	// Handler.End.
	Detach(r *Receiver, err error)
}

// SenderHandler receives the events of a link on which this end sends.
type SenderHandler interface {
	// Flow is called when the peer changes the link's credit or asks for a
	// drain. When f.Drain is set the handler should send what it has
	// available and then call s.CompleteDrain, now or later, from any
	// goroutine; the engine completes the drain by itself if the credit runs
	// out first.
	Flow(s *Sender, f Flow)
	// Outcome reports a change of state of an unsettled delivery this end
	// sent: the peer's outcome, its settlement, or the loss of the delivery
	// when the link ends first. It is called at most once with Settled or
	// Lost set per delivery.
	Outcome(s *Sender, o Outcome)
	// Detach is called once when the link has ended, for whatever reason,
	// after the Lost outcome of each delivery still unsettled. err is as for
	// Handler.End.
	Detach(s *Sender, err error)
}

// Delivery is one message received on a link.
type Delivery struct {
	// ID is the delivery-id, unique among the session's unsettled deliveries.
	ID uint32
	// Tag is the delivery-tag the peer chose. It aliases an engine buffer
	// that is valid only during the Transfer call.
	Tag []byte
	// Format is the message-format (0 for a standard AMQP message).
	Format uint32
	// Settled is true when the peer sent the delivery pre-settled; it then
	// needs, and accepts, no settlement.
	Settled bool
	// State is the delivery state the peer sent with the transfer, if any.
	State frames.DeliveryState
	// Payload is the message's encoded bytes. It aliases an engine buffer
	// that is valid only during the Transfer call.
	Payload []byte

	r        *Receiver
	oversize *frames.Error // set when the engine rejects it (SetRejectOversize)
}

// Settle settles the delivery with an outcome (see Receiver.Settle).
func (d Delivery) Settle(state frames.DeliveryState) error { return d.r.Settle(d.ID, state) }

// Message is one delivery to send on a Sender.
type Message struct {
	// Tag is the delivery-tag (at most 32 bytes). The engine keeps a
	// reference to it, without copying, until the delivery's outcome is
	// reported; do not modify it before then.
	Tag []byte
	// Format is the message-format; 0 for a standard AMQP message.
	Format uint32
	// Settled sends the delivery pre-settled. The link's sender settle mode
	// overrides it: always settled for mode "settled", never for "unsettled".
	Settled bool
	// Payload is the message's encoded bytes. The engine copies what it
	// cannot write at once, so the caller may reuse it when the call returns.
	Payload []byte
}

// Outcome is the state of a delivery sent on a Sender, as reported to
// SenderHandler.Outcome.
type Outcome struct {
	// ID is the delivery-id TrySend or Send returned.
	ID uint32
	// Tag is the Message's Tag.
	Tag []byte
	// State is the peer's delivery state, nil when it sent none (or when
	// Lost).
	State frames.DeliveryState
	// Settled reports that the delivery is settled: the peer settled it, or
	// the engine settled it on receiving a terminal outcome (receiver settle
	// mode second) for a link that does not settle manually (see
	// Sender.SetManualSettlement, whose outcomes arrive unsettled).
	Settled bool
	// Lost reports that the link, session or connection ended while the
	// delivery was unsettled: its fate at the peer is unknown.
	Lost bool
}

// Flow is a change of link credit reported to SenderHandler.Flow.
type Flow struct {
	// Credit is the number of deliveries that may now be sent.
	Credit uint32
	// Drain is set when the peer asked to drain: use or give up the credit.
	Drain bool
	// Available is the peer's available field (usually 0 for receivers).
	Available uint32
}

// BaseHandler implements Handler's connection and session callbacks by
// accepting every connection and session and ignoring their ends. Embed it
// and add AttachSender and AttachReceiver to implement Handler.
type BaseHandler struct{}

// Open accepts the connection.
func (BaseHandler) Open(*Conn) error { return nil }

// Begin accepts the session.
func (BaseHandler) Begin(*Session) error { return nil }

// End ignores the end of a session.
func (BaseHandler) End(*Session, error) {}

// Close ignores the end of a connection.
func (BaseHandler) Close(*Conn, error) {}
