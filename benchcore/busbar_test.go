package benchcore

import (
	"context"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
)

func TestParseConnectionString(t *testing.T) {
	ci, err := parseConnectionString("Endpoint=sb://127.0.0.1:25672;SharedAccessKeyName=Root;SharedAccessKey=abc=;UseDevelopmentEmulator=true;")
	if err != nil {
		t.Fatal(err)
	}
	want := connInfo{host: "127.0.0.1:25672", emulator: true, keyName: "Root", key: "abc="}
	if ci != want {
		t.Fatalf("parsed %+v, want %+v", ci, want)
	}
	cfg := BusbarConfig{}
	if got := cfg.adminAddr(ci); got != "127.0.0.1:5300" {
		t.Fatalf("admin address %q, want the endpoint's host on 5300", got)
	}
	if _, err := parseConnectionString("Endpoint=sb://x;SharedAccessKeyName=k"); err == nil {
		t.Fatal("a connection string without a key must be refused")
	}
	if _, err := NewAMQPDriver(BusbarConfig{ConnectionString: "Endpoint=sb://x;SharedAccessKeyName=k;SharedAccessKey=v"}); err == nil {
		t.Fatal("the lean client needs an emulator-style (plain AMQP) connection string")
	}
}

// TestBusbarDrivers runs small workloads through both Busbar drivers
// against an in-process broker, creating the queue over the management API.
func TestBusbarDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	s := busbartest.Start(t)
	for _, client := range []string{"sdk", "amqp", "raw", "raw-settle-first", "raw-cbs"} {
		for _, c := range []struct {
			name string
			w    Workload
			rad  bool
		}{
			{"peek-lock", Workload{Producers: 2, Consumers: 2, Inflight: 4, Count: 400, Size: 200}, false},
			{"receive-and-delete", Workload{Producers: 1, Consumers: 1, Batch: 10, Count: 200}, true},
			{"sessions", Workload{Producers: 2, Consumers: 3, Inflight: 2, Batch: 5, Keys: 12, PerKey: 5}, false},
		} {
			t.Run(client+"/"+c.name, func(t *testing.T) {
				if client == "raw-settle-first" && c.w.Keyed() {
					t.Skip("settle-first is refused for sessions (see RawDriver.Prepare)")
				}
				cfg := BusbarConfig{ConnectionString: s.ConnectionString(), Create: true,
					AdminAddr: s.HTTPAddr().String(), ReceiveAndDelete: c.rad, SessionIdle: 300 * time.Millisecond}
				var d Driver
				var err error
				switch client {
				case "sdk":
					d, err = NewSDKDriver(cfg)
				case "amqp":
					d, err = NewAMQPDriver(cfg)
				case "raw", "raw-settle-first":
					cfg.SettleFirst = client == "raw-settle-first"
					d, err = NewRawDriver(cfg)
				case "raw-cbs": // SASL ANONYMOUS and a CBS put-token instead of PLAIN
					var rd *RawDriver
					rd, err = NewRawDriver(cfg)
					if rd != nil {
						rd.noPlain = true
					}
					d = rd
				}
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := d.Close(); err != nil {
						t.Errorf("close (deletes the queue): %v", err)
					}
				}()
				runVerified(t, c.w, d)
			})
		}
	}
}

// TestRawClientUnderPressure runs the raw client where its flow control
// matters: sends of 50 messages, 4 at once, on links of 100 credit (Send
// calls wait for credit and share it), consumers with 10 credit (renewed
// every 5 deliveries), and 200 sessions taken by 2 consumers of 3
// sessions each. Every message must arrive once, in order per session.
func TestRawClientUnderPressure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	s := busbartest.Start(t)
	for _, c := range []struct {
		name string
		w    Workload
	}{
		{"credit-bound", Workload{Producers: 1, Consumers: 2, Inflight: 4, Batch: 50, Count: 3000, Size: 1024}},
		{"sessions", Workload{Producers: 2, Consumers: 2, Inflight: 2, Batch: 10, Keys: 200, PerKey: 10, Size: 1024}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := NewRawDriver(BusbarConfig{ConnectionString: s.ConnectionString(), Create: true,
				AdminAddr: s.HTTPAddr().String(), Prefetch: 10, ConcurrentSessions: 3, SessionIdle: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			runVerified(t, c.w, d)
		})
	}
}

// runVerified runs w against d and fails the test unless every message
// was sent, and received exactly once (in order per key).
func runVerified(t *testing.T, w Workload, d Driver) {
	t.Helper()
	w.DrainTimeout = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Run(ctx, w, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := w.Count
	if w.Keyed() {
		want = int64(w.Keys * w.PerKey)
	}
	if v := r.Verdict; !v.OK || v.Sent != want || v.Received != want || v.Duplicates != 0 {
		t.Fatalf("verdict %+v, want %d sent and received exactly once, in order", v, want)
	}
}

// TestRawAcceptNextSessionTimesOut checks the raw client's handling of a
// session receiver the broker refuses because no session became
// available in time (an attach without a source, then a detach with
// com.microsoft:timeout): the consumer tries again, and takes the session
// once one exists.
func TestRawAcceptNextSessionTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	defer func(d time.Duration) { rawAcceptTimeout = d }(rawAcceptTimeout)
	rawAcceptTimeout = 200 * time.Millisecond
	ctx, d := keyedDriver(t, 0)
	rc, s, got, deliver := keyedConsumer(ctx, t, d)
	defer rc.Close()
	// No session yet: the broker refuses after the timeout, and the
	// consumer reports no error (it would try again).
	if err := rc.oneSession(ctx, s, deliver); err != nil {
		t.Fatalf("accept on an empty queue: %v, want nil after the broker's timeout", err)
	}
	if len(*got) != 0 {
		t.Fatalf("delivered %v from an empty queue", *got)
	}
	p, err := d.NewProducer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var msgs []Outgoing
	for seq := uint32(0); seq < 3; seq++ {
		b := make([]byte, 64)
		EncodeHeader(b, Header{ID: uint64(seq), Keyed: true, Key: 7, Seq: seq, Last: seq == 2})
		msgs = append(msgs, Outgoing{Body: b, Key: "k7"})
	}
	if err := p.Send(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// The same AMQP session attaches again and reads the session in order.
	if err := rc.oneSession(ctx, s, deliver); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 3 || (*got)[0] != 0 || (*got)[1] != 1 || (*got)[2] != 2 {
		t.Fatalf("delivered sequence %v, want [0 1 2]", *got)
	}
}

// TestRawSessionIdleCompletesBeforeLeaving checks the raw consumer's
// other way out of a session: SessionIdle without its last message. The
// consumer stops the credit, has the broker answer every complete, and
// detaches in the write of its next attach, which takes the same session
// again once its last message is sent: only that message is delivered, the
// first two having been completed. The idle time is up when the first two
// are in (the session's timer, fired by the test), not after a wall-clock
// wait a slow machine could outlast.
func TestRawSessionIdleCompletesBeforeLeaving(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	ctx, d := keyedDriver(t, time.Hour)
	p, err := d.NewProducer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(seqs ...uint32) {
		t.Helper()
		var msgs []Outgoing
		for _, seq := range seqs {
			b := make([]byte, 64)
			EncodeHeader(b, Header{ID: uint64(seq), Keyed: true, Key: 7, Seq: seq, Last: seq == 2})
			msgs = append(msgs, Outgoing{Body: b, Key: "k7"})
		}
		if err := p.Send(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	rc, s, got, deliver := keyedConsumer(ctx, t, d)
	defer rc.Close()
	send(0, 1)
	idleAtTwo := func(b []byte) Delivery {
		dl := deliver(b) // on the reader goroutine, under the connection's lock
		if len(*got) == 2 {
			s.idle.Reset(0)
		}
		return dl
	}
	if err := rc.oneSession(ctx, s, idleAtTwo); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 2 || (*got)[0] != 0 || (*got)[1] != 1 {
		t.Fatalf("before the idle timeout: delivered %v, want [0 1]", *got)
	}
	send(2)
	if err := rc.oneSession(ctx, s, deliver); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 3 || (*got)[2] != 2 {
		t.Fatalf("delivered %v, want [0 1 2]: the completes of the first visit applied before it left", *got)
	}
}

// keyedDriver starts a broker and a raw driver for a one-key session
// workload on a queue of its own (SessionIdle idle, 0 for the default).
func keyedDriver(t *testing.T, idle time.Duration) (context.Context, *RawDriver) {
	t.Helper()
	srv := busbartest.Start(t)
	d, err := NewRawDriver(BusbarConfig{ConnectionString: srv.ConnectionString(), Create: true,
		AdminAddr: srv.HTTPAddr().String(), SessionIdle: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := d.Prepare(ctx, Workload{Producers: 1, Consumers: 1, Keys: 1, PerKey: 3, Size: 64}); err != nil {
		t.Fatal(err)
	}
	return ctx, d
}

// keyedConsumer opens a raw consumer and one AMQP session on it, and a
// deliver function that records each message's sequence number in got.
func keyedConsumer(ctx context.Context, t *testing.T, d *RawDriver) (*rawConsumer, *rawSession, *[]uint32, DeliverFunc) {
	t.Helper()
	cons, err := d.NewConsumer(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rc := cons.(*rawConsumer)
	s, err := rc.c.beginSession(ctx)
	if err != nil {
		_ = rc.Close()
		t.Fatal(err)
	}
	got := new([]uint32)
	deliver := func(b []byte) Delivery {
		h, err := DecodeHeader(b)
		if err != nil {
			t.Errorf("foreign body %x", b)
			return Delivery{Outcome: Foreign}
		}
		*got = append(*got, h.Seq)
		return Delivery{Outcome: First, Keyed: true, Key: h.Key, Last: h.Last}
	}
	return rc, s, got, deliver
}
