package consistent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/consistent/consistentpg"
	"github.com/busbar-io/busbar/consistent/consistenttest"
)

var epoch = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// lockDuration is the input queue's lock duration: a crashed host's
// message (or session) is delivered again once the fake clock passes it.
const lockDuration = 30 * time.Second

// mode is a store and variant under test.
type mode string

const (
	onPostgres mode = "postgres"     // consistentpg, inputs without sessions
	onSession  mode = "sessionstate" // SessionStateStore, inputs in sessions
	onOutbox   mode = "outbox"       // consistentpg's outbox variant
)

var modes = []mode{onPostgres, onSession, onOutbox}

// env is a broker on a fake clock with an input queue "in" and an output
// queue "out", and a store.
type env struct {
	t      *testing.T
	mode   mode
	srv    *busbartest.Server
	client *azservicebus.Client
	store  consistent.Store
	pg     *consistentpg.Store
}

func newEnv(t *testing.T, m mode, dedup bool) *env {
	t.Helper()
	return newEnvRetaining(t, m, dedup, consistent.Retention{})
}

func newEnvRetaining(t *testing.T, m mode, dedup bool, r consistent.Retention) *env {
	t.Helper()
	e := &env{t: t, mode: m}
	if m != onSession {
		e.pg, _ = consistenttest.PostgresStore(t, consistentpg.Options{Retention: r})
		e.store = e.pg
	} else {
		e.store = consistent.SessionStateStore{Retention: r}
	}
	e.srv = busbartest.Start(t, busbartest.WithFakeClock(epoch),
		busbartest.WithQueue("in", broker.QueueProperties{RequiresSession: m == onSession, LockDuration: lockDuration, MaxDeliveryCount: 100}),
		busbartest.WithQueue("out", broker.QueueProperties{RequiresDuplicateDetection: dedup, DuplicateDetectionHistoryTimeWindow: time.Hour}))
	e.client = busbartest.NewClient(t, e.srv.ConnectionString())
	return e
}

// tally is the state of the test handler: how many inputs it handled.
type tally struct {
	N int `json:"n"`
}

// tallyHandler publishes outputs messages per input, whose bodies depend
// on everything the Context offers and whose property "n" is the state
// before the input, and counts the input.
func tallyHandler(outputs int) consistent.Handler[tally] {
	return func(c *consistent.Context, s tally, m *azservicebus.ReceivedMessage) (tally, []*azservicebus.Message, error) {
		var outs []*azservicebus.Message
		for i := range outputs {
			outs = append(outs, &azservicebus.Message{
				Body: fmt.Appendf(nil, "%s#%d n=%d id=%s r=%d at=%s", m.MessageID, i, s.N, c.NewID(), c.Random().IntN(1<<30),
					c.Now().Format(time.RFC3339Nano)),
				ApplicationProperties: map[string]any{"n": int64(s.N), "input": m.MessageID, "i": int64(i)},
			})
		}
		s.N++
		return s, outs, nil
	}
}

func (e *env) runner(h consistent.Handler[tally], fault func(consistent.Step, int) error) *consistent.Runner[tally] {
	e.t.Helper()
	o := &consistent.Options{Store: e.store, Outbox: e.mode == onOutbox, Destination: "out", Clock: e.srv.Clock()}
	if e.mode != onSession {
		o.IDProperty = "game"
	}
	if fault != nil {
		consistent.WithFault(o, fault)
	}
	r, err := consistent.New(e.client, h, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// send sends inputs of game with the given MessageIds.
func (e *env) send(game string, ids ...string) {
	e.t.Helper()
	s, err := e.client.NewSender("in", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, id := range ids {
		m := &azservicebus.Message{MessageID: &id, Body: []byte(id), ApplicationProperties: map[string]any{"game": game}}
		if e.mode == onSession {
			m.SessionID = &game
		}
		if err := s.SendMessage(ctx(e.t), m, nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// host receives inputs of one game as a host process would, with the SDK's
// receivers, and settles them itself.
type host struct {
	e    *env
	game string
	recv *azservicebus.Receiver
	sess *azservicebus.SessionReceiver
}

func (e *env) host(game string) *host { return &host{e: e, game: game} }

func (h *host) receive() *azservicebus.ReceivedMessage {
	t := h.e.t
	t.Helper()
	var err error
	if h.e.mode == onSession && h.sess == nil {
		if h.sess, err = h.e.client.AcceptSessionForQueue(ctx(t), "in", h.game, nil); err != nil {
			t.Fatal(err)
		}
	}
	if h.e.mode != onSession && h.recv == nil {
		if h.recv, err = h.e.client.NewReceiverForQueue("in", nil); err != nil {
			t.Fatal(err)
		}
	}
	var ms []*azservicebus.ReceivedMessage
	if h.sess != nil {
		ms, err = h.sess.ReceiveMessages(ctx(t), 1, nil)
	} else {
		ms, err = h.recv.ReceiveMessages(ctx(t), 1, nil)
	}
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %d messages, %v", len(ms), err)
	}
	return ms[0]
}

func (h *host) session() consistent.Session {
	if h.sess == nil {
		return nil
	}
	return sessionOf{h.sess}
}

func (h *host) complete(m *azservicebus.ReceivedMessage) {
	h.e.t.Helper()
	var err error
	if h.sess != nil {
		err = h.sess.CompleteMessage(ctx(h.e.t), m, nil)
	} else {
		err = h.recv.CompleteMessage(ctx(h.e.t), m, nil)
	}
	if err != nil {
		h.e.t.Fatal(err)
	}
}

// handle receives one input, runs r on it and completes it unless r
// failed; it returns r's error.
func (h *host) handle(r *consistent.Runner[tally]) error {
	m := h.receive()
	err := r.HandleMessage(context.Background(), h.session(), m)
	if err == nil {
		h.complete(m)
	}
	return err
}

// crash is the host dying: it settles nothing, the lock expires, and its
// receivers are gone.
func (h *host) crash() {
	h.e.srv.Advance(lockDuration + time.Second)
	h.reset()
}

// reset closes the host's receivers: the next receive opens new ones.
func (h *host) reset() {
	if h.sess != nil {
		_ = h.sess.Close(context.Background())
		h.sess = nil
	}
	if h.recv != nil {
		_ = h.recv.Close(context.Background())
		h.recv = nil
	}
}

// state loads the state of game as a new input would see it.
func (h *host) state() tally {
	h.e.t.Helper()
	if h.e.mode == onSession && h.sess == nil {
		var err error
		if h.sess, err = h.e.client.AcceptSessionForQueue(ctx(h.e.t), "in", h.game, nil); err != nil {
			h.e.t.Fatal(err)
		}
	}
	ld, err := h.e.store.Load(context.Background(), consistent.Key{ID: h.game, Session: h.session()}, "no-such-input")
	if err != nil {
		h.e.t.Fatal(err)
	}
	var s tally
	if err := json.Unmarshal(ld.Latest.State, &s); err != nil {
		h.e.t.Fatalf("state %q: %v", ld.Latest.State, err)
	}
	return s
}

// output is a published message as the destination received it.
type output struct {
	ID, Body, Props string
}

// published peeks every message in "out".
func (e *env) published() []output {
	e.t.Helper()
	r, err := e.client.NewReceiverForQueue("out", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
	var all []output
	for {
		ms, err := r.PeekMessages(ctx(e.t), 100, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ms) == 0 {
			return all
		}
		for _, m := range ms {
			var props []string
			for _, k := range slices.Sorted(maps.Keys(m.ApplicationProperties)) {
				props = append(props, fmt.Sprintf("%s=%v(%T)", k, m.ApplicationProperties[k], m.ApplicationProperties[k]))
			}
			all = append(all, output{ID: m.MessageID, Body: string(m.Body), Props: strings.Join(props, ",")})
		}
	}
}

// expect asserts that "out" holds exactly the outputs of inputs (in the
// order they were handled, outputs per input): output i of input k has the
// MessageId consistent.OutputID(input, i), property n = k and appears
// copies(k, i) times, every copy identical.
func (e *env) expect(inputs []string, outputs int, copies func(k, i int) int) {
	e.t.Helper()
	got := map[string][]output{}
	for _, o := range e.published() {
		got[o.ID] = append(got[o.ID], o)
	}
	for k, in := range inputs {
		for i := range outputs {
			id := consistent.OutputID(in, i)
			os := got[id]
			if len(os) != copies(k, i) {
				e.t.Errorf("output %d of %s (input %d): published %d times, want %d", i, in, k, len(os), copies(k, i))
			}
			wantProps := fmt.Sprintf("i=%d(int64),input=%s(string),n=%d(int64)", i, in, k)
			for _, o := range os {
				if o != os[0] {
					e.t.Errorf("output %d of %s: copies differ:\n%+v\n%+v", i, in, os[0], o)
				}
				if o.Props != wantProps || !strings.HasPrefix(o.Body, fmt.Sprintf("%s#%d n=%d ", in, i, k)) {
					e.t.Errorf("output %d of %s = %+v, want properties %s", i, in, o, wantProps)
				}
			}
			delete(got, id)
		}
	}
	for id, os := range got {
		e.t.Errorf("unexpected (ghost) output %s: %+v", id, os)
	}
}

func once(int, int) int { return 1 }
