package saga

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// MissingPolicy says what happens to a message for a saga instance that does
// not exist (and the message type does not start one) or has finished.
type MissingPolicy int

// The missing-instance policies.
const (
	// Discard completes the message and logs it (the default).
	Discard MissingPolicy = iota
	// DeadLetter dead-letters the message with ErrNotFound.
	DeadLetter
	// Retry abandons the message so it is delivered again, as when it
	// arrived before the message that starts the saga; the processor's
	// retry policy (or the entity's MaxDeliveryCount) ends the retries.
	Retry
)

// Errors a saga reports.
var (
	// ErrNotFound is the error of a message for a missing or finished
	// saga under the DeadLetter and Retry policies.
	ErrNotFound = errors.New("saga: no active saga instance for the message")
	// ErrDeadlineExceeded is the compensation cause when Config.Deadline
	// passes before the saga finishes.
	ErrDeadlineExceeded = errors.New("saga: deadline exceeded")
	// ErrNoHandler is returned (permanently: the message is
	// dead-lettered) for a message type the saga has no handler for.
	ErrNoHandler = errors.New("saga: no handler for the message type")
)

// Properties the saga sets on its timeout messages.
const (
	PropTimeoutID   = "SagaTimeoutId"   // the timeout's id
	PropTimeoutKind = "SagaTimeoutKind" // "timeout", "deadline" or "cleanup"
	PropSagaName    = "SagaName"        // Config.Name
)

// Config describes a saga.
type Config struct {
	// Name names the saga in its stored instances and logs (required).
	Name string
	// TypeProperty is the application property that holds a message's
	// type; empty reads the type from the message's Subject.
	TypeProperty string
	// TimeoutType is the message type of the saga's timeout messages
	// (default "Timeout"): a subscription's rules must let it through.
	TimeoutType string
	// TimeoutsTo is the queue or topic timeouts are scheduled on (default:
	// the queue, or topic, the saga's processor receives from).
	TimeoutsTo string
	// Store keeps the instances (default SessionStateStore).
	Store Store
	// Deadline, when positive, bounds a saga's life: that long after it
	// started, an unfinished saga is compensated with ErrDeadlineExceeded.
	Deadline time.Duration
	// Retention is how long a finished instance is kept, so duplicates of
	// its messages arriving late are recognised, before it is deleted by a
	// scheduled cleanup. Zero deletes it at once: Complete clears the
	// session state.
	Retention time.Duration
	// OnMissing is the policy for messages of missing or finished sagas.
	OnMissing MissingPolicy
	// RememberMessages is how many of the last handled message ids an
	// instance keeps to recognise redeliveries (default 32).
	RememberMessages int
	// Version is the schema version of the state struct (default 0).
	// Instances stored at an older version go through Migrate first.
	Version int
	// Migrate upgrades a stored state from an older schema version to
	// Version. Without it, older states are decoded as they are: fields
	// added since start at their zero values, removed ones are ignored.
	Migrate func(from int, state json.RawMessage) (json.RawMessage, error)
	// Logger receives a record of every transition (default: discarded).
	Logger *slog.Logger
	// Now is the clock timeouts and deadlines are computed from (default
	// time.Now; tests on a fake broker clock pass its Now).
	Now func() time.Time
}

// Handler handles a message of one type. The changes it makes to
// c.State are saved when it returns nil; an error leaves the saga as it was
// and the message is retried.
type Handler[S any] func(c *Context[S], m *azservicebus.ReceivedMessage) error

// TimeoutHandler handles a timeout the saga requested.
type TimeoutHandler[S any] func(c *Context[S], t Timeout) error

// CompensationHandler undoes what a saga did, when it is compensated. It
// may send messages through c; cause is the reason given to Compensate, or
// ErrDeadlineExceeded.
type CompensationHandler[S any] func(c *Context[S], cause error) error

// Timeout is a timeout message delivered to the saga.
type Timeout struct {
	ID      string          // the id RequestTimeout returned
	Due     time.Time       // when it was scheduled for
	Payload json.RawMessage // the payload given to RequestTimeout, as JSON
}

// Decode unmarshals the payload into v.
func (t Timeout) Decode(v any) error { return json.Unmarshal(t.Payload, v) }

type handlerEntry[S any] struct {
	fn     Handler[S]
	starts bool
}

// Saga is a declared saga: its configuration and handlers. Declare every
// handler before the saga runs.
type Saga[S any] struct {
	cfg        Config
	log        *slog.Logger
	handlers   map[string]handlerEntry[S]
	onTimeout  TimeoutHandler[S]
	compensate CompensationHandler[S]
	senders    sync.Map // client+entity -> *azservicebus.Sender
	sendersMu  sync.Mutex
}

// New declares a saga whose instances hold a state of type S (a struct
// that encoding/json can round-trip).
func New[S any](cfg Config) *Saga[S] {
	if cfg.Name == "" {
		panic("saga: Config.Name is required")
	}
	if cfg.TimeoutType == "" {
		cfg.TimeoutType = "Timeout"
	}
	if cfg.Store == nil {
		cfg.Store = SessionStateStore{}
	}
	if cfg.RememberMessages <= 0 {
		cfg.RememberMessages = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Saga[S]{cfg: cfg, log: log.With("saga", cfg.Name), handlers: map[string]handlerEntry[S]{}}
}

// Name returns the saga's name.
func (sg *Saga[S]) Name() string { return sg.cfg.Name }

// Starts registers the handler of a message type that may start a saga: a
// message of this type for a session without an instance creates one, with
// a zero state. Use it for every type that can arrive first.
func (sg *Saga[S]) Starts(messageType string, h Handler[S]) {
	sg.register(messageType, h, true)
}

// Handle registers the handler of a message type that needs a running
// instance; for a missing one, Config.OnMissing applies.
func (sg *Saga[S]) Handle(messageType string, h Handler[S]) {
	sg.register(messageType, h, false)
}

func (sg *Saga[S]) register(messageType string, h Handler[S], starts bool) {
	if messageType == sg.cfg.TimeoutType {
		panic(fmt.Sprintf("saga: %q is the timeout type; use OnTimeout", messageType))
	}
	if _, dup := sg.handlers[messageType]; dup {
		panic(fmt.Sprintf("saga: a handler for %q is already registered", messageType))
	}
	sg.handlers[messageType] = handlerEntry[S]{fn: h, starts: starts}
}

// OnTimeout registers the handler of the timeouts the saga requests.
func (sg *Saga[S]) OnTimeout(h TimeoutHandler[S]) { sg.onTimeout = h }

// OnCompensate registers the compensation handler.
func (sg *Saga[S]) OnCompensate(h CompensationHandler[S]) { sg.compensate = h }
