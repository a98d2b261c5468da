package broker

import (
	"errors"
	"fmt"
)

// The errors the broker returns, always wrapped with a description a person
// can act on. Test them with errors.Is.
var (
	// ErrNotFound: the entity (queue, topic, subscription, rule) does not exist.
	ErrNotFound = errors.New("entity not found")
	// ErrAlreadyExists: an entity or rule of that name exists.
	ErrAlreadyExists = errors.New("entity already exists")
	// ErrLockLost: the message lock token is unknown or has expired.
	ErrLockLost = errors.New("message lock lost")
	// ErrSessionLockLost: the session lock is not held or has expired.
	ErrSessionLockLost = errors.New("session lock lost")
	// ErrSessionCannotBeLocked: the session is locked by another receiver.
	ErrSessionCannotBeLocked = errors.New("session cannot be locked")
	// ErrQuotaExceeded: the entity is full (MaxSizeInMegabytes) or a
	// count limit was reached.
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrMessageSizeExceeded: a message, or session state, is larger than
	// the entity allows.
	ErrMessageSizeExceeded = errors.New("message size exceeded")
	// ErrEntityDisabled: the entity's status forbids the operation.
	ErrEntityDisabled = errors.New("entity disabled")
	// ErrInvalidArgument: a malformed name, property, message or request.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrSessionRequired: a session-enabled entity received a message
	// without a session id, or a non-session receiver was requested on it.
	ErrSessionRequired = errors.New("session required")
	// ErrTimeout: no session became available in time.
	ErrTimeout = errors.New("operation timed out")
	// ErrMessageNotFound: no message with that sequence number.
	ErrMessageNotFound = errors.New("message not found")
	// ErrNotOwned: the entity is served by another node of a cluster (or
	// is moving between nodes); retry, through the node that owns it.
	ErrNotOwned = errors.New("entity not owned by this node")
	// ErrClosed: the broker or the consumer is closed.
	ErrClosed = errors.New("closed")
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
