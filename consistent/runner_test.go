package consistent_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/consistent"
)

var errCrash = errors.New("injected crash")

// TestDuplicates: an input re-sent by its sender and an input redelivered
// after its host died before completing it re-publish exactly the same
// outputs and change no state, on every store; with duplicate detection on
// the destination, each output is there once.
func TestDuplicates(t *testing.T) {
	for _, m := range modes {
		for _, dedup := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dedup=%v", m, dedup), func(t *testing.T) {
				e := newEnv(t, m, dedup)
				crashAfterC := true
				r := e.runner(tallyHandler(2), func(step consistent.Step, _ int) error {
					if step == consistent.StepDone && crashAfterC {
						crashAfterC = false
						return errCrash
					}
					return nil
				})
				h := e.host("g1")
				e.send("g1", "a", "b", "a", "c")
				crashAfterC = false
				for range 3 { // a, b, a again
					if err := h.handle(r); err != nil {
						t.Fatal(err)
					}
				}
				crashAfterC = true
				if err := h.handle(r); !errors.Is(err, errCrash) { // c, not completed
					t.Fatalf("c: %v", err)
				}
				h.crash()
				if err := h.handle(r); err != nil { // c again
					t.Fatal(err)
				}
				if got := h.state(); got.N != 3 {
					t.Fatalf("state %+v, want 3 inputs counted", got)
				}
				copies := func(k, i int) int {
					if dedup || k == 1 || m == onOutbox {
						// The outbox variant does not run the handler for a
						// duplicate; it publishes what its outbox still
						// holds, and both a and c emptied it.
						return 1
					}
					return 2
				}
				e.expect([]string{"a", "b", "c"}, 2, copies)
			})
		}
	}
}

// TestFaultInjection kills the host at every step of handling the second of
// three inputs, lets the lock expire and the input be redelivered, and
// asserts the final state and the exact multiset of published messages,
// with and without duplicate detection on the destination.
func TestFaultInjection(t *testing.T) {
	const outputs = 3
	type fault struct {
		name  string
		step  consistent.Step
		index int
		// again reports whether output i of the crashed input is
		// published a second time when the destination keeps duplicates.
		again func(m mode, i int) bool
	}
	faults := []fault{
		{"AfterLoad", consistent.StepLoaded, 0, func(mode, int) bool { return false }},
		{"AfterStore", consistent.StepStored, 0, func(mode, int) bool { return false }},
		{"BetweenOutputs0", consistent.StepPublished, 0, func(_ mode, i int) bool { return i <= 0 }},
		{"BetweenOutputs1", consistent.StepPublished, 1, func(_ mode, i int) bool { return i <= 1 }},
		{"BeforeComplete", consistent.StepDone, 0, func(m mode, _ int) bool { return m != onOutbox }},
	}
	for _, m := range modes {
		for _, f := range faults {
			for _, dedup := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/dedup=%v", m, f.name, dedup), func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, m, dedup)
					armed := false
					fired := 0
					r := e.runner(tallyHandler(outputs), func(step consistent.Step, i int) error {
						if armed && step == f.step && i == f.index {
							armed = false
							fired++
							return errCrash
						}
						return nil
					})
					h := e.host("g1")
					e.send("g1", "m1", "m2", "m3")
					if err := h.handle(r); err != nil {
						t.Fatal(err)
					}
					armed = true
					if err := h.handle(r); !errors.Is(err, errCrash) {
						t.Fatalf("m2: %v, want the injected crash", err)
					}
					h.crash()
					for range 2 { // m2 redelivered, m3
						if err := h.handle(r); err != nil {
							t.Fatal(err)
						}
					}
					if fired != 1 {
						t.Fatalf("the fault fired %d times", fired)
					}
					if got := h.state(); got.N != 3 {
						t.Fatalf("state %+v, want 3", got)
					}
					e.expect([]string{"m1", "m2", "m3"}, outputs, func(k, i int) int {
						if !dedup && k == 1 && f.again(m, i) {
							return 2
						}
						return 1
					})
				})
			}
		}
	}
}

// TestConcurrentHosts: two hosts load the same business id at the same
// version, each for its own input; exactly one commits, the loser publishes
// nothing, and its input, redelivered, is handled against the winner's
// state.
func TestConcurrentHosts(t *testing.T) {
	for _, m := range []mode{onPostgres, onOutbox} {
		t.Run(string(m), func(t *testing.T) {
			e := newEnv(t, m, false)
			var loaded sync.WaitGroup
			loaded.Add(2)
			var racing atomic.Bool
			racing.Store(true)
			barrier := func(step consistent.Step, _ int) error {
				if step == consistent.StepLoaded && racing.Load() {
					loaded.Done()
					loaded.Wait() // both have loaded the empty stream
				}
				return nil
			}
			ra, rb := e.runner(tallyHandler(2), barrier), e.runner(tallyHandler(2), barrier)
			e.send("g1", "a", "b")
			ha, hb := e.host("g1"), e.host("g1")
			ma, mb := ha.receive(), hb.receive()
			errs := make([]error, 2)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); errs[0] = ra.HandleMessage(ctx(t), nil, ma) }()
			go func() { defer wg.Done(); errs[1] = rb.HandleMessage(ctx(t), nil, mb) }()
			wg.Wait()
			winner, loser := 0, 1
			if errs[0] != nil {
				winner, loser = 1, 0
			}
			if errs[winner] != nil || !errors.Is(errs[loser], consistent.ErrConflict) {
				t.Fatalf("results %v, want one nil and one ErrConflict", errs)
			}
			racing.Store(false)
			hosts, msgs := []*host{ha, hb}, []string{ma.MessageID, mb.MessageID}
			hosts[winner].complete([]*azservicebus.ReceivedMessage{ma, mb}[winner])
			// Nothing of the loser's run is published: only the winner's.
			e.expect(msgs[winner:winner+1], 2, once)
			hosts[loser].crash()
			if err := hosts[winner].handle([]*consistent.Runner[tally]{ra, rb}[winner]); err != nil {
				t.Fatal(err)
			}
			if got := ha.state(); got.N != 2 {
				t.Fatalf("state %+v, want 2", got)
			}
			e.expect([]string{msgs[winner], msgs[loser]}, 2, once)
		})
	}
}

// TestSessionLockLost: with the session-state store, a host whose session
// lock expired while it handled an input (another host took the session and
// handled the input) can store nothing and so publishes nothing.
func TestSessionLockLost(t *testing.T) {
	e := newEnv(t, onSession, false)
	loaded, resume := make(chan struct{}), make(chan struct{})
	slow := e.runner(tallyHandler(2), func(step consistent.Step, _ int) error {
		if step == consistent.StepLoaded {
			close(loaded)
			<-resume
		}
		return nil
	})
	fast := e.runner(tallyHandler(2), nil)
	e.send("g1", "m1")
	ha, hb := e.host("g1"), e.host("g1")
	m := ha.receive()
	done := make(chan error)
	go func() { done <- slow.HandleMessage(ctx(t), ha.session(), m) }()
	<-loaded
	e.srv.Advance(lockDuration + time.Second) // host A's session lock expires
	if err := hb.handle(fast); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-done; err == nil {
		t.Fatal("the host that lost its session lock committed")
	}
	if got := hb.state(); got.N != 1 {
		t.Fatalf("state %+v, want 1", got)
	}
	e.expect([]string{"m1"}, 2, once)
}
