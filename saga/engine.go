package saga

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/processor"
)

// NewProcessor returns a session processor that runs the saga on entity, a
// session-enabled queue or subscription. Timeouts are scheduled on
// Config.TimeoutsTo, or else on the entity's queue or topic.
func (sg *Saga[S]) NewProcessor(client *azservicebus.Client, entity processor.Entity, o *processor.SessionOptions) (*processor.SessionProcessor, error) {
	to := sg.cfg.TimeoutsTo
	if to == "" {
		to = entity.SendTarget()
	}
	return processor.NewSession(client, entity, sg.Handler(client, to), o)
}

// Handler returns the saga as a processor.SessionHandler, for a processor
// of one's own. It sends timeouts (and Context.Send messages) with client;
// timeouts go to timeoutsTo.
func (sg *Saga[S]) Handler(client *azservicebus.Client, timeoutsTo string) processor.SessionHandler {
	return func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		return sg.HandleMessage(ctx, client, timeoutsTo, s, m)
	}
}

// HandleMessage runs the saga on one message of session s. Its result is a
// processor's: nil to complete the message, an error to retry it, a
// processor.Permanent error to dead-letter it.
func (sg *Saga[S]) HandleMessage(ctx context.Context, client *azservicebus.Client, timeoutsTo string, s Session, m *azservicebus.ReceivedMessage) error {
	kind := sg.messageType(m)
	log := sg.log.With("saga_id", s.ID())
	rec, ok, err := sg.cfg.Store.Load(ctx, s, sg.cfg.Name)
	if err != nil {
		return fmt.Errorf("saga %s: loading %s: %w", sg.cfg.Name, s.ID(), err)
	}
	var env *envelope
	if ok {
		if env, err = sg.decode(rec.Data); err != nil {
			return fmt.Errorf("saga %s: decoding %s: %w", sg.cfg.Name, s.ID(), err)
		}
	}
	r := run[S]{sg: sg, client: client, to: timeoutsTo, s: s, log: log, prev: rec.Version}
	if kind == sg.cfg.TimeoutType {
		return r.timeout(ctx, env, m)
	}
	entry, found := sg.handlers[kind]
	if !found {
		log.Warn("message type without a handler", "type", kind, "message_id", m.MessageID)
		return processor.Permanent(fmt.Errorf("%w %q (message %s)", ErrNoHandler, kind, m.MessageID))
	}
	if env != nil && m.MessageID != "" && slices.Contains(env.Seen, m.MessageID) {
		log.Info("duplicate message ignored", "type", kind, "message_id", m.MessageID, "status", env.Status)
		return nil
	}
	if env != nil && env.Status.Finished() {
		return sg.missing(log, m, kind, "finished")
	}
	started := false
	if env == nil {
		if !entry.starts {
			return sg.missing(log, m, kind, "unknown")
		}
		started = true
		env = &envelope{Saga: sg.cfg.Name, ID: s.ID(), Status: StatusActive, Schema: sg.cfg.Version, Started: sg.cfg.Now(), Timeouts: map[string]pendingRef{}}
	}
	c, err := r.context(ctx, env, m)
	if err != nil {
		return err
	}
	if started && sg.cfg.Deadline > 0 {
		due := c.now.Add(sg.cfg.Deadline)
		env.Deadline = &due
		c.timeouts = append(c.timeouts, newTimeout{id: c.derive("deadline"), kind: kindDeadline, due: due})
	}
	if err := entry.fn(c, m); err != nil {
		return err
	}
	if started {
		log.Info("saga started", "type", kind, "message_id", m.MessageID)
	}
	log.Info("message handled", "type", kind, "message_id", m.MessageID)
	return r.commit(ctx, c)
}

// timeout handles a timeout message.
func (r *run[S]) timeout(ctx context.Context, env *envelope, m *azservicebus.ReceivedMessage) error {
	id, _ := m.ApplicationProperties[PropTimeoutID].(string)
	kind, _ := m.ApplicationProperties[PropTimeoutKind].(string)
	log := r.log.With("timeout_id", id, "kind", kind)
	if env == nil {
		log.Info("timeout for a missing saga discarded")
		return nil
	}
	ref, pending := env.Timeouts[id]
	if env.Status.Finished() {
		if pending && ref.Kind == kindCleanup {
			if err := r.sg.cfg.Store.Delete(ctx, r.s, r.sg.cfg.Name, r.prev); err != nil {
				return fmt.Errorf("saga %s: deleting %s: %w", r.sg.cfg.Name, r.s.ID(), err)
			}
			log.Info("finished saga deleted", "status", env.Status)
			return nil
		}
		log.Info("timeout after the saga finished discarded", "status", env.Status)
		return nil
	}
	if !pending {
		log.Info("stale timeout discarded")
		return nil
	}
	delete(env.Timeouts, id)
	c, err := r.context(ctx, env, m)
	if err != nil {
		return err
	}
	switch kind {
	case kindDeadline:
		log.Warn("saga deadline exceeded")
		c.Compensate(ErrDeadlineExceeded)
	default:
		log.Info("timeout received", "due", ref.Due)
		if r.sg.onTimeout != nil {
			if err := r.sg.onTimeout(c, Timeout{ID: id, Due: ref.Due, Payload: m.Body}); err != nil {
				return err
			}
		}
	}
	return r.commit(ctx, c)
}

// run is the handling of one message.
type run[S any] struct {
	sg     *Saga[S]
	client *azservicebus.Client
	to     string
	s      Session
	log    *slog.Logger
	prev   int64 // the version loaded (0: none)
}

func (r *run[S]) context(ctx context.Context, env *envelope, m *azservicebus.ReceivedMessage) (*Context[S], error) {
	state := new(S)
	if len(env.State) > 0 && string(env.State) != "null" {
		if err := json.Unmarshal(env.State, state); err != nil {
			return nil, processor.Permanent(fmt.Errorf("saga %s: decoding the state of %s: %w", r.sg.cfg.Name, env.ID, err))
		}
	}
	return &Context[S]{State: state, ctx: ctx, saga: r.sg, env: env, msg: m, log: r.log, now: r.sg.cfg.Now()}, nil
}

// commit carries out what the handler asked for, in crash-safe order:
// compensation, timeouts and sends, the state, cancellations.
func (r *run[S]) commit(ctx context.Context, c *Context[S]) error {
	sg, env := r.sg, c.env
	if c.finish == StatusCompensated && sg.compensate != nil {
		if err := sg.compensate(c, c.cause); err != nil {
			return err
		}
	}
	state, err := json.Marshal(c.State)
	if err != nil {
		return processor.Permanent(fmt.Errorf("saga %s: encoding the state of %s: %w", sg.cfg.Name, env.ID, err))
	}
	env.State = state
	if c.finish != "" {
		c.timeouts = nil
		for _, id := range slices.Sorted(maps.Keys(env.Timeouts)) {
			if !slices.Contains(c.cancels, id) {
				c.cancels = append(c.cancels, id)
			}
		}
		env.Status = c.finish
		if c.cause != nil {
			env.Cause = c.cause.Error()
		}
		if sg.cfg.Retention > 0 {
			c.timeouts = append(c.timeouts, newTimeout{id: c.derive("cleanup"), kind: kindCleanup, due: c.now.Add(sg.cfg.Retention)})
		}
	}
	if len(c.timeouts) > 0 {
		sender, err := sg.sender(r.client, r.to, env.ID)
		if err != nil {
			return err
		}
		for _, t := range c.timeouts {
			seq, err := sg.schedule(ctx, sender, env.ID, t)
			if err != nil {
				return fmt.Errorf("saga %s: scheduling a timeout of %s: %w", sg.cfg.Name, env.ID, err)
			}
			env.Timeouts[t.id] = pendingRef{Seq: seq, Due: t.due, Kind: t.kind}
			r.log.Info("timeout requested", "timeout_id", t.id, "kind", t.kind, "due", t.due, "seq", seq)
		}
	}
	for _, o := range c.sends {
		sender, err := sg.sender(r.client, o.to, env.ID)
		if err != nil {
			return err
		}
		if err := sender.SendMessage(ctx, o.m, nil); err != nil {
			return fmt.Errorf("saga %s: sending to %s for %s: %w", sg.cfg.Name, o.to, env.ID, err)
		}
		r.log.Info("message sent", "to", o.to, "message_id", *o.m.MessageID)
	}
	cancelled := map[string]pendingRef{}
	for _, id := range c.cancels {
		if ref, ok := env.Timeouts[id]; ok {
			cancelled[id] = ref
			delete(env.Timeouts, id)
		}
	}
	if c.msg.MessageID != "" {
		env.Seen = append(env.Seen, c.msg.MessageID)
	}
	if n := len(env.Seen) - sg.cfg.RememberMessages; n > 0 {
		env.Seen = slices.Delete(env.Seen, 0, n)
	}
	env.Updated = c.now
	env.Version = r.prev + 1
	if c.finish != "" && sg.cfg.Retention <= 0 {
		if r.prev > 0 {
			if err := sg.cfg.Store.Delete(ctx, r.s, sg.cfg.Name, r.prev); err != nil {
				return fmt.Errorf("saga %s: deleting %s: %w", sg.cfg.Name, env.ID, err)
			}
		}
	} else {
		data, err := json.Marshal(env)
		if err != nil {
			return err
		}
		rec := Record{Saga: sg.cfg.Name, ID: env.ID, Status: env.Status, Version: env.Version, Data: data, Updated: env.Updated}
		if err := sg.cfg.Store.Save(ctx, r.s, rec); err != nil {
			return fmt.Errorf("saga %s: saving %s: %w", sg.cfg.Name, env.ID, err)
		}
	}
	if len(cancelled) > 0 {
		sender, err := sg.sender(r.client, r.to, env.ID)
		if err == nil {
			for _, id := range slices.Sorted(maps.Keys(cancelled)) {
				if err := sender.CancelScheduledMessages(ctx, []int64{cancelled[id].Seq}, nil); err != nil {
					// Already delivered, most likely: it will be discarded on arrival.
					r.log.Info("timeout not cancelled; it will be discarded", "timeout_id", id, "seq", cancelled[id].Seq, "err", err)
					continue
				}
				r.log.Info("timeout cancelled", "timeout_id", id, "seq", cancelled[id].Seq)
			}
		}
	}
	switch c.finish {
	case StatusCompleted:
		r.log.Info("saga completed", "retained_for", sg.cfg.Retention)
	case StatusCompensated:
		r.log.Warn("saga compensated", "cause", env.Cause, "retained_for", sg.cfg.Retention)
	}
	return nil
}

// schedule schedules a timeout message and returns its sequence number.
func (sg *Saga[S]) schedule(ctx context.Context, sender *azservicebus.Sender, sessionID string, t newTimeout) (int64, error) {
	id, sid := t.id, sessionID
	m := &azservicebus.Message{
		MessageID: &id,
		SessionID: &sid,
		Body:      t.payload,
		ApplicationProperties: map[string]any{
			PropTimeoutID:   t.id,
			PropTimeoutKind: t.kind,
			PropSagaName:    sg.cfg.Name,
		},
	}
	if sg.cfg.TypeProperty != "" {
		m.ApplicationProperties[sg.cfg.TypeProperty] = sg.cfg.TimeoutType
	} else {
		subject := sg.cfg.TimeoutType
		m.Subject = &subject
	}
	seqs, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{m}, t.due, nil)
	if err != nil {
		return 0, err
	}
	if len(seqs) != 1 {
		return 0, fmt.Errorf("scheduling returned %d sequence numbers", len(seqs))
	}
	return seqs[0], nil
}

type senderKey struct {
	c  *azservicebus.Client
	to string
}

// senderPool is how many senders a saga keeps per client and destination.
// A sender's management requests (scheduling, cancelling) are answered one
// at a time, so sagas of many sessions spread theirs over several.
const senderPool = 32

// sender returns a sender to a queue or topic for the saga instance id;
// the senders are made once per client.
func (sg *Saga[S]) sender(c *azservicebus.Client, to, id string) (*azservicebus.Sender, error) {
	k := senderKey{c, to}
	v, ok := sg.senders.Load(k)
	if !ok {
		sg.sendersMu.Lock()
		if v, ok = sg.senders.Load(k); !ok {
			pool := make([]*azservicebus.Sender, senderPool)
			for i := range pool {
				s, err := c.NewSender(to, nil)
				if err != nil {
					sg.sendersMu.Unlock()
					return nil, err
				}
				pool[i] = s
			}
			v = pool
			sg.senders.Store(k, v)
		}
		sg.sendersMu.Unlock()
	}
	pool := v.([]*azservicebus.Sender)
	h := fnv.New32a()
	h.Write([]byte(id))
	return pool[h.Sum32()%senderPool], nil
}

func (sg *Saga[S]) messageType(m *azservicebus.ReceivedMessage) string {
	if sg.cfg.TypeProperty == "" {
		if m.Subject == nil {
			return ""
		}
		return *m.Subject
	}
	v, _ := m.ApplicationProperties[sg.cfg.TypeProperty].(string)
	return v
}

func (sg *Saga[S]) decode(data []byte) (*envelope, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, processor.Permanent(err)
	}
	if env.Schema > sg.cfg.Version {
		return nil, fmt.Errorf("the state has schema version %d, newer than this host's %d", env.Schema, sg.cfg.Version)
	}
	if env.Schema < sg.cfg.Version && sg.cfg.Migrate != nil {
		st, err := sg.cfg.Migrate(env.Schema, env.State)
		if err != nil {
			return nil, fmt.Errorf("migrating the state from schema version %d: %w", env.Schema, err)
		}
		env.State, env.Schema = st, sg.cfg.Version
	} else if env.Schema < sg.cfg.Version {
		env.Schema = sg.cfg.Version
	}
	if env.Timeouts == nil {
		env.Timeouts = map[string]pendingRef{}
	}
	return &env, nil
}

// missing applies the OnMissing policy.
func (sg *Saga[S]) missing(log *slog.Logger, m *azservicebus.ReceivedMessage, kind, why string) error {
	err := fmt.Errorf("%w: %s message %s (%s saga)", ErrNotFound, kind, m.MessageID, why)
	switch sg.cfg.OnMissing {
	case DeadLetter:
		log.Warn("message for a "+why+" saga dead-lettered", "type", kind, "message_id", m.MessageID)
		return processor.Permanent(err)
	case Retry:
		log.Info("message for a "+why+" saga retried", "type", kind, "message_id", m.MessageID, "delivery_count", m.DeliveryCount)
		return err
	}
	log.Info("message for a "+why+" saga discarded", "type", kind, "message_id", m.MessageID)
	return nil
}
