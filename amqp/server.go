package amqp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/busbar-io/busbar/amqp/frames"
)

// Config configures a Server. Only Handler is required; every zero field
// takes the default documented on it.
type Config struct {
	// Handler decides what connections, sessions and links may do.
	Handler Handler
	// Authenticate decides a SASL exchange: it returns the connection's
	// identity (available as Conn.Identity) or an error to refuse it
	// (sasl-outcome auth). nil accepts every client, with the user name (or
	// the mechanism name) as identity.
	Authenticate func(*Credentials) (identity any, err error)
	// AllowNoSASL accepts clients that skip SASL and send the AMQP header
	// directly; Authenticate is then called with an empty Mechanism. When
	// false such clients get the SASL header in reply and are disconnected.
	AllowNoSASL bool
	// Mechanisms are the SASL mechanisms offered; default ANONYMOUS, PLAIN,
	// MSSBCBS. Only these three are understood.
	Mechanisms []string
	// ContainerID is sent in open; default "busbar-" and 8 random hex bytes.
	ContainerID string
	// MaxFrameSize is the largest frame this end accepts (and sends); default
	// 65536, at least 512.
	MaxFrameSize uint32
	// ChannelMax is the highest channel number (session) accepted; default
	// 1023.
	ChannelMax uint16
	// HandleMax is the highest link handle accepted per session; default 1023.
	HandleMax uint32
	// IdleTimeout is advertised in open: a peer silent this long is
	// disconnected with amqp:resource-limit-exceeded. Default 60s; negative
	// disables it.
	IdleTimeout time.Duration
	// SessionWindow is the incoming-window given to each session, in
	// transfer frames, renewed whenever half of it is used; default 65536.
	SessionWindow uint32
	// LinkCredit is the automatic credit window of receiving links (see
	// Receiver.SetCreditWindow); default 500.
	LinkCredit uint32
	// MaxMessageSize is the max-message-size set on attach replies and
	// enforced on incoming deliveries; default 100 MiB. It can be changed
	// per link in the attach callbacks.
	MaxMessageSize uint64
	// WriteBuffer bounds each connection's buffer of encoded frames; default
	// 256 KiB.
	WriteBuffer int
	// WriteTimeout bounds one socket write; default 30s.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds the time from accepting a connection to
	// receiving the peer's open; default 30s.
	HandshakeTimeout time.Duration
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Server accepts AMQP 1.0 connections and runs them. Create it with
// NewServer; it is safe for concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// NewServer returns a Server with cfg's defaults applied.
func NewServer(cfg Config) *Server {
	if cfg.Handler == nil {
		panic("amqp: Config.Handler is required")
	}
	if len(cfg.Mechanisms) == 0 {
		cfg.Mechanisms = []string{MechAnonymous, MechPlain, MechMSSBCBS}
	}
	if cfg.ContainerID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.ContainerID = "busbar-" + hex.EncodeToString(b[:])
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = 65536
	}
	if cfg.MaxFrameSize < frames.MinMaxFrameSize {
		cfg.MaxFrameSize = frames.MinMaxFrameSize
	}
	if cfg.ChannelMax == 0 {
		cfg.ChannelMax = 1023
	}
	if cfg.HandleMax == 0 {
		cfg.HandleMax = 1023
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.IdleTimeout < 0 {
		cfg.IdleTimeout = 0
	}
	if cfg.SessionWindow == 0 {
		cfg.SessionWindow = 65536
	}
	if cfg.LinkCredit == 0 {
		cfg.LinkCredit = 500
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = 100 << 20
	}
	if cfg.WriteBuffer <= 0 {
		cfg.WriteBuffer = 256 << 10
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:       cfg,
		log:       log,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*Conn]struct{}),
	}
}

// ListenAndServe listens on a TCP address (":5672") and serves it until
// Close.
func (s *Server) ListenAndServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(l)
}

// ListenAndServeTLS listens on a TCP address (":5671") and serves TLS
// connections with config until Close.
func (s *Server) ListenAndServeTLS(addr string, config *tls.Config) error {
	l, err := tls.Listen("tcp", addr, config)
	if err != nil {
		return err
	}
	return s.Serve(l)
}

// Serve accepts connections on l, each served on its own goroutines, until
// l fails or Close is called; it then returns ErrServerClosed (after Close)
// or the accept error. Wrap l with tls.NewListener to serve TLS.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff) // transient accept failure (EMFILE and the like)
				continue
			}
			return err
		}
		backoff = 0
		go s.ServeConn(nc)
	}
}

// ServeConn runs one connection on the calling goroutine until it closes
// (it starts one more goroutine, the writer). nc is closed on return.
func (s *Server) ServeConn(nc net.Conn) {
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	c.serve()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops the listeners and closes every connection with
// amqp:connection:forced, then waits until the connections have ended or
// ctx is done.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		_ = l.Close()
	}
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close(NewError(CondConnectionForced, "server shutting down"))
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
