package amqp

import (
	"errors"
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// Error conditions of the AMQP 1.0 specification (transport §2.8.15-2.8.18)
// that this package sends or that applications commonly return.
const (
	CondInternalError         encoding.Symbol = "amqp:internal-error"
	CondNotFound              encoding.Symbol = "amqp:not-found"
	CondUnauthorizedAccess    encoding.Symbol = "amqp:unauthorized-access"
	CondDecodeError           encoding.Symbol = "amqp:decode-error"
	CondResourceLimitExceeded encoding.Symbol = "amqp:resource-limit-exceeded"
	CondNotAllowed            encoding.Symbol = "amqp:not-allowed"
	CondInvalidField          encoding.Symbol = "amqp:invalid-field"
	CondNotImplemented        encoding.Symbol = "amqp:not-implemented"
	CondResourceLocked        encoding.Symbol = "amqp:resource-locked"
	CondPreconditionFailed    encoding.Symbol = "amqp:precondition-failed"
	CondResourceDeleted       encoding.Symbol = "amqp:resource-deleted"
	CondIllegalState          encoding.Symbol = "amqp:illegal-state"
	CondFrameSizeTooSmall     encoding.Symbol = "amqp:frame-size-too-small"

	CondConnectionForced = encoding.Symbol("amqp:connection:forced")
	CondFramingError     = encoding.Symbol("amqp:connection:framing-error")
	CondConnRedirect     = encoding.Symbol("amqp:connection:redirect")

	CondWindowViolation  = encoding.Symbol("amqp:session:window-violation")
	CondErrantLink       = encoding.Symbol("amqp:session:errant-link")
	CondHandleInUse      = encoding.Symbol("amqp:session:handle-in-use")
	CondUnattachedHandle = encoding.Symbol("amqp:session:unattached-handle")

	CondDetachForced          = encoding.Symbol("amqp:link:detach-forced")
	CondTransferLimitExceeded = encoding.Symbol("amqp:link:transfer-limit-exceeded")
	CondMessageSizeExceeded   = encoding.Symbol("amqp:link:message-size-exceeded")
	CondLinkRedirect          = encoding.Symbol("amqp:link:redirect")
	CondStolen                = encoding.Symbol("amqp:link:stolen")
)

// Errors returned by the engine's methods.
var (
	// ErrNoCredit is returned by Sender.TrySend when the peer has granted no
	// link credit.
	ErrNoCredit = errors.New("amqp: no link credit")
	// ErrLinkClosed is returned when the link was detached (by either side)
	// or its session or connection ended.
	ErrLinkClosed = errors.New("amqp: link detached")
	// ErrUnknownDelivery is returned by Receiver.Settle for a delivery that is
	// not unsettled on this link (already settled, pre-settled, or never seen).
	ErrUnknownDelivery = errors.New("amqp: unknown or already settled delivery")
	// ErrServerClosed is returned by Server.Serve after Server.Close.
	ErrServerClosed = errors.New("amqp: server closed")
)

// NewError returns an AMQP error with a condition and a formatted
// description, for returning from Handler callbacks or passing to
// Close/End/Detach.
func NewError(cond encoding.Symbol, format string, args ...any) *frames.Error {
	return &frames.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}
}

// asAMQPError turns an application error into the error sent to the peer:
// an *frames.Error (found with errors.As) is sent as it is; anything else is
// amqp:internal-error with the error's text.
func asAMQPError(err error) *frames.Error {
	if err == nil {
		return nil
	}
	var fe *frames.Error
	if errors.As(err, &fe) {
		return fe
	}
	return &frames.Error{Condition: CondInternalError, Description: err.Error()}
}

// PeerError is the error reported to the application when the peer closed a
// connection, ended a session or detached a link with an error.
type PeerError struct {
	// Err is the error the peer sent.
	Err *frames.Error
}

// Error implements error.
func (e *PeerError) Error() string { return "amqp: peer error: " + e.Err.Error() }

// Unwrap returns the peer's AMQP error.
func (e *PeerError) Unwrap() error { return e.Err }

// peerErr wraps a peer-sent error, or returns nil when there is none.
func peerErr(e *frames.Error) error {
	if e == nil {
		return nil
	}
	return &PeerError{Err: e}
}
