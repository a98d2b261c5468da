package saga_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

var epoch = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// orchestration starts a broker with the article's topology: topic
// orchestration, session subscription orchestrator with one rule per
// message type.
func orchestration(t testing.TB, opts ...busbartest.Option) *busbartest.Server {
	t.Helper()
	rule := func(typ string) broker.RuleProperties {
		return broker.RuleProperties{Name: typ, Filter: broker.RuleFilter{Kind: broker.FilterCorrelation,
			Correlation: broker.CorrelationFilter{Properties: map[string]any{"MessageType": typ}}}}
	}
	all := append([]busbartest.Option{
		busbartest.WithFakeClock(epoch),
		busbartest.WithTopic("orchestration", broker.TopicProperties{}),
		busbartest.WithSubscription("orchestration", "orchestrator", broker.SubscriptionProperties{RequiresSession: true},
			rule("ItemShipped"), rule("PaymentAccepted"), rule("Timeout")),
	}, opts...)
	return busbartest.Start(t, all...)
}

func typed(typ, sessionID, messageID string) *azservicebus.Message {
	return &azservicebus.Message{MessageID: &messageID, SessionID: &sessionID, Body: []byte(typ),
		ApplicationProperties: map[string]any{"MessageType": typ}}
}

func publish(t testing.TB, c *azservicebus.Client, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender("orchestration", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// Order is the article's saga state.
type Order struct {
	PaymentReceived bool
	ItemShipped     bool
	Retries         int
}

var errMissing = errors.New("a message never arrived")

// recorder records what the saga's handlers and logs show.
type recorder struct {
	mu          sync.Mutex
	handled     map[string]int // message id -> handler calls
	completed   map[string]int // saga id -> completions asked
	compensated map[string][]error
	logs        []string // "saga_id msg"
	attrs       []slog.Attr
	shared      *recorder
}

func newRecorder() *recorder {
	r := &recorder{handled: map[string]int{}, completed: map[string]int{}, compensated: map[string][]error{}}
	r.shared = r
	return r
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	id := ""
	for _, a := range r.attrs {
		if a.Key == "saga_id" {
			id = a.Value.String()
		}
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "saga_id" {
			id = a.Value.String()
		}
		return true
	})
	s := r.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = append(s.logs, id+" "+rec.Message)
	return nil
}
func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{shared: r.shared, attrs: append(slices.Clone(r.attrs), as...)}
}
func (r *recorder) WithGroup(string) slog.Handler { return r }

// events returns the logged transitions of saga id, in order.
func (r *recorder) events(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.logs {
		if len(l) > len(id) && l[:len(id)+1] == id+" " {
			out = append(out, l[len(id)+1:])
		}
	}
	return out
}

func (r *recorder) count(id, event string) int {
	n := 0
	for _, e := range r.events(id) {
		if e == event {
			n++
		}
	}
	return n
}

// orderSaga declares the article's saga: PaymentAccepted and ItemShipped in
// any order; while one is missing, a 5-second timeout, at most three; then
// compensation.
func orderSaga(rec *recorder, now func() time.Time, cfg saga.Config) *saga.Saga[Order] {
	cfg.Name = "order"
	cfg.TypeProperty = "MessageType"
	cfg.Logger = slog.New(rec)
	cfg.Now = now
	sg := saga.New[Order](cfg)
	check := func(c *saga.Context[Order]) error {
		if c.State.PaymentReceived && c.State.ItemShipped {
			rec.mu.Lock()
			rec.completed[c.ID()]++
			rec.mu.Unlock()
			c.Complete()
			return nil
		}
		if len(c.PendingTimeouts()) > 0 {
			return nil
		}
		if c.State.Retries >= 3 {
			c.Compensate(errMissing)
			return nil
		}
		c.State.Retries++
		_, err := c.RequestTimeout(5*time.Second, map[string]int{"retry": c.State.Retries})
		return err
	}
	count := func(m *azservicebus.ReceivedMessage) {
		rec.mu.Lock()
		rec.handled[m.MessageID]++
		rec.mu.Unlock()
	}
	sg.Starts("PaymentAccepted", func(c *saga.Context[Order], m *azservicebus.ReceivedMessage) error {
		count(m)
		c.State.PaymentReceived = true
		return check(c)
	})
	sg.Starts("ItemShipped", func(c *saga.Context[Order], m *azservicebus.ReceivedMessage) error {
		count(m)
		c.State.ItemShipped = true
		return check(c)
	})
	sg.OnTimeout(func(c *saga.Context[Order], to saga.Timeout) error {
		count(c.Message())
		return check(c)
	})
	sg.OnCompensate(func(c *saga.Context[Order], cause error) error {
		rec.mu.Lock()
		rec.compensated[c.ID()] = append(rec.compensated[c.ID()], cause)
		rec.mu.Unlock()
		return nil
	})
	return sg
}

// hostHandle is a saga host started by host.
type hostHandle struct {
	stop func()       // graceful
	kill func()       // cancels the handlers at once
	open atomic.Int32 // sessions held
}

// quiesce waits until the host holds no session, so that moving the fake
// clock far cannot expire a lock it holds.
func (h *hostHandle) quiesce(t testing.TB) {
	t.Helper()
	eventually(t, "the host to release its sessions", func() bool { return h.open.Load() == 0 })
}

// host runs a saga's processor on the orchestrator subscription until the
// test ends (or its stop is called).
func host[S any](t testing.TB, c *azservicebus.Client, sg *saga.Saga[S], o *processor.SessionOptions) *hostHandle {
	t.Helper()
	if o == nil {
		o = &processor.SessionOptions{MaxConcurrentSessions: 4, SessionIdleTimeout: 50 * time.Millisecond}
	}
	h := &hostHandle{}
	o.OnSessionOpen = func(context.Context, *processor.Session) { h.open.Add(1) }
	o.OnSessionClose = func(context.Context, *processor.Session) { h.open.Add(-1) }
	p, err := sg.NewProcessor(c, processor.Subscription("orchestration", "orchestrator"), o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(context.Background()) }()
	var once sync.Once
	closeWithin := func(d time.Duration) {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_ = p.Close(ctx)
			<-done
		})
	}
	h.stop = func() { closeWithin(20 * time.Second) }
	h.kill = func() { closeWithin(0) }
	t.Cleanup(h.stop)
	return h
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// within polls cond until it holds, failing the test after d.
func within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// sessionState reads a session's state once no host holds it, on a
// client of its own.
func sessionState(t testing.TB, srv *busbartest.Server, id string) []byte {
	t.Helper()
	c := busbartest.NewClient(t, srv.ConnectionString())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.AcceptSessionForSubscription(ctx, "orchestration", "orchestrator", id, nil)
	if err != nil {
		t.Fatalf("accepting session %s: %v", id, err)
	}
	defer r.Close(ctx)
	st, err := r.GetSessionState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// plainHTTP sends the admin client's requests over plain HTTP, as
// busbartest serves them.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(r)
}

// counts returns the subscription's message counts (TotalMessageCount
// includes scheduled messages).
func counts(t testing.TB, srv *busbartest.Server) admin.SubscriptionRuntimeProperties {
	t.Helper()
	ac, err := admin.NewClientFromConnectionString(srv.AdminConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := ac.GetSubscriptionRuntimeProperties(ctx, "orchestration", "orchestrator", nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.SubscriptionRuntimeProperties
}
