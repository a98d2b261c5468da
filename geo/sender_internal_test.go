package geo

import (
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
)

// TestScheduleAtOrdersEachSession: on a clock that does not move, each
// session's copies are scheduled a millisecond apart, in whole
// milliseconds, independently of other sessions; once the clock passed
// them, a session starts again from Delay after now, and the sessions that
// need no entry any more are forgotten.
func TestScheduleAtOrdersEachSession(t *testing.T) {
	start := time.Date(2026, 11, 27, 5, 0, 0, 123456789, time.UTC)
	clk := clock.NewFake(start)
	s := &Sender{delay: time.Second, clock: clk, last: map[string]time.Time{}, pruneAt: minPrune}
	base := start.Add(time.Second).Truncate(time.Millisecond)
	for i := range 3 {
		for _, sid := range []string{"a", "b"} {
			if got, want := s.scheduleAt(sid), base.Add(time.Duration(i)*time.Millisecond); !got.Equal(want) {
				t.Fatalf("session %s, copy %d: scheduled %v, want %v", sid, i, got, want)
			}
		}
	}
	clk.Advance(time.Minute)
	if got, want := s.scheduleAt("a"), base.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after a minute: scheduled %v, want %v", got, want)
	}
	// Filling the map past minPrune drops every session due before now +
	// Delay ("b"), and keeps those that still order a next copy.
	for i := range minPrune {
		s.scheduleAt(fmt.Sprintf("s%d", i))
	}
	if _, ok := s.last["b"]; ok {
		t.Error(`session "b", due a minute ago, still has an entry after pruning`)
	}
	if got, want := s.scheduleAt("a"), base.Add(time.Minute+time.Millisecond); !got.Equal(want) {
		t.Fatalf(`session "a" after pruning: scheduled %v, want %v`, got, want)
	}
	if len(s.last) != minPrune+1 {
		t.Errorf("%d entries, want %d (\"a\" and the %d new ones)", len(s.last), minPrune+1, minPrune)
	}
}
