// Package busbartest runs a Busbar broker inside a Go test: on a free
// loopback port, over a temporary store, optionally on a fake clock the test
// moves, and shut down when the test ends. Point any Service Bus SDK at
// ConnectionString.
//
//	srv := busbartest.Start(t, busbartest.WithFakeClock(time.Now()),
//		busbartest.WithQueue("orders", broker.QueueProperties{RequiresSession: true}))
//	client, _ := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
//	...
//	srv.Advance(72 * time.Hour) // fires scheduled messages, expires locks
//
// It owns test set-up and tear-down only; the broker it runs is the real
// one, assembled by package server.
package busbartest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/server"
)

// Option configures Start.
type Option func(*settings)

type settings struct {
	fake     *clock.Fake
	cfg      *config.File
	logger   *slog.Logger
	entities []func(context.Context, *broker.Broker) error
	noHTTP   bool
}

// WithFakeClock runs the broker on a fake clock starting at start; the test
// moves it with Server.Advance.
func WithFakeClock(start time.Time) Option {
	return func(s *settings) { s.fake = clock.NewFake(start) }
}

// WithConfig declares the entities (and SAS policies) of a configuration
// file, as `busbar serve --config` would.
func WithConfig(f *config.File) Option {
	return func(s *settings) { s.cfg = f }
}

// WithLogger sends the broker's logs to l (by default they are discarded).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) { s.logger = l }
}

// WithoutHTTP does not start the HTTP management listener.
func WithoutHTTP() Option {
	return func(s *settings) { s.noHTTP = true }
}

// WithQueue declares a queue.
func WithQueue(name string, p broker.QueueProperties) Option {
	return withEntity(func(ctx context.Context, b *broker.Broker) error { return b.CreateQueue(ctx, name, p) })
}

// WithTopic declares a topic.
func WithTopic(name string, p broker.TopicProperties) Option {
	return withEntity(func(ctx context.Context, b *broker.Broker) error { return b.CreateTopic(ctx, name, p) })
}

// WithSubscription declares a subscription of a topic declared before it.
// With rules, the subscription has exactly those rules instead of $Default.
func WithSubscription(topic, name string, p broker.SubscriptionProperties, rules ...broker.RuleProperties) Option {
	return withEntity(func(ctx context.Context, b *broker.Broker) error {
		if len(rules) > 0 && p.DefaultRule == nil {
			p.DefaultRule = &rules[0]
			rules = rules[1:]
		}
		if err := b.CreateSubscription(ctx, topic, name, p); err != nil {
			return err
		}
		for _, r := range rules {
			if err := b.AddRule(ctx, topic, name, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func withEntity(f func(context.Context, *broker.Broker) error) Option {
	return func(s *settings) { s.entities = append(s.entities, f) }
}

// Server is a broker started by Start.
type Server struct {
	*server.Server
	t       testing.TB
	fake    *clock.Fake
	dataDir string
	set     settings
}

// Start starts a broker for the test and registers its shutdown with
// t.Cleanup. It fails the test if the broker cannot start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var set settings
	for _, o := range opts {
		o(&set)
	}
	s := &Server{t: t, fake: set.fake, dataDir: t.TempDir(), set: set}
	s.start()
	ctx := context.Background()
	for _, declare := range set.entities {
		if err := declare(ctx, s.Broker()); err != nil {
			t.Fatalf("busbartest: declaring an entity: %v", err)
		}
	}
	return s
}

func (s *Server) start() {
	s.t.Helper()
	opts := server.Options{
		DataDir:  s.dataDir,
		AMQPAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0",
		Config:   s.set.cfg,
		Logger:   s.set.logger,
	}
	if s.set.noHTTP {
		opts.HTTPAddr = "-"
	}
	if s.fake != nil {
		opts.Clock = s.fake
	}
	srv, err := server.Start(context.Background(), opts)
	if err != nil {
		s.t.Fatalf("busbartest: starting the broker: %v", err)
	}
	s.Server = srv
	s.t.Cleanup(func() { s.shutdown() })
}

func (s *Server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Server.Shutdown(ctx); err != nil {
		s.t.Errorf("busbartest: shutting down: %v", err)
	}
}

// Restart shuts the broker down and starts it again on the same data
// directory (and the same fake clock): what was acknowledged is still there,
// locks are gone, clients must reconnect. The listeners get new ports.
func (s *Server) Restart() {
	s.t.Helper()
	s.shutdown()
	s.start()
}

// Advance moves the fake clock forward by d, firing every scheduled message,
// lock expiry and TTL that falls due on the way. It fails the test when the
// server was started without WithFakeClock.
func (s *Server) Advance(d time.Duration) {
	s.t.Helper()
	if s.fake == nil {
		s.t.Fatal("busbartest: Advance needs WithFakeClock")
	}
	s.fake.Advance(d)
}

// Clock returns the fake clock, or nil when the server runs on the real one.
func (s *Server) Clock() *clock.Fake { return s.fake }

// AdminConnectionString returns a connection string for the HTTP management
// API (for the azservicebus/admin client with an http transport).
func (s *Server) AdminConnectionString() string {
	key, _ := s.RootKey()
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		s.HTTPAddr(), server.RootKeyName, key)
}

// AdminClient returns an azservicebus/admin client for the server's HTTP
// management API: the admin client always builds https URLs, so it is
// given a transport that sends them over plain HTTP.
func (s *Server) AdminClient() (*admin.Client, error) {
	return PlainAdminClient(s.AdminConnectionString())
}

// PlainAdminClient returns an azservicebus/admin client for a connection
// string whose endpoint is a Busbar HTTP listener without TLS (a child
// `busbar serve`'s, say).
func PlainAdminClient(connStr string) (*admin.Client, error) {
	return admin.NewClientFromConnectionString(connStr,
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{}}})
}

// plainHTTP sends the admin client's requests over HTTP.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(r)
}

// NewClient returns an azservicebus client for connStr (usually
// s.ConnectionString()), closed when the test ends.
func NewClient(t testing.TB, connStr string) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// StartExample starts an in-process broker with the given queues for a
// runnable example, which has no testing.T (tests use Start). stop shuts it
// down and removes its data.
func StartExample(queues map[string]broker.QueueProperties) (connStr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "busbar-example")
	if err != nil {
		return "", nil, err
	}
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DataDir: dir, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		_ = srv.Shutdown(ctx)
		_ = os.RemoveAll(dir)
	}
	for name, p := range queues {
		if err := srv.Broker().CreateQueue(ctx, name, p); err != nil {
			stop()
			return "", nil, err
		}
	}
	return srv.ConnectionString(), stop, nil
}
