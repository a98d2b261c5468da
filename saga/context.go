package saga

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Timeout kinds.
const (
	kindTimeout  = "timeout"
	kindDeadline = "deadline"
	kindCleanup  = "cleanup"
)

// envelope is a stored instance: the saga's bookkeeping around the user's
// state. It is what Record.Data holds.
type envelope struct {
	Saga     string                `json:"saga"`
	ID       string                `json:"id"`
	Status   Status                `json:"status"`
	Version  int64                 `json:"version"`
	Schema   int                   `json:"schema"`
	Started  time.Time             `json:"started"`
	Updated  time.Time             `json:"updated"`
	Deadline *time.Time            `json:"deadline,omitempty"`
	Cause    string                `json:"cause,omitempty"`
	Timeouts map[string]pendingRef `json:"timeouts,omitempty"`
	Seen     []string              `json:"seen,omitempty"`
	State    json.RawMessage       `json:"state"`
}

// pendingRef is a scheduled timeout the saga still waits for.
type pendingRef struct {
	Seq  int64     `json:"seq"`
	Due  time.Time `json:"due"`
	Kind string    `json:"kind"`
}

// newTimeout is a timeout requested by a handler, not yet scheduled.
type newTimeout struct {
	id      string
	kind    string
	due     time.Time
	payload []byte
}

type outgoing struct {
	to string
	m  *azservicebus.Message
}

// Context is what a handler works with: the instance's state and the
// actions it may ask for. The actions happen after the handler returns
// nil; see the package documentation for their order.
type Context[S any] struct {
	// State is the instance's state; changes are saved when the handler
	// returns nil.
	State *S

	ctx      context.Context
	saga     *Saga[S]
	env      *envelope
	msg      *azservicebus.ReceivedMessage
	log      *slog.Logger
	now      time.Time
	ord      int
	timeouts []newTimeout
	cancels  []string
	sends    []outgoing
	finish   Status
	cause    error
}

// Context returns the context of the message's handling: cancelled when
// the session lock is lost or the processor stops hard.
func (c *Context[S]) Context() context.Context { return c.ctx }

// ID returns the instance id (the session id).
func (c *Context[S]) ID() string { return c.env.ID }

// Message returns the message being handled.
func (c *Context[S]) Message() *azservicebus.ReceivedMessage { return c.msg }

// Started returns when the instance was created.
func (c *Context[S]) Started() time.Time { return c.env.Started }

// Logger returns a logger carrying the saga's name and instance id.
func (c *Context[S]) Logger() *slog.Logger { return c.log }

// derive returns an id for the n-th thing this handling produces, the same
// when the same message is handled again after a crash.
func (c *Context[S]) derive(what string) string {
	c.ord++
	h := sha256.Sum256([]byte(c.saga.cfg.Name + "\x00" + c.env.ID + "\x00" + c.msg.MessageID + "\x00" + what + "\x00" + strconv.Itoa(c.ord)))
	return hex.EncodeToString(h[:12])
}

// RequestTimeout asks for a timeout message to come back to this saga
// after the given duration, carrying payload (encoded as JSON; nil for
// none). It returns the timeout's id, for CancelTimeout. The timeout is
// delivered to the OnTimeout handler unless it is cancelled or the saga has
// finished by then.
func (c *Context[S]) RequestTimeout(after time.Duration, payload any) (string, error) {
	var body []byte
	if payload != nil {
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return "", err
		}
	}
	id := c.derive("timeout")
	c.timeouts = append(c.timeouts, newTimeout{id: id, kind: kindTimeout, due: c.now.Add(after), payload: body})
	return id, nil
}

// CancelTimeout cancels a pending timeout: its scheduled message is
// cancelled by sequence number, and should it arrive anyway it is
// discarded. Unknown ids are ignored.
func (c *Context[S]) CancelTimeout(id string) {
	for i, t := range c.timeouts {
		if t.id == id {
			c.timeouts = slices.Delete(c.timeouts, i, i+1)
			return
		}
	}
	if _, ok := c.env.Timeouts[id]; ok {
		c.cancels = append(c.cancels, id)
	}
}

// PendingTimeouts returns the ids of the timeouts the saga waits for,
// including those requested by this handler, excluding those cancelled.
func (c *Context[S]) PendingTimeouts() []string {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(c.env.Timeouts)) {
		if c.env.Timeouts[id].Kind == kindTimeout && !slices.Contains(c.cancels, id) {
			ids = append(ids, id)
		}
	}
	for _, t := range c.timeouts {
		if t.kind == kindTimeout {
			ids = append(ids, t.id)
		}
	}
	return ids
}

// Send sends m to a queue or topic once the handler has returned nil. A
// message without a MessageID gets one derived from the incoming message,
// so that a re-send after a crash is the same message to duplicate
// detection.
func (c *Context[S]) Send(to string, m *azservicebus.Message) {
	if m.MessageID == nil {
		id := c.derive("send")
		m.MessageID = &id
	}
	c.sends = append(c.sends, outgoing{to: to, m: m})
}

// Complete finishes the saga successfully once the handler returns nil: its
// pending timeouts are cancelled and its state is cleared (or kept for
// Config.Retention).
func (c *Context[S]) Complete() {
	if c.finish == "" {
		c.finish = StatusCompleted
	}
}

// Compensate finishes the saga unsuccessfully: once the handler returns
// nil, the compensation handler runs with cause, then the saga finishes as
// with Complete, with status compensated.
func (c *Context[S]) Compensate(cause error) {
	if c.finish == "" {
		c.finish, c.cause = StatusCompensated, cause
	}
}

// Finishing reports whether Complete or Compensate has been called.
func (c *Context[S]) Finishing() bool { return c.finish != "" }
