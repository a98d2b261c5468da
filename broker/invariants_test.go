package broker

import "testing"

// checkOnCleanup runs the invariant checker on b when the test ends, if b
// is still the env's broker (a restart replaces it) and the test has not
// already failed.
func (e *env) checkOnCleanup(b *Broker) {
	e.t.Cleanup(func() {
		if e.b != b || e.t.Failed() {
			return
		}
		if err := b.checkInvariants(); err != nil {
			e.t.Errorf("broker invariants violated at the end of the test:\n%v", err)
		}
	})
}

// mustHoldInvariants fails the test when the broker's index is inconsistent.
func mustHoldInvariants(t testing.TB, b *Broker) {
	t.Helper()
	if err := b.checkInvariants(); err != nil {
		t.Fatalf("broker invariants violated:\n%v", err)
	}
}
