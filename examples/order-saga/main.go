// Command order-saga runs the orchestration of Sean Feldman's "Sagas with
// Azure Service Bus" with the Busbar toolkit (packages saga and processor),
// against Busbar or Azure Service Bus.
//
// Topology: topic "orchestration", session-enabled subscription
// "orchestrator" with one rule per MessageType (ItemShipped,
// PaymentAccepted, Timeout). The Payments service publishes PaymentAccepted
// at once; the Shipping service schedules ItemShipped 7 seconds later. The
// saga, keyed by the order id (the session id), waits for both, checking
// every 5 seconds, three times, then compensates.
//
// Start a broker and run the example:
//
//	busbar serve &
//	go run ./examples/order-saga --connection-string 'Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=...;UseDevelopmentEmulator=true'
//
// It creates the entities through the management API (plain HTTP on the
// endpoint's host, port 5300, unless --admin says otherwise; --no-create
// skips this, e.g. when `busbar serve --config` declared them) and runs two
// orders: one whose messages both arrive (ItemShipped late), one whose
// ItemShipped never comes (--scenario happy or missing runs only one).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/sas"
)

const (
	topic        = "orchestration"
	subscription = "orchestrator"
	happyOrder   = "77777777-0000-0000-0000-000000000000"
	missingOrder = "77777777-0000-0000-0000-000000000001"
)

// config is what a run needs.
type config struct {
	connStr  string
	admin    string // host:port of the management API; "" derives it
	create   bool
	scenario string // happy, missing or both
	idle     time.Duration
	now      func() time.Time
	wait     time.Duration // how long to wait for the sagas to finish
	trace    func(string)  // sees every saga log record (tests)
}

func main() {
	cfg := config{now: time.Now, idle: 15 * time.Second, wait: 2 * time.Minute}
	fs := flag.NewFlagSet("order-saga", flag.ExitOnError)
	fs.StringVar(&cfg.connStr, "connection-string", os.Getenv("SERVICEBUS_CONNECTION_STRING"), "Service Bus connection string (default $SERVICEBUS_CONNECTION_STRING)")
	fs.StringVar(&cfg.admin, "admin", "", "management API host:port (default: the endpoint's host, port 5300, plain HTTP)")
	noCreate := fs.Bool("no-create", false, "do not create the topic, subscription and rules")
	fs.StringVar(&cfg.scenario, "scenario", "both", "happy, missing or both")
	_ = fs.Parse(os.Args[1:])
	cfg.create = !*noCreate
	if cfg.connStr == "" {
		fmt.Fprintln(os.Stderr, "order-saga: --connection-string is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "order-saga:", err)
		os.Exit(1)
	}
}

// run creates the topology, starts the saga host, publishes the scenario's
// messages and returns once every saga has finished and its session has
// been closed.
func run(ctx context.Context, cfg config, w io.Writer) error {
	var orders []string
	switch cfg.scenario {
	case "happy":
		orders = []string{happyOrder}
	case "missing":
		orders = []string{missingOrder}
	case "both":
		orders = []string{happyOrder, missingOrder}
	default:
		return fmt.Errorf("unknown scenario %q", cfg.scenario)
	}
	if cfg.create {
		if err := createEntities(ctx, cfg); err != nil {
			return fmt.Errorf("creating the entities: %w", err)
		}
	}
	client, err := azservicebus.NewClientFromConnectionString(cfg.connStr, nil)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	out := &console{w: w, now: cfg.now}
	var mu sync.Mutex
	pending := map[string]bool{}
	for _, o := range orders {
		pending[o] = true
	}
	allDone := make(chan struct{})
	finished := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if pending[id] {
			delete(pending, id)
			if len(pending) == 0 {
				close(allDone)
			}
		}
	}
	var open sync.WaitGroup
	sg := newOrderSaga(out, cfg.now, finished, cfg.trace)
	handle := sg.Handler(client, topic)
	p, err := processor.NewSession(client, processor.Subscription(topic, subscription),
		func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
			typ, _ := m.ApplicationProperties["MessageType"].(string)
			out.printf("Got a message of type: %s for session with ID %s", typ, s.ID())
			return handle(ctx, s, m)
		}, &processor.SessionOptions{
			MaxConcurrentSessions:        len(orders),
			MaxConcurrentCallsPerSession: 1,
			SessionIdleTimeout:           cfg.idle,
			OnSessionOpen: func(ctx context.Context, s *processor.Session) {
				open.Add(1)
				out.printf("Handling session with ID: %s", s.ID())
			},
			OnSessionClose: func(ctx context.Context, s *processor.Session) {
				out.printf("Closing session with ID: %s", s.ID())
				open.Done()
			},
			OnError: func(err error) { out.printf("Error: %v", err) },
		})
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()

	if err := publish(ctx, client, orders, cfg.now); err != nil {
		_ = p.Close(context.Background())
		return err
	}
	select {
	case <-allDone:
	case <-time.After(cfg.wait):
		_ = p.Close(context.Background())
		return errors.New("the sagas did not finish in time")
	case err := <-runErr:
		return err
	}
	open.Wait() // the sessions close once idle, as in the article
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Close(cctx)
}

// publish plays the Payments and Shipping services: PaymentAccepted now,
// ItemShipped 7 seconds from now, and none for the missing order.
func publish(ctx context.Context, client *azservicebus.Client, orders []string, now func() time.Time) error {
	sender, err := client.NewSender(topic, nil)
	if err != nil {
		return err
	}
	defer sender.Close(context.Background())
	for _, order := range orders {
		id := order
		if err := sender.SendMessage(ctx, &azservicebus.Message{
			SessionID: &id, Body: []byte("Payment OK"),
			ApplicationProperties: map[string]any{"MessageType": "PaymentAccepted"},
		}, nil); err != nil {
			return err
		}
		if order == missingOrder {
			continue
		}
		if _, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{{
			SessionID: &id, Body: []byte("Shipping OK"),
			ApplicationProperties: map[string]any{"MessageType": "ItemShipped"},
		}}, now().Add(7*time.Second), nil); err != nil {
			return err
		}
	}
	return nil
}

// createEntities declares the topology through the management API; what
// exists already is left as it is.
func createEntities(ctx context.Context, cfg config) error {
	ac, err := adminClient(cfg)
	if err != nil {
		return err
	}
	if _, err := ac.CreateTopic(ctx, topic, nil); err != nil && !exists(err) {
		return err
	}
	requiresSession := true
	_, err = ac.CreateSubscription(ctx, topic, subscription, &admin.CreateSubscriptionOptions{
		Properties: &admin.SubscriptionProperties{RequiresSession: &requiresSession}})
	if exists(err) {
		return nil // created by an earlier run, rules included
	}
	if err != nil {
		return err
	}
	if _, err := ac.DeleteRule(ctx, topic, subscription, "$Default", nil); err != nil {
		return err
	}
	for _, typ := range []string{"ItemShipped", "PaymentAccepted", "Timeout"} {
		name := typ
		if _, err := ac.CreateRule(ctx, topic, subscription, &admin.CreateRuleOptions{
			Name:   &name,
			Filter: &admin.CorrelationFilter{ApplicationProperties: map[string]any{"MessageType": typ}},
		}); err != nil {
			return err
		}
	}
	return nil
}

func exists(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}

// adminClient returns a management client for the broker of the
// connection string: over plain HTTP on port 5300 of the endpoint's host,
// as Busbar and the emulator serve it, unless --admin names another.
func adminClient(cfg config) (*admin.Client, error) {
	addr := cfg.admin
	if addr == "" {
		host := endpointHost(cfg.connStr)
		if host == "" {
			return nil, errors.New("no Endpoint in the connection string")
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		addr = net.JoinHostPort(host, "5300")
	}
	cs := sas.ReplaceField(cfg.connStr, "Endpoint", "sb://"+addr)
	return admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: plainHTTP{}}})
}

// plainHTTP sends the management requests over HTTP: the admin client
// always builds https URLs.
type plainHTTP struct{}

func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(r)
}

func endpointHost(connStr string) string {
	v := sas.ParseConnectionString(connStr).Endpoint
	v = strings.TrimPrefix(strings.TrimPrefix(v, "sb://"), "https://")
	return strings.TrimSuffix(v, "/")
}
