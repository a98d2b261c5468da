package consistent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/internal/poll"
)

// TestRelay: outputs stored in the outbox by a host that died before
// publishing them, of an input that is never redelivered (here: settled by
// someone else), are published by the Relay once they are older than its
// Delay, exactly once.
func TestRelay(t *testing.T) {
	e := strandOutputs(t)
	relay, err := consistent.NewRelay(e.client, e.pg, &consistent.RelayOptions{Delay: time.Minute, Clock: e.srv.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Flush(context.Background()); n != 0 || err != nil {
		t.Fatalf("Flush before Delay published %d, %v", n, err)
	}
	e.srv.Advance(time.Minute + time.Second)
	if n, err := relay.Flush(context.Background()); n != 2 || err != nil {
		t.Fatalf("Flush published %d, %v; want 2", n, err)
	}
	if n, err := relay.Flush(context.Background()); n != 0 || err != nil {
		t.Fatalf("second Flush published %d, %v", n, err)
	}
	e.expect([]string{"m1"}, 2, once)
}

// TestRelayRun: Run flushes every Interval on its clock until cancelled.
func TestRelayRun(t *testing.T) {
	e := strandOutputs(t)
	relay, err := consistent.NewRelay(e.client, e.pg, &consistent.RelayOptions{Delay: time.Minute, Interval: 2 * time.Minute, Clock: e.srv.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- relay.Run(runCtx) }()
	if n := len(e.published()); n != 0 {
		t.Fatalf("%d outputs published before the relay's Delay", n)
	}
	// Move the clock an Interval at a time until the relay (whose timer is
	// armed at some point after Run starts) has published.
	poll.Until(t, 0, "the relay to publish", func() bool {
		e.srv.Advance(2 * time.Minute)
		return len(e.published()) == 2
	})
	stop()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	e.expect([]string{"m1"}, 2, once)
}

// strandOutputs leaves the two outputs of input m1 in the outbox of an
// outbox env: its host stopped after storing them, and the input was then
// completed by someone else, so only a relay can publish them.
func strandOutputs(t *testing.T) *env {
	e := newEnv(t, onOutbox, false)
	r := e.runner(tallyHandler(2), func(step consistent.Step, _ int) error {
		if step == consistent.StepStored {
			return errCrash
		}
		return nil
	})
	h := e.host("g1")
	e.send("g1", "m1")
	m := h.receive()
	if err := r.HandleMessage(ctx(t), nil, m); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	h.complete(m)
	return e
}
