package broker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store/memstore"
)

// Every Broker method that takes a context honours it: called with a
// cancelled one, it returns the context's error (and, as the atomicity
// tests show for the mutating ones, applies nothing).
func TestEveryMethodTakingAContextHonoursIt(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	bv := reflect.ValueOf(e.b)
	bt := bv.Type()
	n := 0
	for i := range bt.NumMethod() {
		m := bt.Method(i)
		ft := m.Type // receiver first
		if ft.NumIn() < 2 || ft.In(1) != ctxType {
			continue
		}
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 2; j < ft.NumIn(); j++ {
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				break
			}
			args = append(args, reflect.Zero(ft.In(j)))
		}
		out := bv.Method(i).Call(args)
		var err error
		if last := out[len(out)-1]; last.Type() == errType {
			err, _ = last.Interface().(error)
		} else if p, ok := last.Interface().(*Pending); ok { // SendAsync
			_, err = p.Wait()
		} else {
			t.Fatalf("%s returns no error", m.Name)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", m.Name, err)
		}
		n++
	}
	if n < 40 {
		t.Fatalf("checked %d methods; expected every context-taking method (40 or more)", n)
	}
}

// cancellingStore cancels a context when a GetMany starts: the caller's
// context ends while its messages are being read.
type cancellingStore struct {
	*memstore.Store
	cancel atomic.Pointer[context.CancelFunc]
}

func (s *cancellingStore) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if c := s.cancel.Swap(nil); c != nil {
		(*c)()
	}
	return s.Store.GetMany(ctx, keys)
}

// A receive of deferred messages whose context ends while it reads them
// returns the context's error and receives nothing: the messages stay
// deferred, and a later call gets them.
func TestReceiveDeferredCancelledWhileReadingReceivesNothing(t *testing.T) {
	st := &cancellingStore{Store: memstore.New()}
	b, err := Open(context.Background(), st, Options{Clock: clock.NewFake(t0), Rand: seededRand{rand.NewChaCha8([32]byte{5})},
		Logger: slog.New(slog.DiscardHandler), CacheBytes: 1}) // nothing cached: the bodies are read
	must(t, err)
	t.Cleanup(func() { b.Close() })
	bg := context.Background()
	must(t, b.CreateQueue(bg, "q", QueueProperties{LockDuration: time.Minute}))
	must(t, b.Send(bg, "q", []*Message{msg("a"), msg("b")}))
	s := consumeInto(t, b, "q", "", PeekLock, 2)
	got := s.takeN(t, 2)
	must(t, b.Defer(bg, "q", nil, got[0].LockToken, got[1].LockToken))
	seqs := []int64{got[0].SequenceNumber, got[1].SequenceNumber}

	ctx, cancel := context.WithCancel(bg)
	st.cancel.Store(&cancel)
	if ms, err := b.ReceiveDeferred(ctx, "q", seqs, ReceiveAndDelete); !errors.Is(err, context.Canceled) || len(ms) != 0 {
		t.Fatalf("ReceiveDeferred cancelled while reading: %d messages, %v; want none, context.Canceled", len(ms), err)
	}
	qi, err := b.GetQueue(bg, "q")
	must(t, err)
	if qi.Runtime.DeferredMessageCount != 2 {
		t.Fatalf("after the cancelled receive: %+v, want 2 deferred", qi.Runtime)
	}
	ms, err := b.ReceiveDeferred(bg, "q", seqs, ReceiveAndDelete)
	must(t, err)
	wantBodies(t, ms, "a", "b")
}
