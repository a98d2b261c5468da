package conformance

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

var emptySessionQueue = sessionQueue("emptysess", admin.QueueProperties{})

// TestEmptySessionID: "" is a session id like any other for the SDKs. A
// message sent with SessionID "" to a session-enabled queue is accepted
// (one without a SessionID is not), belongs to session "", comes back with
// SessionID "" (not nil), and is found both by accepting session "" and by
// accepting the next session.
func TestEmptySessionID(t *testing.T) {
	t.Parallel()
	q := emptySessionQueue.create(t)
	c := newClient(t)
	s := newSender(t, c, q)
	send(t, s, sessionMessage("", "first"), sessionMessage("", "second"))
	if err := s.SendMessage(ctxFor(t, opTimeout), textMessage("no session"), nil); err == nil {
		t.Fatalf("a message without SessionID was accepted by a session-enabled queue")
	}

	r := acceptSession(t, c, q, "")
	if r.SessionID() != "" {
		t.Fatalf("accepted session %q, want \"\"", r.SessionID())
	}
	m := receiveOne(t, r)
	if string(m.Body) != "first" || m.SessionID == nil || *m.SessionID != "" {
		t.Fatalf("received %q with SessionID %v, want %q in session \"\"", m.Body, m.SessionID, "first")
	}
	complete(t, r, m)
	if err := r.Close(ctxFor(t, opTimeout)); err != nil {
		t.Fatalf("closing the session receiver: %v", err)
	}

	next, err := c.AcceptNextSessionForQueue(ctxFor(t, opTimeout), q, nil)
	if err != nil {
		t.Fatalf("AcceptNextSessionForQueue: %v", err)
	}
	t.Cleanup(func() { _ = next.Close(ctxFor(t, opTimeout)) })
	if next.SessionID() != "" {
		t.Fatalf("next session %q, want \"\"", next.SessionID())
	}
	m = receiveOne(t, next)
	if string(m.Body) != "second" || m.SessionID == nil || *m.SessionID != "" {
		t.Fatalf("received %q with SessionID %v, want %q in session \"\"", m.Body, m.SessionID, "second")
	}
	complete(t, next, m)
}
