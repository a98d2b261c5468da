package servicebus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

// A released message is not a failed delivery: released more often than
// the queue's MaxDeliveryCount, it is redelivered at once on the link's
// remaining credit, every time with delivery-count 0 in its header.
func TestReleasedIsNotCounted(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{MaxDeliveryCount: 2})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("1")})
	for i := range 5 {
		m, err := r.Receive(ctx, nil)
		if err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
		if m.Header == nil || m.Header.DeliveryCount != 0 || string(m.GetData()) != "1" {
			t.Fatalf("delivery %d: header %+v body %q, want delivery-count 0 and body 1", i+1, m.Header, m.GetData())
		}
		if err := r.ReleaseMessage(ctx, m); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
}

// rootSession opens a go-amqp connection with the root key (SASL PLAIN),
// closed when the test ends, and a session on it.
func rootSession(t *testing.T, ctx context.Context, e *env) *goamqp.Session {
	t.Helper()
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(rootKeyName, rootKey)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// heldDeletes is a memstore whose commits that delete something (a
// completion) wait until release is closed.
type heldDeletes struct {
	*memstore.Store
	held    chan struct{} // receives once per commit that waits
	release chan struct{}
}

func (s *heldDeletes) Commit(ctx context.Context, b *store.Batch) error {
	for _, op := range b.Ops {
		if op.Kind == store.OpDelete {
			s.held <- struct{}{}
			<-s.release
			break
		}
	}
	return s.Store.Commit(ctx, b)
}

// A release writes nothing, so its answer does not wait for the commit of
// a completion the client sent on the same link before it. The Go SDK
// depends on it: its next ReceiveMessages waits for the releases of what
// reached the link between two calls, while its completions are in flight.
func TestReleaseIsAnsweredWhileACompletionWaitsForItsCommit(t *testing.T) {
	st := &heldDeletes{Store: memstore.New(), held: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, envOptions{store: st})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(), Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustSend(t, e.client(), "q", &azservicebus.Message{Body: []byte("a")}, &azservicebus.Message{Body: []byte("b")})
	if err := r.IssueCredit(2); err != nil {
		t.Fatal(err)
	}
	a, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var unhold sync.Once
	defer unhold.Do(func() { close(st.release) }) // on failure too
	completed := make(chan error, 1)
	go func() { completed <- r.AcceptMessage(ctx, a) }()
	<-st.held // the completion's commit has started and waits
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.ReleaseMessage(rctx, b); err != nil {
		t.Fatalf("release while a completion waits for its commit: %v", err)
	}
	select {
	case err := <-completed:
		t.Fatalf("the completion was answered before its commit: %v", err)
	default:
	}
	unhold.Do(func() { close(st.release) })
	if err := <-completed; err != nil {
		t.Fatalf("complete: %v", err)
	}
}
