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
