package processor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
)

// Session is a session the SessionProcessor holds the lock of. It is valid
// until the processor releases the session, which it does after
// SessionIdleTimeout without a message.
type Session struct {
	r        *azservicebus.SessionReceiver
	released atomic.Bool
}

// Release asks the processor to release the session once the messages it
// is handling now are settled, without waiting SessionIdleTimeout: for a
// handler that knows the session has no more work (its last message).
func (s *Session) Release() { s.released.Store(true) }

// ID returns the session id.
func (s *Session) ID() string { return s.r.SessionID() }

// State returns the session state (nil when none is set).
func (s *Session) State(ctx context.Context) ([]byte, error) { return s.r.GetSessionState(ctx, nil) }

// SetState replaces the session state; nil clears it.
func (s *Session) SetState(ctx context.Context, state []byte) error {
	return s.r.SetSessionState(ctx, state, nil)
}

// LockedUntil returns when the session lock expires unless renewed.
func (s *Session) LockedUntil() time.Time { return s.r.LockedUntil() }

// Receiver returns the SDK's session receiver, for what Session does not
// wrap (deferral, peeking). Do not close it: the processor does.
func (s *Session) Receiver() *azservicebus.SessionReceiver { return s.r }

// SessionHandler handles one message of a session. Its return value is
// treated as a Handler's. ctx is cancelled when the session lock is lost or
// the processor is stopped hard.
type SessionHandler func(ctx context.Context, s *Session, m *azservicebus.ReceivedMessage) error

// SessionOptions configure a SessionProcessor. The zero value is usable.
type SessionOptions struct {
	// MaxConcurrentSessions is how many sessions are held at once
	// (default 8).
	MaxConcurrentSessions int
	// MaxConcurrentCallsPerSession is how many handlers run at once
	// within one session (default 1, which keeps the session's order).
	MaxConcurrentCallsPerSession int
	// SessionIdleTimeout is how long a session is held without a message
	// before it is released for another (default 1 minute).
	SessionIdleTimeout time.Duration
	// AcceptTimeout is how long one attempt to accept the next session
	// waits before trying again (default 1 minute).
	AcceptTimeout time.Duration
	// MaxAutoLockRenewal: a negative value turns session lock renewal off;
	// otherwise the session lock is renewed for as long as the session is
	// held.
	MaxAutoLockRenewal time.Duration
	// Retry decides between abandoning and dead-lettering failed messages.
	Retry RetryPolicy
	// OnError receives every failure the processor cannot return, each an
	// *Error. It must be safe for concurrent use.
	OnError func(error)
	// OnSessionOpen is called when a session is accepted, before its first
	// message is handled.
	OnSessionOpen func(ctx context.Context, s *Session)
	// OnSessionClose is called when a session is about to be released.
	OnSessionClose func(ctx context.Context, s *Session)
	// Logger logs the same failures (default: discarded).
	Logger *slog.Logger
	// Clock is the processor's time (default clock.Real()): session lock
	// expiries are read against its Now, and session lock renewal, the
	// retry backoff, SessionIdleTimeout and the pause after a failed accept
	// run on its timers. Tests on busbartest's fake clock pass srv.Clock().
	// AcceptTimeout and the deadlines on settling and closing bound the
	// SDK's network calls and stay on real time.
	Clock clock.Clock
}

// SessionProcessor accepts sessions of a session-enabled queue or
// subscription and runs a SessionHandler on their messages.
type SessionProcessor struct {
	client   *azservicebus.Client
	entity   Entity
	handler  SessionHandler
	sessions int
	calls    int
	idle     time.Duration
	accept   time.Duration
	onOpen   func(context.Context, *Session)
	onClose  func(context.Context, *Session)
	common
	life
}

// NewSession returns a SessionProcessor for entity; Run starts it.
func NewSession(client *azservicebus.Client, entity Entity, handler SessionHandler, o *SessionOptions) (*SessionProcessor, error) {
	if err := entity.validate(); err != nil {
		return nil, err
	}
	if client == nil || handler == nil {
		return nil, errors.New("processor: NewSession needs a client and a handler")
	}
	if o == nil {
		o = &SessionOptions{}
	}
	p := &SessionProcessor{
		client: client, entity: entity, handler: handler,
		sessions: 8,
		calls:    max(o.MaxConcurrentCallsPerSession, 1),
		idle:     o.SessionIdleTimeout,
		accept:   o.AcceptTimeout,
		onOpen:   o.OnSessionOpen,
		onClose:  o.OnSessionClose,
		common:   newCommon(o.MaxAutoLockRenewal, o.Retry, o.OnError, o.Logger, o.Clock),
		life:     newLife(),
	}
	if o.MaxConcurrentSessions > 0 {
		p.sessions = o.MaxConcurrentSessions
	}
	if p.idle <= 0 {
		p.idle = time.Minute
	}
	if p.accept <= 0 {
		p.accept = time.Minute
	}
	return p, nil
}

// Run accepts sessions and handles their messages until Close is called
// (it then returns nil once the handlers in flight are done and their
// sessions released) or ctx is cancelled (it cancels the handlers' contexts
// and returns ctx.Err()). It may be called once.
func (p *SessionProcessor) Run(ctx context.Context) error {
	recvCtx, hctx, end, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	var wg sync.WaitGroup
	for range p.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(recvCtx, hctx)
		}()
	}
	wg.Wait()
	return p.exitErr(ctx)
}

// Close stops accepting sessions and receiving, waits for the handlers in
// flight to finish and settle their messages and releases the sessions. If
// ctx ends first, it cancels the handlers' contexts, waits for Run to
// return and returns ctx.Err(). Calling Close before Run makes Run fail;
// calling it again is harmless.
func (p *SessionProcessor) Close(ctx context.Context) error { return p.life.close(ctx) }

func (p *SessionProcessor) acceptNext(ctx context.Context) (*azservicebus.SessionReceiver, error) {
	if p.entity.Queue != "" {
		return p.client.AcceptNextSessionForQueue(ctx, p.entity.Queue, nil)
	}
	return p.client.AcceptNextSessionForSubscription(ctx, p.entity.Topic, p.entity.Subscription, nil)
}

// work is one session slot: accept a session, serve it, release it, again.
func (p *SessionProcessor) work(recvCtx, hctx context.Context) {
	for recvCtx.Err() == nil {
		actx, cancel := context.WithTimeout(recvCtx, p.accept)
		r, err := p.acceptNext(actx)
		cancel()
		if err != nil {
			if recvCtx.Err() != nil {
				return
			}
			var sbErr *azservicebus.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout) {
				continue // no session was available in time
			}
			p.report(&Error{Op: "accept", Entity: p.entity.String(), Err: err})
			if !p.sleep(recvCtx, time.Second) {
				return
			}
			continue
		}
		p.serve(recvCtx, hctx, r)
	}
}

// serve handles a session's messages until it is idle, its lock is lost or
// the processor stops, then releases it.
func (p *SessionProcessor) serve(recvCtx, hctx context.Context, r *azservicebus.SessionReceiver) {
	s := &Session{r: r}
	sctx, cancel := context.WithCancel(hctx)
	defer cancel()
	at := Error{Entity: p.entity.String(), SessionID: r.SessionID()}
	stopRenew := p.keepRenewed(sctx, false, r.LockedUntil,
		func(ctx context.Context) error { return r.RenewSessionLock(ctx, nil) },
		func(err error) {
			cancel()
			e := at
			e.Op, e.Err = "renew", err
			p.report(&e)
		})
	if p.onOpen != nil {
		p.onOpen(sctx, s)
	}
	for recvCtx.Err() == nil && sctx.Err() == nil && !s.released.Load() {
		rctx, stop := context.WithCancel(recvCtx)
		idleTimer := p.clock.AfterFunc(p.idle, stop)
		unhook := context.AfterFunc(sctx, stop)
		msgs, err := r.ReceiveMessages(rctx, p.calls, nil)
		unhook()
		idleTimer.Stop()
		idle := rctx.Err() != nil
		stop()
		if err != nil {
			if !idle && sctx.Err() == nil {
				e := at
				e.Op, e.Err = "receive", err
				p.report(&e)
			}
			break
		}
		if len(msgs) == 0 {
			if idle {
				break
			}
			continue
		}
		p.handleAll(sctx, s, msgs, at)
	}
	if p.onClose != nil {
		p.onClose(sctx, s)
	}
	stopRenew()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(hctx), 10*time.Second)
	defer ccancel()
	_ = r.Close(cctx)
}

func (p *SessionProcessor) handleAll(ctx context.Context, s *Session, msgs []*azservicebus.ReceivedMessage, at Error) {
	one := func(m *azservicebus.ReceivedMessage) {
		a := at
		a.MessageID = m.MessageID
		p.process(ctx, s.r, m, a, func(ctx context.Context) error { return p.handler(ctx, s, m) }, nil)
	}
	if len(msgs) == 1 {
		one(msgs[0])
		return
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(m)
		}()
	}
	wg.Wait()
}
