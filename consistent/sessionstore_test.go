package consistent_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistenttest"
)

// TestSessionStateStoreSuite runs the store suite with real sessions of a
// busbartest broker: every stream is the state of the session named by its
// business id.
func TestSessionStateStoreSuite(t *testing.T) {
	consistenttest.Run(t, func(t *testing.T, r consistent.Retention) consistenttest.Harness {
		srv := busbartest.Start(t, busbartest.WithQueue("q", broker.QueueProperties{RequiresSession: true}))
		client := newClient(t, srv.ConnectionString())
		sessions := map[string]*azservicebus.SessionReceiver{}
		return consistenttest.Harness{
			Store:      consistent.SessionStateStore{Retention: r},
			Serialised: true,
			Key: func(id string) consistent.Key {
				s, ok := sessions[id]
				if !ok {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					var err error
					if s, err = client.AcceptSessionForQueue(ctx, "q", id, nil); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = s.Close(context.Background()) })
					sessions[id] = s
				}
				return consistent.Key{ID: id, Session: sessionOf{s}}
			},
		}
	})
}

// sessionOf adapts an SDK session receiver to consistent.Session.
type sessionOf struct{ r *azservicebus.SessionReceiver }

func (s sessionOf) ID() string { return s.r.SessionID() }
func (s sessionOf) State(ctx context.Context) ([]byte, error) {
	return s.r.GetSessionState(ctx, nil)
}
func (s sessionOf) SetState(ctx context.Context, b []byte) error {
	return s.r.SetSessionState(ctx, b, nil)
}

func newClient(t testing.TB, connStr string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
