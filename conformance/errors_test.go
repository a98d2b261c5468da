package conformance

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Errors a client sees: bad credentials and entities that do not exist.

var wrongKeyQueue = declareQueue("wrong-key", admin.QueueProperties{})

// TestWrongKey: a connection string with a wrong key fails sends and
// receives with CodeUnauthorizedAccess.
func TestWrongKey(t *testing.T) {
	t.Parallel()
	q := wrongKeyQueue.create(t)
	bad := replaceKey(suite.connStr, base64.StdEncoding.EncodeToString([]byte("not the key of this namespace!!")))
	c := newClientFor(t, bad)

	s := newSender(t, c, q)
	requireCode(t, s.SendMessage(ctxFor(t, opTimeout), textMessage("x"), nil), azservicebus.CodeUnauthorizedAccess)

	r := newQueueReceiver(t, c, q, nil)
	_, err := r.ReceiveMessages(ctxFor(t, opTimeout), 1, nil)
	requireCode(t, err, azservicebus.CodeUnauthorizedAccess)

	// Nothing was sent.
	requireEmpty(t, newQueueReceiver(t, newClient(t), q, nil), "the queue")
}

// TestUnknownEntity: send, receive, peek and accepting a session on an
// entity that does not exist fail with CodeNotFound.
func TestUnknownEntity(t *testing.T) {
	t.Parallel()
	harness(t)
	c := newClient(t)
	missing := entityName("does-not-exist")

	t.Run("send", func(t *testing.T) {
		err := newSender(t, c, missing).SendMessage(ctxFor(t, opTimeout), textMessage("x"), nil)
		requireCode(t, err, azservicebus.CodeNotFound)
		// In Service Bus's words, which the Java SDK needs to see the error
		// as final rather than retry it.
		if want := "The messaging entity '"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "could not be found") {
			t.Errorf("error %v, want it to say %s...' could not be found", err, want)
		}
	})
	t.Run("receive", func(t *testing.T) {
		_, err := newQueueReceiver(t, c, missing, nil).ReceiveMessages(ctxFor(t, opTimeout), 1, nil)
		requireCode(t, err, azservicebus.CodeNotFound)
	})
	t.Run("peek-subscription", func(t *testing.T) {
		_, err := newSubReceiver(t, c, missing, "sub", nil).PeekMessages(ctxFor(t, opTimeout), 1, nil)
		requireCode(t, err, azservicebus.CodeNotFound)
	})
	t.Run("accept-session", func(t *testing.T) {
		r, err := c.AcceptSessionForQueue(ctxFor(t, opTimeout), missing, "s", nil)
		if r != nil {
			t.Fatalf("accepted a session of a queue that does not exist")
		}
		requireCode(t, err, azservicebus.CodeNotFound)
	})
	t.Run("accept-next-session", func(t *testing.T) {
		r, err := c.AcceptNextSessionForQueue(ctxFor(t, opTimeout), missing, nil)
		if r != nil {
			t.Fatalf("accepted a session of a queue that does not exist")
		}
		requireCode(t, err, azservicebus.CodeNotFound)
	})
}
