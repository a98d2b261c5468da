package main

import (
	"bytes"
	"context"
	"github.com/busbar-io/busbar/internal/poll"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	busbarconfig "github.com/busbar-io/busbar/config"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runScenario runs the example against an in-process broker on a fake
// clock starting at the article's first timestamp, moving the clock by
// each step once the output shows the step's line.
func runScenario(t *testing.T, scenario string, steps []step, opts ...busbartest.Option) string {
	t.Helper()
	start := time.Date(2022, 4, 25, 23, 35, 42, 0, time.UTC)
	srv := busbartest.Start(t, append([]busbartest.Option{busbartest.WithFakeClock(start)}, opts...)...)
	out := &syncBuffer{}
	var mu sync.Mutex
	records := map[string]int{}
	cfg := config{connStr: srv.ConnectionString(), admin: srv.HTTPAddr().String(), create: len(opts) == 0, scenario: scenario,
		idle: 100 * time.Millisecond, now: srv.Clock().Now, wait: time.Minute,
		trace: func(msg string) { mu.Lock(); records[msg]++; mu.Unlock() }}
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), cfg, out) }()
	for _, s := range steps {
		if !poll.Wait(30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return records[s.after] >= s.count
		}) {
			t.Fatalf("waiting for %d× %q; output so far:\n%s", s.count, s.after, out)
		}
		srv.Advance(s.advance)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	return out.String()
}

type step struct {
	after   string // a saga log record
	count   int    // how many times it must have been logged
	advance time.Duration
}

func TestHappyScenarioPrintsTheArticlesLog(t *testing.T) {
	got := runScenario(t, "happy", []step{
		{"timeout requested", 1, 5 * time.Second},
		{"timeout requested", 2, 2 * time.Second},
	})
	want := `[23:35:42] Handling session with ID: 77777777-0000-0000-0000-000000000000
[23:35:42] Got a message of type: PaymentAccepted for session with ID 77777777-0000-0000-0000-000000000000
[23:35:42] Scheduling a timeout to check in 00:00:05
[23:35:47] Got a message of type: Timeout for session with ID 77777777-0000-0000-0000-000000000000
[23:35:47] Scheduling a timeout to check in 00:00:05
[23:35:49] Got a message of type: ItemShipped for session with ID 77777777-0000-0000-0000-000000000000
[23:35:49] Orchestration with session ID 77777777-0000-0000-0000-000000000000 has successfully completed. Sending notification (TBD).
[23:35:49] Cancelled the pending timeout of 77777777-0000-0000-0000-000000000000
[23:35:49] Closing session with ID: 77777777-0000-0000-0000-000000000000
`
	if got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestMissingScenarioCompensates runs on entities declared by the
// example's Config.json, as `busbar serve --config` would.
func TestMissingScenarioCompensates(t *testing.T) {
	f, err := busbarconfig.Load("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	got := runScenario(t, "missing", []step{
		{"timeout requested", 1, 5 * time.Second},
		{"timeout requested", 2, 5 * time.Second},
		{"timeout requested", 3, 5 * time.Second},
	}, busbartest.WithConfig(f))
	want := `[23:35:42] Handling session with ID: 77777777-0000-0000-0000-000000000001
[23:35:42] Got a message of type: PaymentAccepted for session with ID 77777777-0000-0000-0000-000000000001
[23:35:42] Scheduling a timeout to check in 00:00:05
[23:35:47] Got a message of type: Timeout for session with ID 77777777-0000-0000-0000-000000000001
[23:35:47] Scheduling a timeout to check in 00:00:05
[23:35:52] Got a message of type: Timeout for session with ID 77777777-0000-0000-0000-000000000001
[23:35:52] Scheduling a timeout to check in 00:00:05
[23:35:57] Got a message of type: Timeout for session with ID 77777777-0000-0000-0000-000000000001
[23:35:57] Exhausted all retries (3). Executing compensating action and completing session with ID 77777777-0000-0000-0000-000000000001
[23:35:57] Compensating: refunding the payment of order 77777777-0000-0000-0000-000000000001 (an order message never arrived)
[23:35:57] Closing session with ID: 77777777-0000-0000-0000-000000000001
`
	if got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}
