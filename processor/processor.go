package processor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
)

// Handler handles one message. Returning nil completes the message; an
// error abandons or dead-letters it according to the RetryPolicy. ctx is
// cancelled when the message lock is lost or the processor is stopped hard.
type Handler func(ctx context.Context, m *azservicebus.ReceivedMessage) error

// Options configure a Processor. The zero value is usable.
type Options struct {
	// MaxConcurrentCalls is how many handlers run at once (default 1).
	MaxConcurrentCalls int
	// MaxAutoLockRenewal bounds how long a message lock is renewed while
	// its handler runs (default 5 minutes; negative: never renew).
	MaxAutoLockRenewal time.Duration
	// Retry decides between abandoning and dead-lettering failed messages.
	Retry RetryPolicy
	// OnError receives every failure the processor cannot return: handler
	// errors, failed settlements, lost locks, receive errors. Each is an
	// *Error. It must be safe for concurrent use.
	OnError func(error)
	// Logger logs the same failures (default: discarded).
	Logger *slog.Logger
	// Clock is the processor's time (default clock.Real()): lock expiries
	// are read against its Now, and lock renewal, MaxAutoLockRenewal, the
	// retry backoff and the pause after a failed receive run on its timers.
	// Tests on busbartest's fake clock pass srv.Clock(), so that renewal
	// follows srv.Advance. Deadlines on the SDK's network calls (settling,
	// closing) stay on real time.
	Clock clock.Clock
}

// Processor receives messages from a queue or subscription without
// sessions and runs a Handler on each.
type Processor struct {
	client  *azservicebus.Client
	entity  Entity
	handler Handler
	calls   int
	common
	life
}

// New returns a Processor for entity; Run starts it.
func New(client *azservicebus.Client, entity Entity, handler Handler, o *Options) (*Processor, error) {
	if err := entity.validate(); err != nil {
		return nil, err
	}
	if client == nil || handler == nil {
		return nil, errors.New("processor: New needs a client and a handler")
	}
	if o == nil {
		o = &Options{}
	}
	p := &Processor{client: client, entity: entity, handler: handler, calls: max(o.MaxConcurrentCalls, 1),
		common: newCommon(o.MaxAutoLockRenewal, o.Retry, o.OnError, o.Logger, o.Clock), life: newLife()}
	return p, nil
}

func (p *Processor) newReceiver() (*azservicebus.Receiver, error) {
	if p.entity.Queue != "" {
		return p.client.NewReceiverForQueue(p.entity.Queue, nil)
	}
	return p.client.NewReceiverForSubscription(p.entity.Topic, p.entity.Subscription, nil)
}

// Run receives and handles messages until Close is called (it then returns
// nil once the handlers in flight are done) or ctx is cancelled (it cancels
// the handlers' contexts and returns ctx.Err()). It may be called once.
func (p *Processor) Run(ctx context.Context) error {
	recvCtx, hctx, end, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	r, err := p.newReceiver()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.Close(cctx)
	}()
	sem := make(chan struct{}, p.calls)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case sem <- struct{}{}:
		case <-recvCtx.Done():
			return p.exitErr(ctx)
		}
		n := 1
		for n < p.calls {
			select {
			case sem <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		msgs, err := r.ReceiveMessages(recvCtx, n, nil)
		for range n - len(msgs) {
			<-sem
		}
		if err != nil {
			if recvCtx.Err() != nil {
				return p.exitErr(ctx)
			}
			p.report(&Error{Op: "receive", Entity: p.entity.String(), Err: err})
			if !p.sleep(recvCtx, time.Second) {
				return p.exitErr(ctx)
			}
			continue
		}
		for _, m := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				at := Error{Entity: p.entity.String(), MessageID: m.MessageID}
				p.process(hctx, r, m, at, func(ctx context.Context) error { return p.handler(ctx, m) },
					func(ctx context.Context, lost func(error)) func() {
						return p.keepRenewed(ctx, true, func() time.Time { return lockedUntil(m) },
							func(ctx context.Context) error { return r.RenewMessageLock(ctx, m, nil) }, lost)
					})
			}()
		}
	}
}

// Close stops receiving and waits for the handlers in flight to finish and
// settle their messages. If ctx ends first, it cancels the handlers'
// contexts, waits for Run to return and returns ctx.Err(). Calling Close
// before Run makes Run fail; calling it again is harmless.
func (p *Processor) Close(ctx context.Context) error { return p.life.close(ctx) }

func lockedUntil(m *azservicebus.ReceivedMessage) time.Time {
	if m.LockedUntil == nil {
		return time.Time{}
	}
	return *m.LockedUntil
}

// life is the start/stop machinery both processors share.
type life struct {
	mu      sync.Mutex
	started bool
	quit    chan struct{} // closed by Close: stop receiving
	kill    chan struct{} // closed when Close's ctx expires: cancel handlers
	done    chan struct{} // closed when Run returns
	once    sync.Once
	killed  sync.Once
}

func newLife() life {
	return life{quit: make(chan struct{}), kill: make(chan struct{}), done: make(chan struct{})}
}

// begin marks the processor running and derives the receive context
// (cancelled by Close or ctx) and the handler context (cancelled by ctx or
// a Close whose own context expired).
func (l *life) begin(ctx context.Context) (recvCtx, handlerCtx context.Context, end func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return nil, nil, nil, errors.New("processor: Run called twice")
	}
	select {
	case <-l.quit:
		return nil, nil, nil, errors.New("processor: closed")
	default:
	}
	l.started = true
	recvCtx, stopRecv := context.WithCancel(ctx)
	handlerCtx, stopHandlers := context.WithCancel(ctx)
	watch := make(chan struct{})
	go func() {
		select {
		case <-l.quit:
			stopRecv()
		case <-watch:
		}
		select {
		case <-l.kill:
			stopHandlers()
		case <-watch:
		}
	}()
	return recvCtx, handlerCtx, func() {
		close(watch)
		stopRecv()
		stopHandlers()
		close(l.done)
	}, nil
}

func (l *life) exitErr(ctx context.Context) error {
	return ctx.Err()
}

// close stops receiving and waits for Run to return; see Processor.Close.
func (l *life) close(ctx context.Context) error {
	l.once.Do(func() { close(l.quit) })
	l.mu.Lock()
	started := l.started
	l.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		l.killed.Do(func() { close(l.kill) })
		<-l.done
		return ctx.Err()
	}
}
