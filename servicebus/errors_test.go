package servicebus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/broker"
)

func TestMapError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		cond   encoding.Symbol
		status int32
	}{
		{broker.ErrNotFound, "amqp:not-found", 404},
		{broker.ErrMessageNotFound, "com.microsoft:message-not-found", 404},
		{broker.ErrLockLost, "com.microsoft:message-lock-lost", 410},
		{broker.ErrSessionLockLost, "com.microsoft:session-lock-lost", 410},
		{broker.ErrSessionCannotBeLocked, "com.microsoft:session-cannot-be-locked", 410},
		{broker.ErrTimeout, "com.microsoft:timeout", 408},
		{broker.ErrQuotaExceeded, "amqp:resource-limit-exceeded", 403},
		{broker.ErrMessageSizeExceeded, "amqp:link:message-size-exceeded", 403},
		{broker.ErrEntityDisabled, "com.microsoft:entity-disabled", 400},
		{broker.ErrInvalidArgument, "com.microsoft:argument-error", 400},
		{broker.ErrSessionRequired, "amqp:not-allowed", 400},
		{broker.ErrAlreadyExists, "com.microsoft:entity-already-exists", 409},
		{unauthorized("Send"), "amqp:unauthorized-access", 401},
		{errors.New("disk on fire"), "amqp:internal-error", 500},
		{amqp.NewError(amqp.CondNotAllowed, "no"), "amqp:not-allowed", 400},
		{amqp.NewError(amqp.CondDecodeError, "bad"), "amqp:decode-error", 400},
	} {
		// Broker errors arrive wrapped with a description.
		err := fmt.Errorf("%w: details", tc.err)
		m := mapError(err)
		if m.cond != tc.cond || m.status != tc.status || m.desc == "" {
			t.Errorf("%v: got %s %d %q, want %s %d", tc.err, m.cond, m.status, m.desc, tc.cond, tc.status)
		}
	}
	if d := mapError(fmt.Errorf("%w: token x", broker.ErrLockLost)).desc; d != descLockLost {
		t.Errorf("lock lost description %q", d)
	}
	if d := mapError(unauthorized("Listen")).desc; d != "Unauthorized access. 'Listen' claim(s) are required to perform this operation" {
		t.Errorf("unauthorized description %q", d)
	}
}
