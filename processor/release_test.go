package processor_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/processor"
)

// TestSessionReleaseAndErrSettled: a handler that settles its message
// itself and returns ErrSettled has it left alone (no error reported, not
// delivered again); Release lets the one session slot go to the next
// session at once, although the idle timeout (on a fake clock never moved)
// would hold it for ever.
func TestSessionReleaseAndErrSettled(t *testing.T) {
	srv := busbartest.Start(t, busbartest.WithFakeClock(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)), sessionQueue("q"))
	c := newClient(t, srv)
	send(t, c, "q", text("1", "first", "x"), text("2", "second", "y"))
	var mu sync.Mutex
	var got []string
	var reported errs
	p, err := processor.NewSession(c, processor.Queue("q"), func(ctx context.Context, s *processor.Session, m *azservicebus.ReceivedMessage) error {
		mu.Lock()
		got = append(got, s.ID())
		mu.Unlock()
		if err := s.Receiver().CompleteMessage(ctx, m, nil); err != nil {
			return err
		}
		s.Release()
		return processor.ErrSettled
	}, &processor.SessionOptions{MaxConcurrentSessions: 1, SessionIdleTimeout: time.Hour, Clock: srv.Clock(), OnError: reported.add})
	if err != nil {
		t.Fatal(err)
	}
	stop := runInBackground(t, p.Run, p.Close)
	eventually(t, "both sessions", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc([]string{"first second", "second first"}, func(s string) bool { return s == got[0]+" "+got[1] }) {
		t.Fatalf("handled %v", got)
	}
	if ops := reported.ops(); len(ops) != 0 {
		t.Fatalf("errors reported: %v", ops)
	}
	pager := c.NewListSessionsForQueuePager("q", nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil || len(page.Sessions) != 0 {
			t.Fatalf("sessions with messages left: %v (%v)", page.Sessions, err)
		}
	}
}
