package servicebus_test

import (
	"fmt"

	"context"
	"errors"
	"github.com/busbar-io/busbar/internal/poll"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
)

func TestSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("sq", broker.QueueProperties{RequiresSession: true})
	c := e.client()
	ctx := testCtx(t)
	mustSend(t, c, "sq",
		&azservicebus.Message{Body: []byte("a1"), SessionID: ptr("a")},
		&azservicebus.Message{Body: []byte("b1"), SessionID: ptr("b")},
		&azservicebus.Message{Body: []byte("a2"), SessionID: ptr("a")},
	)

	t.Run("non-session receiver is not allowed", func(t *testing.T) {
		r, err := c.NewReceiverForQueue("sq", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.ReceiveMessages(ctx, 1, nil)
		if err == nil || !containsAll(err.Error(), "amqp:not-allowed", "requires sessions") {
			t.Fatalf("receive on a session queue without a session: %v", err)
		}
	})

	t.Run("named session, in order, with state", func(t *testing.T) {
		s, err := c.AcceptSessionForQueue(ctx, "sq", "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		if s.SessionID() != "a" {
			t.Fatalf("session id %q", s.SessionID())
		}
		if until := s.LockedUntil(); until.Before(time.Now()) || until.After(time.Now().Add(2*time.Minute)) {
			t.Fatalf("locked until %v", until)
		}
		ms := receiveN(t, s, 2)
		if string(ms[0].Body) != "a1" || string(ms[1].Body) != "a2" || *ms[0].SessionID != "a" {
			t.Fatalf("session a delivered %q, %q", ms[0].Body, ms[1].Body)
		}
		for _, m := range ms {
			if err := s.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if st, err := s.GetSessionState(ctx, nil); err != nil || st != nil {
			t.Fatalf("initial state %q, %v", st, err)
		}
		if err := s.SetSessionState(ctx, []byte("step-2"), nil); err != nil {
			t.Fatal(err)
		}
		if st, err := s.GetSessionState(ctx, nil); err != nil || string(st) != "step-2" {
			t.Fatalf("state %q, %v", st, err)
		}
		if err := s.RenewSessionLock(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSessionState(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
		if st, err := s.GetSessionState(ctx, nil); err != nil || st != nil {
			t.Fatalf("cleared state %q, %v", st, err)
		}

		// Locked here: another receiver cannot take it.
		_, err = c.AcceptSessionForQueue(ctx, "sq", "a", nil)
		if err == nil || !containsAll(err.Error(), "session-cannot-be-locked") {
			t.Fatalf("second accept of a locked session: %v", err)
		}
	})

	t.Run("next available session", func(t *testing.T) {
		s, err := c.AcceptNextSessionForQueue(ctx, "sq", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		if s.SessionID() != "b" {
			t.Fatalf("next session %q, want b (a is locked)", s.SessionID())
		}
		m := receiveN(t, s, 1)[0]
		if string(m.Body) != "b1" {
			t.Fatalf("body %q", m.Body)
		}
		if err := s.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("none available times out", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		_, err := c.AcceptNextSessionForQueue(short, "sq", nil)
		if sbCode(err) != azservicebus.CodeTimeout {
			t.Fatalf("accept next with nothing available: %v, want CodeTimeout", err)
		}
	})

	t.Run("next session that arrives while waiting", func(t *testing.T) {
		type result struct {
			s   *azservicebus.SessionReceiver
			err error
		}
		done := make(chan result, 1)
		go func() {
			wait, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			s, err := c.AcceptNextSessionForQueue(wait, "sq", nil)
			done <- result{s, err}
		}()
		// Whether the accept is already waiting or not, it must get "late".
		mustSend(t, c, "sq", &azservicebus.Message{Body: []byte("l1"), SessionID: ptr("late")})
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.s.Close(context.Background())
		if r.s.SessionID() != "late" {
			t.Fatalf("session %q, want late", r.s.SessionID())
		}
		m := receiveN(t, r.s, 1)[0]
		if err := r.s.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("list sessions", func(t *testing.T) {
		mustSend(t, c, "sq", &azservicebus.Message{Body: []byte("c1"), SessionID: ptr("c")})
		pager := c.NewListSessionsForQueuePager("sq", nil)
		var ids []string
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, page.Sessions...)
		}
		if len(ids) != 1 || ids[0] != "c" {
			t.Fatalf("sessions %v, want [c]", ids)
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// When a session lock expires on the broker's clock, the session link is
// detached with com.microsoft:session-lock-lost.
func TestSessionLockLostDetaches(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := newEnv(t, envOptions{clock: clk})
	e.queue("sq", broker.QueueProperties{RequiresSession: true, LockDuration: 30 * time.Second})
	ctx := testCtx(t)
	sess := rootSession(t, ctx, e)
	r, err := sess.NewReceiver(ctx, "sq", &goamqp.ReceiverOptions{
		SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr(),
		Filters:        []goamqp.LinkFilter{goamqp.NewLinkFilter("com.microsoft:session-filter", 0x137000000C, "s1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.LinkSourceFilterValue("com.microsoft:session-filter"); got != "s1" {
		t.Fatalf("locked session %v", got)
	}
	ticks, ok := r.Properties()["com.microsoft:locked-until-utc"].(int64)
	if want := clk.Now().Add(30*time.Second).UnixNano()/100 + 621355968000000000; !ok || ticks/10000 != want/10000 {
		t.Fatalf("locked-until-utc %v, want %d ticks", r.Properties()["com.microsoft:locked-until-utc"], want)
	}
	clk.Advance(31 * time.Second)
	_, err = r.Receive(ctx, nil)
	var le *goamqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != "com.microsoft:session-lock-lost" {
		t.Fatalf("receive after the session lock expired: %v", err)
	}
}

// Outcomes a client settles (receiver-settle-mode first) and then detaches
// at once are applied before the session is released: the messages are
// gone, not redelivered for a lost session lock.
func TestSettledOutcomesBeforeDetachAreApplied(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("sq", broker.QueueProperties{RequiresSession: true})
	ctx := testCtx(t)
	const n = 60
	msgs := make([]*azservicebus.Message, n)
	for i := range msgs {
		msgs[i] = &azservicebus.Message{SessionID: to.Ptr("s1"), Body: []byte("x")}
	}
	mustSend(t, e.client(), "sq", msgs...)
	conn, err := goamqp.Dial(ctx, "amqp://"+e.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain(rootKeyName, rootKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		r, err := sess.NewReceiver(ctx, "sq", &goamqp.ReceiverOptions{
			SettlementMode: goamqp.ReceiverSettleModeFirst.Ptr(),
			Credit:         n,
			Filters:        []goamqp.LinkFilter{goamqp.NewLinkFilter("com.microsoft:session-filter", 0x137000000C, "s1")},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < n/3 {
			m, err := r.Receive(ctx, nil)
			if err != nil {
				t.Fatalf("round %d, after %d messages: %v", round, got, err)
			}
			if err := r.AcceptMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
			got++
		}
		// Release what was prefetched beyond the third; detach at once.
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		want := int64(n - (round+1)*n/3)
		poll.UntilNil(t, 10*time.Second, "the accepted messages completed", func() error {
			qi, err := e.b.GetQueue(ctx, "sq")
			if err != nil {
				return err
			}
			if qi.Runtime.ActiveMessageCount != want {
				return fmt.Errorf("%d active, want %d", qi.Runtime.ActiveMessageCount, want)
			}
			return nil
		})
	}
}
