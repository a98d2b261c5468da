package servicebus

import (
	"errors"
	"fmt"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/broker"
)

// Service Bus error conditions, beyond the AMQP ones in package amqp.
const (
	condMessageLockLost     encoding.Symbol = "com.microsoft:message-lock-lost"
	condSessionLockLost     encoding.Symbol = "com.microsoft:session-lock-lost"
	condSessionCannotLock   encoding.Symbol = "com.microsoft:session-cannot-be-locked"
	condTimeout             encoding.Symbol = "com.microsoft:timeout"
	condEntityDisabled      encoding.Symbol = "com.microsoft:entity-disabled"
	condArgumentError       encoding.Symbol = "com.microsoft:argument-error"
	condEntityAlreadyExists encoding.Symbol = "com.microsoft:entity-already-exists"
	condMessageNotFound     encoding.Symbol = "com.microsoft:message-not-found"
	condDeadLetter          encoding.Symbol = "com.microsoft:dead-letter"
)

// errUnauthorized marks a missing or insufficient claim.
var errUnauthorized = errors.New("unauthorized")

// Descriptions Service Bus itself uses, which clients and people recognise.
const (
	descLockLost        = "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue."
	descSessionLockLost = "The session lock has expired on the MessageSession. Accept a new MessageSession."
	descSessionRequired = "It is not possible for an entity that requires sessions to create a non-sessionful message receiver."
)

// mapped is a broker error as a client sees it: an AMQP condition for links
// and a status code for request/response operations.
type mapped struct {
	cond   encoding.Symbol
	status int32
	desc   string
}

// errorTable pairs each broker sentinel with its condition and status code,
// chosen so that every SDK raises its documented error code (see
// reference/azsb-protocol.md §3.4).
var errorTable = []struct {
	err    error
	cond   encoding.Symbol
	status int32
	desc   string // replaces the broker's description when set
}{
	{broker.ErrNotFound, amqp.CondNotFound, 404, ""},
	{broker.ErrMessageNotFound, condMessageNotFound, 404, ""},
	{broker.ErrLockLost, condMessageLockLost, 410, descLockLost},
	{broker.ErrSessionLockLost, condSessionLockLost, 410, descSessionLockLost},
	{broker.ErrSessionCannotBeLocked, condSessionCannotLock, 410, ""},
	{broker.ErrTimeout, condTimeout, 408, ""},
	{broker.ErrQuotaExceeded, amqp.CondResourceLimitExceeded, 403, ""},
	{broker.ErrMessageSizeExceeded, amqp.CondMessageSizeExceeded, 403, ""},
	{broker.ErrEntityDisabled, condEntityDisabled, 400, ""},
	{broker.ErrInvalidArgument, condArgumentError, 400, ""},
	{broker.ErrSessionRequired, amqp.CondNotAllowed, 400, ""},
	{broker.ErrAlreadyExists, condEntityAlreadyExists, 409, ""},
	{errUnauthorized, amqp.CondUnauthorizedAccess, 401, ""},
	// A cluster node that does not own the entity (any more): the SDKs
	// reset their connection and retry, reaching the owner.
	{broker.ErrNotOwned, amqp.CondConnectionForced, 503, ""},
}

// mapError returns the condition, status code and description of err.
// Errors the table does not know are internal errors (500).
func mapError(err error) mapped {
	var fe *frames.Error
	if errors.As(err, &fe) {
		return mapped{fe.Condition, statusOfCondition(fe.Condition), fe.Description}
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			d := e.desc
			if d == "" {
				d = err.Error()
			}
			return mapped{e.cond, e.status, d}
		}
	}
	return mapped{amqp.CondInternalError, 500, err.Error()}
}

// statusOfCondition is the status code a request/response operation reports
// for an AMQP condition.
func statusOfCondition(c encoding.Symbol) int32 {
	for _, e := range errorTable {
		if e.cond == c {
			return e.status
		}
	}
	if c == amqp.CondDecodeError || c == amqp.CondInvalidField {
		return 400
	}
	return 500
}

// amqpError converts err to the AMQP error sent on a link.
func amqpError(err error) *frames.Error {
	m := mapError(err)
	return &frames.Error{Condition: m.cond, Description: m.desc}
}

// unauthorized is the error for an operation that lacks a claim, worded as
// Service Bus words it.
func unauthorized(right string) error { return authError{right} }

// authError is a missing claim; it matches errUnauthorized.
type authError struct{ right string }

func (e authError) Error() string {
	return "Unauthorized access. '" + e.right + "' claim(s) are required to perform this operation"
}

func (authError) Is(target error) bool { return target == errUnauthorized }

// badRequest is a malformed request or message: argument-error, 400.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{broker.ErrInvalidArgument}, args...)...)
}
