package benchcore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/busbar-io/busbar/sas"
)

// BusbarConfig configures the drivers that talk to Busbar (or any broker
// speaking the Service Bus dialect).
type BusbarConfig struct {
	// ConnectionString is a Service Bus connection string; an emulator-style
	// one (UseDevelopmentEmulator=true) means plain AMQP.
	ConnectionString string
	// Queue is the queue to use. With Create it is created for the run
	// (replacing one of the same name) and deleted afterwards; empty with
	// Create means a generated name.
	Queue  string
	Create bool
	// AdminAddr is the management API's host:port for Create (default: the
	// endpoint's host on port 5300), spoken over plain HTTP unless AdminTLS.
	AdminAddr string
	AdminTLS  bool
	// ReceiveAndDelete settles on receipt; otherwise peek-lock and complete.
	ReceiveAndDelete bool
	// SettleFirst makes the raw client's peek-lock completes settled
	// dispositions (rcv-settle-mode first), which Busbar applies without
	// answering; by default they are unsettled (mode second, as the SDKs
	// attach) and each waits for the broker's verdict.
	SettleFirst bool
	// Prefetch is the most messages one receive asks for (default 100).
	Prefetch int
	// ReceiveWait is how long the sdk client's ReceiveMessages keeps
	// gathering after the first message on a queue without sessions (its
	// TimeAfterFirstMessage; default 1 ms). The SDK waits on a Go timer,
	// which an idle process fires only to the millisecond: a wait under a
	// millisecond costs about one, and asking for 1 µs returns what has
	// arrived as soon as the first message is there.
	ReceiveWait time.Duration
	// SessionIdle is how long a session consumer waits on an empty session
	// before moving to the next (default 1 s); a session whose last message
	// (marked by the engine) has been delivered is left at once.
	SessionIdle time.Duration
	// SessionPrefetch is the most messages one receive asks for on a
	// session (default 1; see sessionReceiveOpts for why).
	SessionPrefetch int
	// ConcurrentSessions is how many sessions each consumer works on at
	// once in keyed runs (default 8, the .NET session processor's default).
	ConcurrentSessions int
	// BrokerVersion labels reports, e.g. "busbar dev".
	BrokerVersion string
}

func (c *BusbarConfig) defaults() {
	if c.Prefetch <= 0 {
		c.Prefetch = 100
	}
	if c.ReceiveWait <= 0 {
		c.ReceiveWait = time.Millisecond
	}
	if c.SessionPrefetch <= 0 {
		c.SessionPrefetch = 1
	}
	if c.ConcurrentSessions <= 0 {
		c.ConcurrentSessions = 8
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = time.Second
	}
	if c.BrokerVersion == "" {
		c.BrokerVersion = "busbar"
	}
}

// busbarBase is what the Busbar drivers share: the configuration, the
// parsed connection string, and the queue of the run with its manager.
type busbarBase struct {
	cfg   BusbarConfig
	ci    connInfo
	qm    *queueManager
	queue string
	keyed bool
}

// newBusbarBase reads cfg. A driver named by plain speaks plain AMQP and
// needs an emulator-style connection string; plain is "" for the SDK.
func newBusbarBase(cfg BusbarConfig, plain string) (busbarBase, error) {
	cfg.defaults()
	ci, err := parseConnectionString(cfg.ConnectionString)
	if err != nil {
		return busbarBase{}, err
	}
	if plain != "" && !ci.emulator {
		return busbarBase{}, fmt.Errorf("--client %s speaks plain AMQP: it needs an emulator-style connection string (UseDevelopmentEmulator=true)", plain)
	}
	return busbarBase{cfg: cfg, ci: ci}, nil
}

// Prepare implements Driver: it resolves (or creates) the run's queue.
func (b *busbarBase) Prepare(ctx context.Context, w Workload) error {
	q, err := prepareQueue(ctx, &b.cfg, b.ci, &b.qm, w)
	b.queue, b.keyed = q, w.Keyed()
	return err
}

// Close implements Driver: it deletes a queue the driver created.
func (b *busbarBase) Close() error {
	if b.qm != nil {
		return b.qm.cleanup()
	}
	return nil
}

// putTokenRequest returns the application properties and the SAS token of
// a CBS put-token for audience (an amqp:// URI of an entity), signed with
// keyName/key and valid for two hours, as the Service Bus SDKs send it.
func putTokenRequest(audience, keyName, key string) (map[string]any, string) {
	expiry := time.Now().Add(2 * time.Hour)
	return map[string]any{
		"operation":  "put-token",
		"type":       "servicebus.windows.net:sastoken",
		"name":       audience,
		"expiration": strconv.FormatInt(expiry.Unix(), 10),
	}, sas.Sign(audience, keyName, key, expiry)
}

// putTokenStatus checks the status code of a put-token response.
func putTokenStatus(audience string, props map[string]any) error {
	code, _ := props["status-code"].(int32)
	if code < 200 || code > 299 {
		return fmt.Errorf("cbs put-token for %s: status %d %v", audience, code, props["status-description"])
	}
	return nil
}

// connInfo is the part of a connection string the drivers need.
type connInfo struct {
	host     string // host[:port] as written in the endpoint
	emulator bool
	keyName  string
	key      string
}

// parseConnectionString reads a Service Bus connection string.
func parseConnectionString(cs string) (connInfo, error) {
	c := sas.ParseConnectionString(cs)
	ci := connInfo{emulator: c.Emulator, keyName: c.KeyName, key: c.Key}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return ci, fmt.Errorf("connection string: endpoint: %w", err)
		}
		ci.host = u.Host
	}
	if ci.host == "" || ci.keyName == "" || ci.key == "" {
		return ci, errors.New("connection string needs Endpoint, SharedAccessKeyName and SharedAccessKey")
	}
	return ci, nil
}

// adminAddr returns the management API's host:port.
func (c *BusbarConfig) adminAddr(ci connInfo) string {
	if c.AdminAddr != "" {
		return c.AdminAddr
	}
	host := ci.host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return net.JoinHostPort(host, "5300")
}

// queueManager creates and deletes the run's queue through the management API.
type queueManager struct {
	cfg     *BusbarConfig
	client  *admin.Client
	created string
	mu      sync.Mutex
}

// plainHTTP sends the admin client's https requests over plain HTTP, the
// way the Service Bus emulator's own Go sample reaches its management port.
type plainHTTP struct{ c *http.Client }

// Do implements policy.Transporter.
func (t plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return t.c.Do(r)
}

func newQueueManager(cfg *BusbarConfig, ci connInfo) (*queueManager, error) {
	cs := strings.Replace(cfg.ConnectionString, ci.host, cfg.adminAddr(ci), 1)
	var opts admin.ClientOptions
	if !cfg.AdminTLS {
		opts.ClientOptions = azcore.ClientOptions{Transport: plainHTTP{&http.Client{Timeout: 30 * time.Second}}}
	}
	opts.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond}
	c, err := admin.NewClientFromConnectionString(cs, &opts)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &queueManager{cfg: cfg, client: c}, nil
}

// create makes a fresh queue for w and returns its name.
func (m *queueManager) create(ctx context.Context, name string, w Workload) (string, error) {
	if name == "" {
		name = fmt.Sprintf("bench-%08x", newRunID())
	}
	if got, err := m.client.GetQueue(ctx, name, nil); err != nil {
		return "", fmt.Errorf("get queue %s: %w", name, err)
	} else if got != nil {
		if _, err := m.client.DeleteQueue(ctx, name, nil); err != nil {
			return "", fmt.Errorf("delete queue %s: %w", name, err)
		}
	}
	keyed := w.Keyed()
	lock := "PT1M"
	props := &admin.QueueProperties{RequiresSession: &keyed, LockDuration: &lock}
	if _, err := m.client.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: props}); err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	m.mu.Lock()
	m.created = name
	m.mu.Unlock()
	return name, nil
}

// cleanup deletes the queue create made, if any.
func (m *queueManager) cleanup() error {
	m.mu.Lock()
	name := m.created
	m.created = ""
	m.mu.Unlock()
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := m.client.DeleteQueue(ctx, name, nil)
	return err
}

// prepareQueue is Prepare shared by the Busbar drivers: it resolves the
// queue's name, creating the queue when asked.
func prepareQueue(ctx context.Context, cfg *BusbarConfig, ci connInfo, qm **queueManager, w Workload) (string, error) {
	if !cfg.Create {
		if cfg.Queue == "" {
			return "", errors.New("name a queue (--queue) or let the bench create one (--create)")
		}
		return cfg.Queue, nil
	}
	if *qm == nil {
		m, err := newQueueManager(cfg, ci)
		if err != nil {
			return "", err
		}
		*qm = m
	}
	if err := (*qm).cleanup(); err != nil {
		return "", err
	}
	return (*qm).create(ctx, cfg.Queue, w)
}

// settler runs settlements (complete, accept) concurrently with receiving,
// at most limit at a time, and remembers the first error.
type settler struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func newSettler(limit int) *settler { return &settler{sem: make(chan struct{}, limit)} }

func (s *settler) do(f func() error) {
	s.sem <- struct{}{}
	s.wg.Add(1)
	go func() {
		defer func() { <-s.sem; s.wg.Done() }()
		if err := f(); err != nil {
			s.once.Do(func() { s.err = err })
		}
	}()
}

// wait waits for every settlement started and returns the first error.
func (s *settler) wait() error {
	s.wg.Wait()
	return s.err
}

// runConcurrently runs n copies of loop until ctx ends or one of them
// fails, and returns the first failure.
func runConcurrently(ctx context.Context, n int, loop func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- loop(ctx) }()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
