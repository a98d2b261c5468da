package consistent_test

import (
	"testing"
	"time"

	"github.com/busbar-io/busbar/consistent"
)

// TestRetentionWindow: inside the retention window a duplicate is replayed
// exactly; the oldest kept version's duplicate is still replayed; an input
// whose replay base was removed is completed without publishing; an input
// older than the window is no longer recognised (it is handled as new: the
// window must cover redelivery and re-sends). On the fake clock, by age.
func TestRetentionWindow(t *testing.T) {
	for _, m := range []mode{onPostgres, onSession} {
		t.Run(string(m), func(t *testing.T) {
			e := newEnvRetaining(t, m, false, consistent.Retention{MaxVersions: 100, MaxAge: time.Hour})
			r := e.runner(tallyHandler(1), nil)
			h := e.host("g1")
			e.send("g1", "m1", "m2")
			for range 2 {
				if err := h.handle(r); err != nil {
					t.Fatal(err)
				}
			}
			e.srv.Advance(2 * time.Hour)
			h.reset() // the session lock has expired
			// m3 and m4 are stored at 2h: m1 and m2 are older than the
			// hour, so m1 is removed and m2 stays as m3's replay base.
			e.send("g1", "m3", "m4", "m3", "m2", "m1")
			for range 5 {
				if err := h.handle(r); err != nil {
					t.Fatal(err)
				}
			}
			// m3's duplicate replays (output twice, identical), m2's is
			// completed without publishing, m1 is handled as a new input.
			if got := h.state(); got.N != 5 {
				t.Fatalf("state %+v, want 5 (m1 counted twice)", got)
			}
			got := map[string]int{}
			for _, o := range e.published() {
				got[o.ID]++
			}
			want := map[string]int{consistent.OutputID("m1", 0): 2, consistent.OutputID("m2", 0): 1,
				consistent.OutputID("m3", 0): 2, consistent.OutputID("m4", 0): 1}
			if len(got) != len(want) {
				t.Fatalf("published %v, want %v", got, want)
			}
			for id, n := range want {
				if got[id] != n {
					t.Fatalf("published %v, want %v", got, want)
				}
			}
			m3 := consistent.OutputID("m3", 0)
			var bodies []string
			for _, o := range e.published() {
				if o.ID == m3 {
					bodies = append(bodies, o.Body)
				}
			}
			if bodies[0] != bodies[1] {
				t.Fatalf("m3's replay differs: %q, %q", bodies[0], bodies[1])
			}
		})
	}
}
