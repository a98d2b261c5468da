package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store/memstore"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a broker on a memory store with a fake clock and a seeded random
// source.
type env struct {
	t   *testing.T
	ctx context.Context
	st  *memstore.Store
	clk *clock.Fake
	b   *Broker

	window int // Options.PageWindow (0: the default)
}

type seededRand struct{ r *rand.ChaCha8 }

func (s seededRand) Read(p []byte) (int, error) { return s.r.Read(p) }

func newEnv(t *testing.T) *env {
	t.Helper()
	return newPagedEnv(t, 0)
}

// newPagedEnv is newEnv with a page window (pager.go).
func newPagedEnv(t *testing.T, window int) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), st: memstore.New(), clk: clock.NewFake(t0), window: window}
	e.open()
	return e
}

func (e *env) open() {
	e.t.Helper()
	b, err := Open(e.ctx, e.st, Options{Clock: e.clk, Rand: seededRand{rand.NewChaCha8([32]byte{1})}, Logger: slog.New(slog.DiscardHandler), PageWindow: e.window})
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.b = b
	e.t.Cleanup(func() { b.Close() })
	e.checkOnCleanup(b)
}

// restart closes the broker and opens a new one over the same data.
func (e *env) restart() {
	e.t.Helper()
	e.b.Close()
	e.st = e.st.Reopen()
	e.open()
}

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) queue(name string, p QueueProperties) {
	e.t.Helper()
	e.must(e.b.CreateQueue(e.ctx, name, p))
}

func msg(body string) *Message { return &Message{Body: []byte(body)} }

func (e *env) send(path string, ms ...*Message) {
	e.t.Helper()
	e.must(e.b.Send(e.ctx, path, ms))
}

// sink collects deliveries of a consumer.
type sink struct {
	mu  sync.Mutex
	got []*Message
}

func (s *sink) deliver(m *Message) {
	s.mu.Lock()
	s.got = append(s.got, m)
	s.mu.Unlock()
}

func (s *sink) take() []*Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

// takeN takes deliveries until there are at least n, failing the test
// after 10 s.
func (s *sink) takeN(t *testing.T, n int) []*Message {
	t.Helper()
	var got []*Message
	poll.Until(t, 10*time.Second, fmt.Sprintf("%d deliveries", n), func() bool {
		got = append(got, s.take()...)
		return len(got) >= n
	})
	return got
}

func (e *env) consumer(path string, mode ReceiveMode) (*Consumer, *sink) {
	e.t.Helper()
	s := &sink{}
	c, err := e.b.NewConsumer(e.ctx, path, ConsumerOptions{Mode: mode, Deliver: s.deliver})
	e.must(err)
	return c, s
}

// receive takes up to n messages now available (peek-lock or r&d).
func (e *env) receive(path string, mode ReceiveMode, n int) []*Message {
	e.t.Helper()
	c, s := e.consumer(path, mode)
	c.AddCredit(n)
	c.Drain()
	c.Close()
	return s.take()
}

func bodies(ms []*Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

func wantBodies(t *testing.T, ms []*Message, want ...string) {
	t.Helper()
	got := bodies(ms)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bodies = %q, want %q", got, want)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func (e *env) info(name string) RuntimeInfo {
	e.t.Helper()
	qi, err := e.b.GetQueue(e.ctx, name)
	e.must(err)
	return qi.Runtime
}

var _ io.Reader = seededRand{} // seededRand is an Options.Rand
