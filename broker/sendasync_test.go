package broker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

// gatedStore holds the commit of one batch until released, as a slow fsync
// would.
type gatedStore struct {
	*memstore.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
	fail    error // the held commit's outcome, when not nil
}

func (g *gatedStore) Commit(ctx context.Context, b *store.Batch) error {
	g.mu.Lock()
	hold := g.armed
	g.armed = false
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		<-g.release
		if g.fail != nil {
			return g.fail
		}
	}
	return g.Store.Commit(ctx, b)
}

// arm holds the next commit.
func (g *gatedStore) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// openGated opens a broker on a gatedStore whose held commit fails with
// fail (nil: succeeds), on clk, with lock tokens from seed; it is closed
// when the test ends.
func openGated(t *testing.T, clk clock.Clock, seed byte, fail error) (*Broker, *gatedStore) {
	t.Helper()
	g := &gatedStore{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{}), fail: fail}
	b, err := Open(context.Background(), g, Options{Clock: clk, Rand: seededRand{rand.NewChaCha8([32]byte{seed})},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, g
}

// blockedIn reports whether some goroutine is blocked (on a channel, a
// lock, a WaitGroup) inside function fn, named as in a stack trace
// ("broker.(*Broker).prepareSend"): a test's way to know that a call it
// started waits where it should, without sleeping.
func blockedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		running := strings.Contains(header, "[running") || strings.Contains(header, "[runnable")
		if !running && strings.Contains(g, fn+"(") {
			return true
		}
	}
	return false
}

// entityRecords counts the records of entity id's data in st (messages,
// bodies, sequence marks, duplicate ids, session states).
func entityRecords(t *testing.T, st store.Store, id uint64) int {
	t.Helper()
	n := 0
	err := st.Scan(context.Background(), nil, nil, func(k, _ []byte) error {
		if c, eid := ClassifyKey(k); c == KeyEntityData && eid == id {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// consumeInto attaches a consumer of path (of session when not "") that
// delivers into a new sink, with credit.
func consumeInto(t *testing.T, b *Broker, path, session string, mode ReceiveMode, credit int) *sink {
	t.Helper()
	s := &sink{}
	opts := ConsumerOptions{Mode: mode, Deliver: s.deliver}
	var c *Consumer
	var err error
	if session != "" {
		c, err = b.AcceptSession(context.Background(), path, session, opts)
	} else {
		c, err = b.NewConsumer(context.Background(), path, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	c.AddCredit(credit)
	return s
}

// A producer's pipelined sends become available in the producer's order,
// even when a later one is durable first.
func TestSendAsyncPublishesInTheProducersOrder(t *testing.T) {
	b, g := openGated(t, clock.NewFake(t0), 2, nil)
	ctx := context.Background()
	if err := b.CreateQueue(ctx, "q", QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	s := consumeInto(t, b, "q", "", ReceiveAndDelete, 100)

	g.arm()
	var outcomes sync.Map
	first := b.SendAsync(ctx, "q", []*Message{msg("1"), msg("2")}, nil, func(seqs []int64, err error) { outcomes.Store("first", err) })
	<-g.entered // the first send's commit is held
	second := b.SendAsync(ctx, "q", []*Message{msg("3")}, first, func(seqs []int64, err error) { outcomes.Store("second", err) })
	// The second commit goes through, but its message waits for the first.
	poll.Until(t, 10*time.Second, "the second send durable", func() bool {
		n := 0
		_ = g.Store.Scan(ctx, []byte{kMessage}, []byte{kMessage + 1}, func(_, _ []byte) error { n++; return nil })
		return n == 1
	})
	if got := s.take(); len(got) != 0 {
		t.Fatalf("delivered %q before the producer's earlier send was durable", bodies(got))
	}
	if _, ok := outcomes.Load("second"); ok {
		t.Fatal("the second send was answered before the first")
	}
	close(g.release)
	seqs, err := second.Wait()
	if err != nil || len(seqs) != 1 || seqs[0] != 3 {
		t.Fatalf("second send: %v %v, want sequence number [3]", seqs, err)
	}
	if seqs, err := first.Wait(); err != nil || len(seqs) != 2 || seqs[0] != 1 {
		t.Fatalf("first send: %v %v", seqs, err)
	}
	poll.Until(t, 10*time.Second, "three deliveries", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.got) == 3
	})
	wantBodies(t, s.take(), "1", "2", "3")
	for _, k := range []string{"first", "second"} {
		if v, ok := outcomes.Load(k); !ok || v != nil {
			t.Fatalf("%s send's callback: called %v, err %v", k, ok, v)
		}
	}
}

// A failed send in a chain does not stall or reorder the rest, and
// changes nothing itself.
func TestSendAsyncChainSurvivesAFailedSend(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	var prev *Pending
	var all []*Pending
	for i := range 20 {
		m := msg(strconv.Itoa(i))
		if i == 7 {
			m.Properties = map[string]any{"bad": struct{}{}}
		}
		prev = e.b.SendAsync(e.ctx, "q", []*Message{m}, prev, nil)
		all = append(all, prev)
	}
	for i, p := range all {
		_, err := p.Wait()
		if (i == 7) != (err != nil) {
			t.Fatalf("send %d: %v", i, err)
		}
		if i == 7 && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("send 7: %v, want ErrInvalidArgument", err)
		}
	}
	var want []string
	for i := range 20 {
		if i != 7 {
			want = append(want, strconv.Itoa(i))
		}
	}
	wantBodies(t, e.receive("q", ReceiveAndDelete, 30), want...)
}
