package consistent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/processor"
)

// Handler handles one input message: from the state of the input's business
// id it computes the new state and the messages to publish. It must be
// deterministic: given the same state, input and Context values it returns
// the same state and messages, so it may take time, ids and random numbers
// from ctx only, never from the clock, uuid or math/rand packages. It must
// not publish or store anything itself. An error leaves the state unchanged,
// publishes nothing and is returned to the caller (the processor abandons
// the input; wrap it with processor.Permanent to dead-letter it).
//
// In the outbox variant (Options.Outbox) the handler need not be
// deterministic: it runs once per input whose version is stored.
type Handler[S any] func(ctx *Context, state S, msg *azservicebus.ReceivedMessage) (S, []*azservicebus.Message, error)

// Options configure a Runner. Store is required; everything else has a
// default.
type Options struct {
	// Store keeps the state streams.
	Store Store
	// Outbox selects the outbox variant: Store must be an OutboxStore; the
	// new state and the outputs are stored in one transaction, published,
	// then removed from the outbox; a duplicate input publishes what is left
	// in the outbox for it and does not run the handler.
	Outbox bool
	// BusinessID reads the business id of an input. By default it is the
	// application property IDProperty when that is set, else the session
	// id.
	BusinessID func(m *azservicebus.ReceivedMessage) (string, error)
	// IDProperty names a string application property holding the business
	// id (used when BusinessID is nil).
	IDProperty string
	// Destination is the queue or topic outputs are sent to, unless Route
	// is set.
	Destination string
	// Route picks each output's destination.
	Route func(m *azservicebus.Message) (string, error)
	// Clock is the time captured for Context.Now and stamped on versions
	// (default clock.Real()).
	Clock clock.Clock
	// Logger logs duplicates and conflicts (default: discarded).
	Logger *slog.Logger

	fault func(s step, index int) error // fault injection, for tests only (export_test.go)
}

// step names the points between the stages of handling one input, where
// tests inject faults.
type step int

// The steps of handling an input.
const (
	stepLoaded    step = iota // the stream is loaded; nothing stored or sent
	stepStored                // the new version is stored (or the input found to be a duplicate)
	stepPublished             // output index is published; the next ones are not
	stepDone                  // every output is published; the input is about to be completed
)

// ErrNoBusinessID is returned (wrapped with processor.Permanent) for an input
// the business id cannot be read from.
var ErrNoBusinessID = errors.New("consistent: the message has no business id")

// Runner runs a Handler for each input message it is given.
type Runner[S any] struct {
	client  *azservicebus.Client
	handler Handler[S]
	store   Store
	outbox  OutboxStore
	id      func(*azservicebus.ReceivedMessage) (string, error)
	route   func(*azservicebus.Message) (string, error)
	clock   clock.Clock
	log     *slog.Logger
	fault   func(step, int) error
	senders senders
}

// New returns a Runner of h. The client sends the outputs.
func New[S any](client *azservicebus.Client, h Handler[S], o *Options) (*Runner[S], error) {
	if o == nil || o.Store == nil {
		return nil, errors.New("consistent: Options.Store is required")
	}
	if client == nil || h == nil {
		return nil, errors.New("consistent: New needs a client and a handler")
	}
	r := &Runner[S]{client: client, handler: h, store: o.Store, id: o.BusinessID, route: o.Route,
		clock: o.Clock, log: o.Logger, fault: o.fault}
	r.senders.client = client
	if o.Outbox {
		ob, ok := o.Store.(OutboxStore)
		if !ok {
			return nil, fmt.Errorf("consistent: Options.Outbox needs an OutboxStore, %T is not one", o.Store)
		}
		r.outbox = ob
	}
	if r.id == nil {
		r.id = defaultBusinessID(o.IDProperty)
	}
	if r.route == nil {
		if o.Destination == "" {
			return nil, errors.New("consistent: Options.Destination or Options.Route is required")
		}
		dest := o.Destination
		r.route = func(*azservicebus.Message) (string, error) { return dest, nil }
	}
	if r.clock == nil {
		r.clock = clock.Real()
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.fault == nil {
		r.fault = func(step, int) error { return nil }
	}
	return r, nil
}

func defaultBusinessID(prop string) func(*azservicebus.ReceivedMessage) (string, error) {
	return func(m *azservicebus.ReceivedMessage) (string, error) {
		if prop != "" {
			if s, ok := m.ApplicationProperties[prop].(string); ok && s != "" {
				return s, nil
			}
			return "", fmt.Errorf("%w: no string property %q", ErrNoBusinessID, prop)
		}
		if m.SessionID != nil && *m.SessionID != "" {
			return *m.SessionID, nil
		}
		return "", fmt.Errorf("%w: no session id", ErrNoBusinessID)
	}
}

// Handle handles m, received without a session; it is a processor.Handler.
// It returns nil when m may be completed.
func (r *Runner[S]) Handle(ctx context.Context, m *azservicebus.ReceivedMessage) error {
	return r.HandleMessage(ctx, nil, m)
}

// HandleSession handles m, received on session s; it is a
// processor.SessionHandler.
func (r *Runner[S]) HandleSession(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
	return r.HandleMessage(ctx, s, m)
}

// HandleMessage handles m, received on session s (nil without sessions):
// load, run the handler, store, publish. It returns nil when m may be
// completed, and does not settle m.
func (r *Runner[S]) HandleMessage(ctx context.Context, s Session, m *azservicebus.ReceivedMessage) error {
	if m.MessageID == "" {
		return processor.Permanent(errors.New("consistent: the message has no MessageId"))
	}
	id, err := r.id(m)
	if err != nil {
		return processor.Permanent(err)
	}
	key := Key{ID: id, Session: s}
	ld, err := r.store.Load(ctx, key, m.MessageID)
	if err != nil {
		return fmt.Errorf("consistent: load %q: %w", id, err)
	}
	if err := r.fault(stepLoaded, 0); err != nil {
		return err
	}
	if ld.Match != nil && r.outbox != nil {
		return r.flushOutbox(ctx, key, m.MessageID)
	}
	var base []byte
	var captured Captured
	duplicate := ld.Match != nil
	if duplicate {
		if ld.Match.Number > 1 && ld.Base == nil {
			r.log.Warn("consistent: duplicate whose replay base is no longer kept; completing it without publishing",
				"business_id", id, "message_id", m.MessageID, "version", ld.Match.Number)
			return nil
		}
		if ld.Base != nil {
			base = ld.Base.State
		}
		if captured, err = decodeCaptured(ld.Match.Context); err != nil {
			return err
		}
		r.log.Debug("consistent: replaying a duplicate", "business_id", id, "message_id", m.MessageID, "version", ld.Match.Number)
	} else {
		base = ld.Latest.State
		if captured, err = newCaptured(r.clock.Now()); err != nil {
			return err
		}
	}
	var state S
	if len(base) > 0 {
		if err := json.Unmarshal(base, &state); err != nil {
			return processor.Permanent(fmt.Errorf("consistent: decode the state of %q: %w", id, err))
		}
	}
	next, msgs, err := r.handler(newContext(ctx, m.MessageID, captured, duplicate), state, m)
	if err != nil {
		return err
	}
	outs := make([]Outgoing, len(msgs))
	for i, om := range msgs {
		if om == nil {
			return processor.Permanent(fmt.Errorf("consistent: the handler returned a nil output %d", i))
		}
		if om.MessageID == nil {
			mid := OutputID(m.MessageID, i)
			om.MessageID = &mid
		}
		to, err := r.route(om)
		if err != nil {
			return err
		}
		outs[i] = Outgoing{BusinessID: id, InputID: m.MessageID, Index: i, To: to, msg: om}
	}
	if !duplicate {
		data, err := json.Marshal(next)
		if err != nil {
			return processor.Permanent(fmt.Errorf("consistent: encode the state of %q: %w", id, err))
		}
		v := Version{Number: ld.Latest.Number + 1, MessageID: m.MessageID, Context: captured.encode(), State: data, Stored: r.clock.Now()}
		if r.outbox != nil {
			for i := range outs {
				if outs[i].Message, err = EncodeMessage(outs[i].msg); err != nil {
					return processor.Permanent(err)
				}
			}
			outs, err = r.outbox.AppendWithOutbox(ctx, key, v, outs)
		} else {
			err = r.store.Append(ctx, key, v)
		}
		if err != nil {
			if errors.Is(err, ErrConflict) {
				r.log.Info("consistent: lost a race; publishing nothing", "business_id", id, "message_id", m.MessageID)
			}
			return fmt.Errorf("consistent: store version %d of %q: %w", v.Number, id, err)
		}
	}
	if err := r.fault(stepStored, 0); err != nil {
		return err
	}
	return r.publish(ctx, key, outs)
}

// publish sends outs in order, then removes them from the outbox (in the
// outbox variant).
func (r *Runner[S]) publish(ctx context.Context, key Key, outs []Outgoing) error {
	for i, o := range outs {
		if err := r.senders.send(ctx, o.To, o.msg); err != nil {
			return fmt.Errorf("consistent: publish output %d of %q to %s: %w", i, o.InputID, o.To, err)
		}
		if err := r.fault(stepPublished, i); err != nil {
			return err
		}
	}
	if r.outbox != nil && len(outs) > 0 {
		seqs := make([]int64, len(outs))
		for i, o := range outs {
			seqs[i] = o.Seq
		}
		if err := r.outbox.Sent(ctx, key, seqs); err != nil {
			return fmt.Errorf("consistent: clear the outbox of %q: %w", key.ID, err)
		}
	}
	return r.fault(stepDone, 0)
}

// flushOutbox publishes what the outbox still holds for a duplicate input.
func (r *Runner[S]) flushOutbox(ctx context.Context, key Key, inputID string) error {
	outs, err := r.outbox.Pending(ctx, key, inputID)
	if err != nil {
		return fmt.Errorf("consistent: read the outbox of %q: %w", key.ID, err)
	}
	for i := range outs {
		if outs[i].msg, err = DecodeMessage(outs[i].Message); err != nil {
			return processor.Permanent(err)
		}
	}
	if err := r.fault(stepStored, 0); err != nil {
		return err
	}
	return r.publish(ctx, key, outs)
}

// Close closes the senders the Runner opened.
func (r *Runner[S]) Close(ctx context.Context) error { return r.senders.close(ctx) }

// senders keeps one SDK sender per destination.
type senders struct {
	client *azservicebus.Client
	mu     sync.Mutex
	m      map[string]*azservicebus.Sender
}

func (s *senders) send(ctx context.Context, to string, m *azservicebus.Message) error {
	s.mu.Lock()
	snd, ok := s.m[to]
	if !ok {
		var err error
		if snd, err = s.client.NewSender(to, nil); err != nil {
			s.mu.Unlock()
			return err
		}
		if s.m == nil {
			s.m = map[string]*azservicebus.Sender{}
		}
		s.m[to] = snd
	}
	s.mu.Unlock()
	return snd.SendMessage(ctx, m, nil)
}

func (s *senders) close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for to, snd := range s.m {
		errs = append(errs, snd.Close(ctx))
		delete(s.m, to)
	}
	return errors.Join(errs...)
}
