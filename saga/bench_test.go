package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/saga"
)

// The benchmarks run the article's saga, b.N instances at once: each gets
// PaymentAccepted (which requests a 5-second timeout) and ItemShipped, then
// the timeout, which completes it. Run them with -benchtime=10000x for
// 10,000 concurrent sagas; they report sagas completed per second.
//
// BenchmarkOrderSagaToolkit runs it with this package; BenchmarkOrderSagaSDK
// with hand-written SDK code doing the same work (session state as JSON,
// scheduled timeouts, completion), on the same number of sessions and
// senders, so the difference is the toolkit's overhead.

const benchSessions = 128

type benchState struct {
	Paid, Shipped bool
}

func benchSaga(done func(), now func() time.Time) *saga.Saga[benchState] {
	sg := saga.New[benchState](saga.Config{Name: "bench", TypeProperty: "MessageType", Now: now})
	first := func(c *saga.Context[benchState]) error {
		if len(c.PendingTimeouts()) == 0 {
			_, err := c.RequestTimeout(5*time.Second, nil)
			return err
		}
		return nil
	}
	sg.Starts("PaymentAccepted", func(c *saga.Context[benchState], m *azservicebus.ReceivedMessage) error {
		c.State.Paid = true
		return first(c)
	})
	sg.Starts("ItemShipped", func(c *saga.Context[benchState], m *azservicebus.ReceivedMessage) error {
		c.State.Shipped = true
		return first(c)
	})
	sg.OnTimeout(func(c *saga.Context[benchState], t saga.Timeout) error {
		if c.State.Paid && c.State.Shipped {
			c.Complete()
			done()
			return nil
		}
		return errors.New("bench: a saga timed out incomplete")
	})
	return sg
}

// runBench publishes b.N sagas' messages, starts the host, waits for every
// first-round message to be handled, fires the timeouts and waits for the
// completions.
func runBench(b *testing.B, start func(c *azservicebus.Client, now func() time.Time, handled, completed *atomic.Int64) (stop func())) {
	srv := orchestration(b)
	c := busbartest.NewClient(b, srv.ConnectionString())
	publishBatches(b, c, sagaMessages(b.N))
	var handled, completed atomic.Int64
	b.ResetTimer()
	t0 := time.Now()
	stop := start(c, srv.Clock().Now, &handled, &completed)
	within(b, 10*time.Minute, "the first messages", func() bool { return handled.Load() == int64(2*b.N) })
	srv.Advance(5 * time.Second)
	within(b, 10*time.Minute, "the completions", func() bool { return completed.Load() == int64(b.N) })
	elapsed := time.Since(t0)
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sagas/s")
}

func BenchmarkOrderSagaToolkit(b *testing.B) {
	runBench(b, func(c *azservicebus.Client, now func() time.Time, handled, completed *atomic.Int64) func() {
		sg := benchSaga(func() { completed.Add(1) }, now)
		h := sg.Handler(c, "orchestration")
		p, err := processor.NewSession(c, processor.Subscription("orchestration", "orchestrator"),
			func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
				err := h(ctx, s, m)
				if err == nil && m.ApplicationProperties["MessageType"] != "Timeout" {
					handled.Add(1)
				}
				return err
			}, &processor.SessionOptions{MaxConcurrentSessions: benchSessions, SessionIdleTimeout: 20 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = p.Run(context.Background()) }()
		return func() { _ = p.Close(context.Background()) }
	})
}

// BenchmarkOrderSagaSDK is the same saga written against the SDK alone.
func BenchmarkOrderSagaSDK(b *testing.B) {
	runBench(b, func(c *azservicebus.Client, now func() time.Time, handled, completed *atomic.Int64) func() {
		senders := make([]*azservicebus.Sender, 32)
		for i := range senders {
			s, err := c.NewSender("orchestration", nil)
			if err != nil {
				b.Fatal(err)
			}
			senders[i] = s
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range benchSessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					actx, acancel := context.WithTimeout(ctx, time.Minute)
					r, err := c.AcceptNextSessionForSubscription(actx, "orchestration", "orchestrator", nil)
					acancel()
					if err != nil {
						continue
					}
					h := fnv.New32a()
					h.Write([]byte(r.SessionID()))
					sender := senders[h.Sum32()%uint32(len(senders))]
					for ctx.Err() == nil {
						rctx, rcancel := context.WithTimeout(ctx, 20*time.Millisecond)
						msgs, err := r.ReceiveMessages(rctx, 1, nil)
						rcancel()
						if err != nil || len(msgs) == 0 {
							break
						}
						if err := handSaga(ctx, r, sender, msgs[0], now, handled, completed); err != nil {
							_ = r.AbandonMessage(ctx, msgs[0], nil)
							continue
						}
						_ = r.CompleteMessage(ctx, msgs[0], nil)
					}
					_ = r.Close(context.Background())
				}
			}()
		}
		return func() { cancel(); wg.Wait() }
	})
}

// handSaga is the article's handler, by hand: read the state, act on the
// message type, schedule the timeout, write the state.
func handSaga(ctx context.Context, r *azservicebus.SessionReceiver, sender *azservicebus.Sender, m *azservicebus.ReceivedMessage,
	now func() time.Time, handled, completed *atomic.Int64) error {
	raw, err := r.GetSessionState(ctx, nil)
	if err != nil {
		return err
	}
	var st struct {
		benchState
		Timeout int64
	}
	if raw != nil {
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
	}
	switch m.ApplicationProperties["MessageType"] {
	case "PaymentAccepted", "ItemShipped":
		if m.ApplicationProperties["MessageType"] == "PaymentAccepted" {
			st.Paid = true
		} else {
			st.Shipped = true
		}
		if st.Timeout == 0 {
			sid := r.SessionID()
			seqs, err := sender.ScheduleMessages(ctx, []*azservicebus.Message{{SessionID: &sid,
				ApplicationProperties: map[string]any{"MessageType": "Timeout"}}}, now().Add(5*time.Second), nil)
			if err != nil {
				return err
			}
			st.Timeout = seqs[0]
		}
		data, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if err := r.SetSessionState(ctx, data, nil); err != nil {
			return err
		}
		handled.Add(1)
	case "Timeout":
		if raw == nil {
			return nil // finished: discard
		}
		if !st.Paid || !st.Shipped {
			return fmt.Errorf("saga %s timed out incomplete", r.SessionID())
		}
		if err := r.SetSessionState(ctx, nil, nil); err != nil {
			return err
		}
		completed.Add(1)
	}
	return nil
}
