package schedule_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/schedule"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	controlQueue = "schedules"
	jobsQueue    = "jobs"
)

// env is a broker on a fake clock with a control queue and a target queue
// (without duplicate detection, so that every send the scheduler makes is
// seen), a client, and what the target received.
type env struct {
	t      testing.TB
	srv    *busbartest.Server
	client *azservicebus.Client
	got    *inbox
}

func newEnv(t testing.TB, start time.Time) *env {
	t.Helper()
	srv := busbartest.Start(t, busbartest.WithFakeClock(start), busbartest.WithoutHTTP(),
		busbartest.WithQueue(controlQueue, broker.QueueProperties{RequiresSession: true}),
		busbartest.WithQueue(jobsQueue, broker.QueueProperties{}))
	e := &env{t: t, srv: srv, client: busbartest.NewClient(t, srv.ConnectionString()), got: &inbox{byID: map[string]int{}}}
	e.got.collect(t, e.client, jobsQueue)
	return e
}

// scheduler returns a Scheduler on the control queue with the broker's
// clock (or clk), without running it.
func (e *env) scheduler(o *schedule.Options) *schedule.Scheduler {
	e.t.Helper()
	if o == nil {
		o = &schedule.Options{}
	}
	if o.Clock == nil {
		o.Clock = e.srv.Clock()
	}
	s, err := schedule.New(e.client, controlQueue, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// host runs a Scheduler as a host until the test ends, recording its
// events.
func (e *env) host(o *schedule.Options) (*schedule.Scheduler, *events) {
	e.t.Helper()
	ev := &events{}
	if o == nil {
		o = &schedule.Options{}
	}
	o.OnEvent = ev.add
	o.OnError = func(err error) { e.t.Logf("host error: %v", err) }
	s := e.scheduler(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
	return s, ev
}

func (e *env) put(s *schedule.Scheduler, d schedule.Definition) schedule.Info {
	e.t.Helper()
	info, _, err := s.Put(context.Background(), d)
	if err != nil {
		e.t.Fatalf("put %s: %v", d.Name, err)
	}
	return info
}

func (e *env) set(t time.Time) { e.srv.Clock().Set(t) }

// inbox receives the fired messages of a queue.
type inbox struct {
	mu   sync.Mutex
	msgs []*azservicebus.ReceivedMessage
	byID map[string]int
}

func (in *inbox) collect(t testing.TB, c *azservicebus.Client, queue string) {
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			msgs, err := r.ReceiveMessages(ctx, 100, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: 2 * time.Millisecond})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("receiving from %s: %v", queue, err)
			}
			in.mu.Lock()
			for _, m := range msgs {
				in.msgs = append(in.msgs, m)
				in.byID[m.MessageID]++
			}
			in.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = r.Close(context.Background())
	})
}

// firings returns the fired messages of schedule name, in arrival order.
func (in *inbox) firings(name string) []schedule.Firing {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []schedule.Firing
	for _, m := range in.msgs {
		if f, ok := schedule.ParseFiring(m); ok && f.Schedule == name {
			out = append(out, f)
		}
	}
	return out
}

func (in *inbox) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

func (in *inbox) all() []*azservicebus.ReceivedMessage {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.msgs)
}

// events records what a host reports.
type events struct {
	mu   sync.Mutex
	list []schedule.Event
}

func (ev *events) add(e schedule.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.list = append(ev.list, e)
}

func (ev *events) of(kind schedule.EventKind, name string) []schedule.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []schedule.Event
	for _, e := range ev.list {
		if e.Kind == kind && (name == "" || e.Schedule == name) {
			out = append(out, e)
		}
	}
	return out
}

// waitTick waits until the host has handled the wake-up of name for the
// firing at nominal, and returns the next nominal firing it scheduled.
func (ev *events) waitTick(t testing.TB, name string, nominal time.Time) time.Time {
	t.Helper()
	var next time.Time
	poll.Until(t, 0, "the wake-up of "+name+" at "+nominal.UTC().Format(time.RFC3339), func() bool {
		for _, e := range ev.of(schedule.EventTick, name) {
			if e.Nominal.Equal(nominal) {
				next = e.Next
				return true
			}
		}
		return false
	})
	return next
}

// offsetClock is a host clock that drifts: the fake clock plus an offset.
type offsetClock struct {
	*clock.Fake
	off time.Duration
}

func (c offsetClock) Now() time.Time { return c.Fake.Now().Add(c.off) }
