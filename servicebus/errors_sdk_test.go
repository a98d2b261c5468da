package servicebus_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
)

// Each SDK call on a missing entity, or with a key that does not grant
// what it needs, raises the documented error code.
func TestSDKErrorCodes(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	root := e.client()

	t.Run("unknown entity", func(t *testing.T) {
		s, err := root.NewSender("nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); sbCode(err) != azservicebus.CodeNotFound {
			t.Fatalf("send to a missing queue: %v, want CodeNotFound", err)
		}
		r, err := root.NewReceiverForQueue("nope", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.PeekMessages(ctx, 1, nil); sbCode(err) != azservicebus.CodeNotFound {
			t.Fatalf("peek a missing queue: %v, want CodeNotFound", err)
		}
		if _, err := root.AcceptSessionForQueue(ctx, "nope", "s", nil); sbCode(err) != azservicebus.CodeNotFound {
			t.Fatalf("accept a session of a missing queue: %v, want CodeNotFound", err)
		}
	})

	t.Run("disabled entity", func(t *testing.T) {
		e.queue("off", broker.QueueProperties{})
		if err := e.b.UpdateQueue(context.Background(), "off", broker.QueueProperties{Status: broker.StatusSendDisabled}); err != nil {
			t.Fatal(err)
		}
		s, err := root.NewSender("off", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != "com.microsoft:entity-disabled" {
			t.Fatalf("send to a send-disabled queue: %v, want com.microsoft:entity-disabled", err)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		bad := e.clientWith(rootKeyName, "not-the-key")
		s, err := bad.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); sbCode(err) != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("send with a wrong key: %v, want CodeUnauthorizedAccess", err)
		}
	})

	t.Run("listen-only key cannot send", func(t *testing.T) {
		lc := e.clientWith(listenName, listenKey)
		s, err := lc.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
		if sbCode(err) != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("send with a listen-only key: %v, want unauthorized", err)
		}
		if !strings.Contains(errString(err), "'Send' claim(s) are required") {
			t.Fatalf("description of %v does not name the Send claim", err)
		}
		// Listening is fine.
		r, err := lc.NewReceiverForQueue("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
			t.Fatalf("peek with a listen key: %v", err)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
