// Package server assembles a Busbar broker: the durable store, the broker
// engine, the AMQP listener speaking the Service Bus dialect, and the HTTP
// management plane. `busbar serve` and busbartest both run one.
//
// It owns process-level wiring only: listeners, start-up (keys, declared
// entities) and graceful shutdown. Protocol and broker behaviour live in
// the packages it assembles.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/busbar-io/busbar/admin"
	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/cluster"
	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/console"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/servicebus"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/pebble"
	"github.com/busbar-io/busbar/store/postgres"
)

// Defaults for Options.
const (
	DefaultAMQPAddr = "127.0.0.1:5672"
	DefaultHTTPAddr = "127.0.0.1:5300"
	DefaultDataDir  = "./busbar-data"
)

// Options configure a Server. The zero value serves the defaults.
type Options struct {
	// DataDir holds the store and the generated key. Default ./busbar-data.
	DataDir string
	// AMQPAddr is the plain AMQP listener ("host:port", port 0 for any).
	// Default 127.0.0.1:5672.
	AMQPAddr string
	// AMQPSAddr is the TLS AMQP listener; empty disables it. It needs TLS.
	AMQPSAddr string
	// HTTPAddr is the management/metrics listener; "-" disables it.
	// Default 127.0.0.1:5300.
	HTTPAddr string
	// TLS is the TLS configuration of the AMQPS listener (and of HTTP when
	// HTTPTLS is set).
	TLS *tls.Config
	// HTTPTLS serves the HTTP listener over TLS.
	HTTPTLS bool
	// Config is the parsed configuration file: declared entities and SAS
	// policies. Nil for none.
	Config *config.File
	// Clock drives the broker; nil for the real clock.
	Clock clock.Clock
	// Store replaces the Pebble store in DataDir (tests); the server does
	// not close a store it was given.
	Store store.Store
	// StoreURL, when set, names the store instead of DataDir: a
	// postgres:// URL opens store/postgres and runs this server as a node
	// of a cluster (package cluster) over it; the generated root key is
	// then kept in the database, shared by every node.
	StoreURL string
	// Cluster configures the node when StoreURL is set.
	Cluster cluster.Options
	// MaxMessageSizeInKilobytes is the namespace ceiling (default 1024).
	MaxMessageSizeInKilobytes int64
	// SKU is the namespace's tier as the management API reports it:
	// "Premium" (default) or "Standard" (see admin.Options.SKU).
	SKU string
	// PageWindow is broker.Options.PageWindow: available messages per
	// queue or subscription kept in memory (default 50,000; negative: all).
	PageWindow int
	// MinFreeBytes is pebble.Options.MinFreeBytes for the embedded store:
	// the free space kept on the data volume, below which sends are
	// refused (default 128 MiB; negative: no check).
	MinFreeBytes int64
	// CommitLinger is pebble.Options.Linger for the embedded store: how
	// long a group commit may wait for the commits of callers it just
	// released before its fsync (default 250µs; negative: no wait). Longer
	// means fewer fsyncs and less CPU per message at moderate rates, and
	// that much more latency.
	CommitLinger time.Duration
	// EnablePprof serves /debug/pprof/ on the HTTP listener.
	EnablePprof bool
	// DisableConsole turns off the web console, served by default under
	// /ui/ on the HTTP listener.
	DisableConsole bool
	// ConsoleSampleEvery is how often the console samples each entity's
	// counts for its charts (default 10 s).
	ConsoleSampleEvery time.Duration
	// ConsoleToolkit runs the toolkit's operations from the console (see
	// console.Toolkit); nil shows the toolkit's state only.
	ConsoleToolkit console.Toolkit
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Server is a running broker.
type Server struct {
	opts      Options
	log       *slog.Logger
	clk       clock.Clock
	st        store.Store
	ownsStore bool
	broker    *broker.Broker
	node      *cluster.Node // with StoreURL
	auth      *sas.Authorizer
	amqp      *amqp.Server
	http      *http.Server
	metrics   *admin.Metrics
	console   *console.Console

	amqpL, amqpsL, httpL net.Listener
	rootKey              string
	sb                   *servicebus.Handler
	keyCreated           bool

	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// Start opens the store and the broker, declares the configured entities,
// binds the listeners and serves them in the background.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	if opts.DataDir == "" {
		opts.DataDir = DefaultDataDir
	}
	if opts.AMQPAddr == "" {
		opts.AMQPAddr = DefaultAMQPAddr
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = DefaultHTTPAddr
	}
	s := &Server{opts: opts, log: opts.Logger, clk: opts.Clock}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clk == nil {
		s.clk = clock.Real()
	}
	defer func() {
		if err != nil {
			s.shutdown(context.Background())
		}
	}()
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	// A directory made here is private; one that existed keeps its mode,
	// and the files in it (messages, the root key) rely on it.
	if fi, err := os.Stat(opts.DataDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		s.log.Warn("the data directory is open to other users, yet it holds the messages and the keys: make it private (chmod 700)",
			"dir", opts.DataDir, "mode", fi.Mode().Perm().String())
	}
	s.metrics = admin.NewMetrics()
	if s.st = opts.Store; s.st == nil && opts.StoreURL != "" {
		dsn, po, err := postgres.ParseURL(opts.StoreURL)
		if err != nil {
			return nil, err
		}
		po.Announce, po.Logger = cluster.Prefixes(), s.log.With("component", "store")
		ps, err := postgres.Open(ctx, dsn, po)
		if err != nil {
			return nil, err
		}
		s.st, s.ownsStore = ps, true
		co := opts.Cluster
		if co.Logger == nil {
			co.Logger = s.log.With("component", "cluster")
		}
		if err := s.listen(); err != nil { // the advertised address needs the port
			return nil, err
		}
		if co.Address == "" {
			co.Address = advertised(s.amqpL.Addr())
		}
		if co.NodeID == "" && !strings.HasSuffix(opts.AMQPAddr, ":0") {
			// Stable across restarts, so a restarted node takes its
			// entities back at once instead of after the lease time.
			host, _ := os.Hostname()
			co.NodeID = host + "/" + opts.AMQPAddr
		}
		if s.node, err = cluster.New(ps, co); err != nil {
			return nil, err
		}
	}
	if s.st == nil {
		ps, err := pebble.Open(opts.DataDir+"/store", pebble.Options{
			Logger:       s.log.With("component", "store"),
			OnCommit:     func(ops int, d time.Duration) { s.metrics.ObserveCommit(d, ops) },
			OnSync:       func(d time.Duration) { s.metrics.ObserveWALSync(d) },
			MinFreeBytes: opts.MinFreeBytes,
			Linger:       opts.CommitLinger,
		})
		if err != nil {
			return nil, err
		}
		s.st, s.ownsStore = ps, true
	}
	rootKey := func() (string, bool, error) { return loadOrCreateRootKey(opts.DataDir) }
	if s.node != nil {
		rootKey = func() (string, bool, error) { return sharedRootKey(ctx, s.st) }
	}
	rules, key, created, err := authRules(opts.Config, rootKey)
	if err != nil {
		return nil, err
	}
	s.rootKey, s.keyCreated = key, created
	if s.auth, err = sas.NewAuthorizer(rules); err != nil {
		return nil, err
	}
	st := s.st
	if s.node != nil {
		st = s.node.Store()
	}
	s.broker, err = broker.Open(ctx, st, broker.Options{
		Dormant:                   s.node != nil,
		Created:                   s.created,
		Clock:                     s.clk,
		Logger:                    s.log.With("component", "broker"),
		Observer:                  s.metrics,
		MaxMessageSizeInKilobytes: opts.MaxMessageSizeInKilobytes,
		PageWindow:                opts.PageWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the broker: %w", err)
	}
	if s.node != nil {
		if err := s.node.Start(ctx, s.broker); err != nil {
			return nil, fmt.Errorf("joining the cluster: %w", err)
		}
	}
	s.auth = s.auth.WithEntityRules(entityRules(s.broker))
	s.metrics.CollectEntities(s.broker)
	s.metrics.CollectStore(s.st.Stats)
	if err := applyEntities(ctx, s.broker, opts.Config); err != nil {
		return nil, fmt.Errorf("declaring entities from the config: %w", err)
	}
	if s.node != nil {
		if err := s.node.Sync(ctx); err != nil { // serve the declared entities at once
			return nil, fmt.Errorf("joining the cluster: %w", err)
		}
	}
	if s.amqpL == nil {
		if err := s.listen(); err != nil {
			return nil, err
		}
	}
	if err := s.serve(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) listen() error {
	var err error
	if s.amqpL, err = net.Listen("tcp", s.opts.AMQPAddr); err != nil {
		return fmt.Errorf("AMQP listener: %w", err)
	}
	if s.opts.AMQPSAddr != "" {
		if s.opts.TLS == nil {
			return errors.New("the AMQPS listener needs a TLS certificate")
		}
		l, err := net.Listen("tcp", s.opts.AMQPSAddr)
		if err != nil {
			return fmt.Errorf("AMQPS listener: %w", err)
		}
		s.amqpsL = tls.NewListener(l, s.opts.TLS)
	}
	if s.opts.HTTPAddr != "-" {
		l, err := net.Listen("tcp", s.opts.HTTPAddr)
		if err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
		if s.opts.HTTPTLS {
			if s.opts.TLS == nil {
				return errors.New("HTTPS needs a TLS certificate")
			}
			l = tls.NewListener(l, s.opts.TLS)
		}
		s.httpL = l
	}
	return nil
}

func (s *Server) serve() error {
	var fwd *servicebus.Forwarding
	if s.node != nil {
		fwd = s.forwarding()
	}
	handler, err := servicebus.NewHandler(servicebus.Options{
		Forwarding: fwd,
		Broker:     s.broker,
		Authorizer: s.auth,
		// Token expiry is judged on the real clock, even when the broker
		// runs on a fake one: clients sign tokens with their wall clocks.
		Logger:  s.log.With("component", "servicebus"),
		Metrics: linkMetrics{s.metrics},
	})
	if err != nil {
		return err
	}
	s.sb = handler
	s.amqp = amqp.NewServer(amqp.Config{
		Handler:        handler,
		Authenticate:   handler.Authenticate,
		MaxMessageSize: uint64(maxMessageKB(s.opts.MaxMessageSizeInKilobytes)) << 10,
		Logger:         s.log.With("component", "amqp"),
	})
	for _, l := range []net.Listener{s.amqpL, s.amqpsL} {
		if l == nil {
			continue
		}
		s.wg.Add(1)
		go func(l net.Listener) {
			defer s.wg.Done()
			if err := s.amqp.Serve(l); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, amqp.ErrServerClosed) {
				s.log.Error("AMQP listener stopped", "addr", l.Addr(), "err", err)
			}
		}(l)
	}
	if s.httpL != nil {
		var h http.Handler = admin.NewHandler(admin.Options{
			Broker:     s.broker,
			Authorizer: s.auth,
			// Tokens, as above, expire on the real clock.
			Metrics:     s.metrics,
			EnablePprof: s.opts.EnablePprof,
			SKU:         s.opts.SKU,
			Logger:      s.log.With("component", "admin"),
		})
		if !s.opts.DisableConsole {
			if s.console, err = console.New(console.Options{
				Broker:      s.broker,
				Authorizer:  s.auth,
				Counters:    entityCounters(s.metrics),
				SampleEvery: s.opts.ConsoleSampleEvery,
				AMQPAddr:    s.amqpL.Addr().String(),
				Toolkit:     s.opts.ConsoleToolkit,
				Logger:      s.log.With("component", "console"),
			}); err != nil {
				return err
			}
			h = withConsole(s.console, h)
		}
		s.http = &http.Server{
			Handler:           withWebSocket(s.amqp, h),
			ReadHeaderTimeout: 10 * time.Second,
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.http.Serve(s.httpL); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("HTTP listener stopped", "err", err)
			}
		}()
	}
	return nil
}

// linkMetrics feeds the Service Bus layer's connection and link events to
// the Prometheus metrics.
type linkMetrics struct{ m *admin.Metrics }

func (l linkMetrics) ConnectionOpened() { l.m.ConnectionOpened() }
func (l linkMetrics) ConnectionClosed() { l.m.ConnectionClosed() }

func (l linkMetrics) LinkAttached(_ string, receiving bool) { l.m.LinkAttached(linkRole(receiving)) }
func (l linkMetrics) LinkDetached(_ string, receiving bool) { l.m.LinkDetached(linkRole(receiving)) }

// linkRole names a link by what the client does on it.
func linkRole(receiving bool) string {
	if receiving {
		return "receiver"
	}
	return "sender"
}

func maxMessageKB(kb int64) int64 {
	if kb <= 0 {
		return 1024
	}
	return kb
}

// AMQPAddr returns the plain AMQP listener's address.
func (s *Server) AMQPAddr() net.Addr { return s.amqpL.Addr() }

// AMQPSAddr returns the TLS AMQP listener's address, or nil.
func (s *Server) AMQPSAddr() net.Addr {
	if s.amqpsL == nil {
		return nil
	}
	return s.amqpsL.Addr()
}

// HTTPAddr returns the HTTP listener's address, or nil when disabled.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpL == nil {
		return nil
	}
	return s.httpL.Addr()
}

// created takes a new queue or topic at once when this node is to serve
// it, so that a client may use it as soon as its creation returns.
func (s *Server) created(ctx context.Context) {
	if s.node == nil {
		return
	}
	if err := s.node.Sync(ctx); err != nil {
		s.log.Warn("taking a new entity", "err", err)
	}
}

// Node returns the cluster node, or nil when the server is not one.
func (s *Server) Node() *cluster.Node { return s.node }

// Broker returns the broker engine.
func (s *Server) Broker() *broker.Broker { return s.broker }

// RootKey returns the generated RootManageSharedAccessKey ("" when the
// config declares its own policies) and whether it was generated by this start.
func (s *Server) RootKey() (key string, created bool) { return s.rootKey, s.keyCreated }

// ConnectionString returns an emulator-style connection string for the plain
// AMQP listener with the root key, or "" when the config declares its own policies.
func (s *Server) ConnectionString() string {
	if s.rootKey == "" {
		return ""
	}
	return ConnectionString(s.amqpL.Addr().String(), RootKeyName, s.rootKey)
}

// Shutdown stops accepting connections, closes the open ones (in-flight
// store commits finish first), then closes the broker and the store. It
// returns when everything is closed or ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(ctx) })
	return s.closeErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	if s.http != nil {
		errs = append(errs, s.http.Shutdown(ctx))
	} else if s.httpL != nil {
		errs = append(errs, s.httpL.Close())
	}
	if s.amqp != nil {
		errs = append(errs, s.amqp.Close(ctx))
	} else {
		for _, l := range []net.Listener{s.amqpL, s.amqpsL} {
			if l != nil {
				errs = append(errs, l.Close())
			}
		}
	}
	s.wg.Wait()
	if s.sb != nil {
		s.sb.Stop()
	}
	if s.console != nil {
		errs = append(errs, s.console.Close())
	}
	if s.node != nil {
		errs = append(errs, s.node.Stop(ctx))
	}
	if s.broker != nil {
		errs = append(errs, s.broker.Close())
	}
	if s.ownsStore && s.st != nil {
		errs = append(errs, s.st.Close())
	}
	return errors.Join(errs...)
}

// forwarding relays links for entities another node serves to that node,
// authenticated with the root key the nodes share (or, when the config
// declares its own policies, a namespace-wide rule with every right; nil
// without one).
func (s *Server) forwarding() *servicebus.Forwarding {
	f := &servicebus.Forwarding{KeyName: RootKeyName, Key: s.rootKey}
	if f.Key == "" {
		for _, r := range s.auth.Rules() {
			if r.Entity == "" && r.Rights&sas.Manage != 0 && r.Rights&sas.Send != 0 && r.Rights&sas.Listen != 0 {
				f.KeyName, f.Key = r.KeyName, r.PrimaryKey
				break
			}
		}
	}
	if f.Key == "" {
		s.log.Warn("no namespace-wide rule with Manage, Send and Listen: links are not forwarded between nodes; clients must reach the node serving their entity")
		return nil
	}
	f.Owner = s.node.OwnerAddress
	return f
}

// advertised is the address other nodes reach a listener at: its own, with
// the host name in place of an unspecified host (0.0.0.0, ::).
func advertised(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}
