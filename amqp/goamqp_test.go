package amqp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/amqptest"
)

// startBroker starts an in-memory test broker and stops it with the test.
func startBroker(t testing.TB, cfg amqp.Config) *amqptest.Broker {
	t.Helper()
	b, err := amqptest.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return b
}

// dial connects go-amqp with SASL ANONYMOUS.
func dial(t testing.TB, b *amqptest.Broker, opts *goamqp.ConnOptions) *goamqp.Conn {
	t.Helper()
	if opts == nil {
		opts = &goamqp.ConnOptions{}
	}
	if opts.SASLType == nil {
		opts.SASLType = goamqp.SASLTypeAnonymous()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := goamqp.Dial(ctx, b.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestGoAMQPSettleModes(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sndModes := map[string]goamqp.SenderSettleMode{
		"unsettled": goamqp.SenderSettleModeUnsettled,
		"settled":   goamqp.SenderSettleModeSettled,
		"mixed":     goamqp.SenderSettleModeMixed,
	}
	rcvModes := map[string]goamqp.ReceiverSettleMode{
		"first":  goamqp.ReceiverSettleModeFirst,
		"second": goamqp.ReceiverSettleModeSecond,
	}
	for sn, sm := range sndModes {
		for rn, rm := range rcvModes {
			t.Run(sn+"/"+rn, func(t *testing.T) {
				addr := "q-" + sn + "-" + rn
				snd, err := sess.NewSender(ctx, addr, &goamqp.SenderOptions{SettlementMode: sm.Ptr(), RequestedReceiverSettleMode: rm.Ptr()})
				if err != nil {
					t.Fatal(err)
				}
				defer snd.Close(ctx)
				if got := snd.MaxMessageSize(); got != 100<<20 {
					t.Errorf("sender MaxMessageSize = %d, want %d", got, 100<<20)
				}
				const n = 50
				for i := range n {
					if err := snd.Send(ctx, goamqp.NewMessage([]byte(fmt.Sprintf("%s-%d", addr, i))), nil); err != nil {
						t.Fatalf("send %d: %v", i, err)
					}
				}
				// Pre-settled sends return before the broker has them.
				waitFor(t, func() bool { return b.Len(addr) == n }, fmt.Sprintf("%d messages queued", n))
				rcv, err := sess.NewReceiver(ctx, addr, &goamqp.ReceiverOptions{Credit: 10, SettlementMode: rm.Ptr(), RequestedSenderSettleMode: sm.Ptr()})
				if err != nil {
					t.Fatal(err)
				}
				defer rcv.Close(ctx)
				for i := range n {
					m, err := rcv.Receive(ctx, nil)
					if err != nil {
						t.Fatalf("receive %d: %v", i, err)
					}
					if want := fmt.Sprintf("%s-%d", addr, i); string(m.GetData()) != want {
						t.Fatalf("message %d = %q, want %q", i, m.GetData(), want)
					}
					if err := rcv.AcceptMessage(ctx, m); err != nil {
						t.Fatalf("accept %d: %v", i, err)
					}
				}
				if got := b.Len(addr); got != 0 {
					t.Fatalf("%d messages left on the queue", got)
				}
			})
		}
	}
}

func TestGoAMQPReleaseRedelivers(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Put("q", encode(t, "once"))
	rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.ReleaseMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	m, err = rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "once" {
		t.Fatalf("redelivered %q", m.GetData())
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func TestGoAMQPDrain(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "drain", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	b.Put("drain", encode(t, "a"))
	b.Put("drain", encode(t, "b"))
	if err := rcv.IssueCredit(5); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		m, err := rcv.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.GetData()) != want {
			t.Fatalf("got %q, want %q", m.GetData(), want)
		}
		if err := rcv.AcceptMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// Three credits are left; the drain gives them up and returns once the
	// engine's flow with drain=true arrives.
	if err := rcv.DrainCredit(ctx, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	// With the credit drained, a new message must stay on the queue: Put
	// dispatches synchronously and finds no credit.
	b.Put("drain", encode(t, "c"))
	if got := b.Len("drain"); got != 1 {
		t.Fatalf("after drain the queue holds %d messages, want 1 (credit was not zeroed)", got)
	}
	if err := rcv.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "c" {
		t.Fatalf("got %q after new credit", m.GetData())
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func TestGoAMQPLargeMessageSmallFrames(t *testing.T) {
	b := startBroker(t, amqp.Config{MaxFrameSize: 512})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 10<<20)
	for i := range payload {
		payload[i] = byte(i*7 + i>>10)
	}
	snd, err := sess.NewSender(ctx, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "big", &goamqp.ReceiverOptions{Credit: 1, MaxMessageSize: 20 << 20})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- snd.Send(ctx, goamqp.NewMessage(payload), nil) }()
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("send: %v", err)
	}
	if !bytes.Equal(m.GetData(), payload) {
		t.Fatalf("received %d bytes, not equal to the %d sent", len(m.GetData()), len(payload))
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
}

func TestGoAMQPManyLinks(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	const sessions, pairs = 100, 5 // 100 sessions x (5 senders + 5 receivers) = 1,000 links
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				sess, err := c.NewSession(ctx, nil)
				if err != nil {
					return err
				}
				var snds []*goamqp.Sender
				var rcvs []*goamqp.Receiver
				for p := range pairs {
					addr := fmt.Sprintf("s%d-l%d", s, p)
					snd, err := sess.NewSender(ctx, addr, nil)
					if err != nil {
						return err
					}
					rcv, err := sess.NewReceiver(ctx, addr, nil)
					if err != nil {
						return err
					}
					snds, rcvs = append(snds, snd), append(rcvs, rcv)
				}
				for p, snd := range snds {
					if err := snd.Send(ctx, goamqp.NewMessage([]byte(fmt.Sprintf("s%d-l%d", s, p))), nil); err != nil {
						return err
					}
				}
				for p, rcv := range rcvs {
					m, err := rcv.Receive(ctx, nil)
					if err != nil {
						return err
					}
					if want := fmt.Sprintf("s%d-l%d", s, p); string(m.GetData()) != want {
						return fmt.Errorf("link %s got %q", want, m.GetData())
					}
					if err := rcv.AcceptMessage(ctx, m); err != nil {
						return err
					}
				}
				return sess.Close(ctx)
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every link's Detach ran once the sessions ended.
	waitFor(t, func() bool { return b.Detached() == sessions*pairs*2 }, "all 1,000 links detached")
}

// encode returns the AMQP encoding of a message with one data section.
func encode(t testing.TB, data string) []byte {
	t.Helper()
	b, err := goamqp.NewMessage([]byte(data)).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

func TestGoAMQPHeartbeats(t *testing.T) {
	// Both ends advertise short idle timeouts (go-amqp announces half of
	// its own). Each must send empty frames on an otherwise silent
	// connection, so the connection survives many idle periods.
	const idle = time.Second // shorter is flaky on a loaded 2-core machine
	b := startBroker(t, amqp.Config{IdleTimeout: idle})
	c := dial(t, b, &goamqp.ConnOptions{IdleTimeout: idle})
	select {
	case <-c.Done():
		t.Fatalf("connection died while idle: %v", c.Err())
	case <-time.After(3 * idle):
	}
	if b.Conns() != 1 {
		t.Fatalf("broker has %d connections, want 1", b.Conns())
	}
	ctx := testCtx(t)
	if _, err := c.NewSession(ctx, nil); err != nil {
		t.Fatalf("connection unusable after idling: %v", err)
	}
}

func TestGoAMQPClientVanishes(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	nc, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	c, err := goamqp.NewConn(ctx, nc, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		b.Put("vanish", encode(t, fmt.Sprint(i)))
	}
	rcv, err := sess.NewReceiver(ctx, "vanish", &goamqp.ReceiverOptions{Credit: 3})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rcv.Receive(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Three deliveries are unsettled when the socket drops, with no close.
	_ = nc.Close()
	waitFor(t, func() bool { return b.Lost() == 3 && b.Conns() == 0 }, "3 lost deliveries and no connection")
	if got := b.Len("vanish"); got != 3 {
		t.Fatalf("%d messages back on the queue, want 3", got)
	}
	select {
	case err := <-b.CloseErrors():
		if err == nil || !strings.Contains(err.Error(), "connection lost") {
			t.Fatalf("Close callback error %v, want the lost connection", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Close callback")
	}
}

func TestGoAMQPRejectedAttach(t *testing.T) {
	b := startBroker(t, amqp.Config{})
	c := dial(t, b, nil)
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.NewSender(ctx, "", nil)
	var le *goamqp.Error
	if !errors.As(err, &le) || le.Condition != goamqp.ErrCondInvalidField {
		t.Fatalf("attach without address: err = %v, want an %s error", err, amqp.CondInvalidField)
	}
}
