package servicebus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/servicebus"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

const (
	rootKeyName = "RootManageSharedAccessKey"
	rootKey     = "root-secret"
	listenName  = "listen-only"
	listenKey   = "listen-secret"
)

// env is a broker on a memstore served by the Service Bus handler on a
// loopback port.
type env struct {
	t    testing.TB
	b    *broker.Broker
	h    *servicebus.Handler
	addr string
	clk  clock.Clock
}

type envOptions struct {
	clock   clock.Clock
	metrics servicebus.Metrics
	store   store.Store // default memstore
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.clock == nil {
		o.clock = clock.Real()
	}
	if o.store == nil {
		o.store = memstore.New()
	}
	b, err := broker.Open(context.Background(), o.store, broker.Options{Clock: o.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	auth, err := sas.NewAuthorizer([]sas.Rule{
		{KeyName: rootKeyName, PrimaryKey: rootKey, Rights: sas.Manage | sas.Send | sas.Listen},
		{KeyName: listenName, PrimaryKey: listenKey, Rights: sas.Listen},
	})
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if os.Getenv("BUSBAR_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := servicebus.NewHandler(servicebus.Options{Broker: b, Authorizer: auth, Clock: o.clock, Logger: logger, Metrics: o.metrics})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := amqp.Config{Handler: h, Authenticate: h.Authenticate}
	cfg.Logger = logger
	srv := amqp.NewServer(cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		if err := <-served; !errors.Is(err, amqp.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return &env{t: t, b: b, h: h, addr: l.Addr().String(), clk: o.clock}
}

// connString is an emulator connection string for a key.
func (e *env) connString(keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", e.addr, keyName, key)
}

// client connects the official SDK with the root key.
func (e *env) client() *azservicebus.Client {
	return e.clientWith(rootKeyName, rootKey)
}

func (e *env) clientWith(keyName, key string) *azservicebus.Client {
	e.t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(e.connString(keyName, key), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// anonSession opens a connection with SASL ANONYMOUS, as the SDKs do before
// their $cbs put-token, and one session on it; both close when the test ends.
func (e *env) anonSession(ctx context.Context, t testing.TB) *goamqp.Session {
	t.Helper()
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
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

func (e *env) queue(name string, p broker.QueueProperties) {
	e.t.Helper()
	if err := e.b.CreateQueue(context.Background(), name, p); err != nil {
		e.t.Fatal(err)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustSend sends messages with the SDK.
func mustSend(t testing.TB, c *azservicebus.Client, entity string, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendMessage(testCtx(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", entity, err)
		}
	}
}

// messageReceiver is a Receiver or a SessionReceiver.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, max int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN receives exactly n messages (failing after the test context).
func receiveN(t testing.TB, r messageReceiver, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	ctx := testCtx(t)
	var out []*azservicebus.ReceivedMessage
	for len(out) < n {
		ms, err := r.ReceiveMessages(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("receive: %v (after %d of %d)", err, len(out), n)
		}
		out = append(out, ms...)
	}
	return out
}

// sbCode returns the SDK error code of err, "" when it has none.
func sbCode(err error) azservicebus.Code {
	var se *azservicebus.Error
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
