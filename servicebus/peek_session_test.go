package servicebus_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
)

// TestSessionReceiverPeeksItsSession: the Go SDK's session receiver peeks
// naming its link (associated-link-name), not the session: the peek must
// still show that session's messages only, as Service Bus does.
func TestSessionReceiverPeeksItsSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("sq", broker.QueueProperties{RequiresSession: true})
	c := e.client()
	ctx := testCtx(t)
	mustSend(t, c, "sq",
		&azservicebus.Message{Body: []byte("a1"), SessionID: ptr("a")},
		&azservicebus.Message{Body: []byte("b1"), SessionID: ptr("b")},
		&azservicebus.Message{Body: []byte("a2"), SessionID: ptr("a")},
		&azservicebus.Message{Body: []byte("b2"), SessionID: ptr("b")},
	)
	for _, id := range []string{"a", "b"} {
		s, err := c.AcceptSessionForQueue(ctx, "sq", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := s.PeekMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 || string(ms[0].Body) != id+"1" || string(ms[1].Body) != id+"2" {
			var got []string
			for _, m := range ms {
				got = append(got, string(m.Body))
			}
			t.Fatalf("session %s peeked %q, want its two messages", id, got)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
