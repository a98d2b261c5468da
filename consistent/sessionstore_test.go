package consistent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
		client := busbartest.NewClient(t, srv.ConnectionString())
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

// TestSessionStateDeltas: older versions are kept as deltas, so a large
// state that changes a little per input does not multiply the session
// state by the number of versions kept, and every kept version still loads
// exactly.
func TestSessionStateDeltas(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithQueue("q", broker.QueueProperties{RequiresSession: true}))
	client := busbartest.NewClient(t, srv.ConnectionString())
	r, err := client.AcceptSessionForQueue(ctx(t), "q", "g1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	key := consistent.Key{ID: "g1", Session: sessionOf{r}}
	store := consistent.SessionStateStore{Retention: consistent.Retention{MaxVersions: 16, MaxAge: -1}}
	blob := strings.Repeat("x", 10_000)
	state := func(n int) []byte {
		m := map[string]any{"blob": blob, "n": n, "gone": n == 1, "list": []int{n, n}}
		if n >= 10 { // a member that older versions lack
			m["late"] = true
		}
		b, _ := json.Marshal(m)
		return b
	}
	for n := 1; n <= 20; n++ {
		v := consistent.Version{Number: int64(n), MessageID: fmt.Sprintf("m%d", n), Context: []byte(`{"seed":1}`), State: state(n), Stored: epoch}
		if n > 1 { // version 1 has a member the others lack
			var m map[string]any
			_ = json.Unmarshal(v.State, &m)
			delete(m, "gone")
			v.State, _ = json.Marshal(m)
		}
		if err := store.Append(context.Background(), key, v); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := r.GetSessionState(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 14_000 {
		t.Fatalf("session state of 17 versions of a 10 kB state is %d bytes", len(raw))
	}
	for n := 4; n <= 20; n++ { // 5..20 kept, 4 as the base
		ld, err := store.Load(context.Background(), key, fmt.Sprintf("m%d", n))
		if err != nil || ld.Match == nil {
			t.Fatalf("m%d: %+v, %v", n, ld, err)
		}
		var got map[string]any
		members := 3
		if n >= 10 {
			members = 4
		}
		if err := json.Unmarshal(ld.Match.State, &got); err != nil || got["blob"] != blob || got["n"] != float64(n) ||
			len(got) != members || fmt.Sprint(got["list"]) != fmt.Sprintf("[%d %d]", n, n) || (n >= 10) != (got["late"] == true) {
			t.Fatalf("m%d: state %.80s…", n, ld.Match.State)
		}
	}
}
