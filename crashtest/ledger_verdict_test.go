package crashtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestLedgerVerdicts feeds the ledger made-up histories and checks which
// violations it finds: the judge of TestCrash must accept every legal
// outcome of a crash and reject each broken one.
func TestLedgerVerdicts(t *testing.T) {
	errCrash := errors.New("connection lost")
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// delivery is message n as the broker would deliver it.
	delivery := func(n int64, count uint32) *azservicebus.ReceivedMessage {
		seq := n + 1000
		return &azservicebus.ReceivedMessage{MessageID: messageID(n), Body: body(n),
			ApplicationProperties: map[string]any{"n": n}, DeliveryCount: count, SequenceNumber: &seq}
	}
	send := func(l *ledger, count int, err error) []int64 {
		ns, _ := l.newMessages(count, time.Time{})
		l.sent(ns, err)
		return ns
	}
	deliver := func(l *ledger, m *azservicebus.ReceivedMessage) int64 {
		n, _ := l.delivered(m, t0)
		return n
	}
	crashAndDrain := func(l *ledger, drained ...*azservicebus.ReceivedMessage) {
		l.crashed()
		for _, m := range drained {
			if n, ok := l.delivered(m, t0); ok {
				l.completed(n, nil)
			}
		}
		l.endDrain()
	}
	tests := []struct {
		name string
		run  func(l *ledger)
		want []string // violation kinds, in any order
	}{
		{"completed before the crash, gone after", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.completed(n, nil)
			crashAndDrain(l)
		}, nil},
		{"acknowledged send, back after the crash", func(l *ledger) {
			n := send(l, 1, nil)[0]
			crashAndDrain(l, delivery(n, 1))
		}, nil},
		{"acknowledged send lost", func(l *ledger) {
			send(l, 1, nil)
			crashAndDrain(l)
		}, []string{vLost}},
		{"acknowledged send lost, reported once", func(l *ledger) {
			send(l, 1, nil)
			crashAndDrain(l)
			crashAndDrain(l)
		}, []string{vLost}},
		{"acknowledged batch lost", func(l *ledger) {
			send(l, 3, nil)
			crashAndDrain(l)
		}, []string{vLost, vLost, vLost}},
		{"failed send may be absent", func(l *ledger) {
			send(l, 1, errCrash)
			crashAndDrain(l)
		}, nil},
		{"failed send may be present", func(l *ledger) {
			n := send(l, 1, errCrash)[0]
			crashAndDrain(l, delivery(n, 1))
		}, nil},
		{"failed send absent in one drain, present later", func(l *ledger) {
			n := send(l, 1, errCrash)[0]
			crashAndDrain(l)
			crashAndDrain(l, delivery(n, 1))
		}, []string{vResurrected}},
		{"failed batch present in part", func(l *ledger) {
			ns := send(l, 2, errCrash)
			crashAndDrain(l, delivery(ns[0], 1))
		}, []string{vTorn}},
		{"failed batch present in part, reported once", func(l *ledger) {
			ns := send(l, 2, errCrash)
			crashAndDrain(l, delivery(ns[0], 1))
			crashAndDrain(l)
		}, []string{vTorn}},
		{"completion acknowledged, delivered again", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.completed(n, nil)
			crashAndDrain(l, delivery(n, 1))
		}, []string{vResurrected}},
		{"completion failed at the crash, message gone", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.completed(n, errCrash)
			crashAndDrain(l)
		}, nil},
		{"completion failed at the crash, message back", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.completed(n, errCrash)
			crashAndDrain(l, delivery(n, 1))
		}, nil},
		{"locked at the crash, back with its count", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 2))
			crashAndDrain(l, delivery(n, 2))
		}, nil},
		{"locked at the crash, lost", func(l *ledger) {
			n := send(l, 1, errCrash)[0] // its send failed, but it was delivered
			deliver(l, delivery(n, 1))
			crashAndDrain(l)
		}, []string{vLost}},
		{"delivery count reset by the restart", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 3))
			crashAndDrain(l, delivery(n, 1))
		}, []string{vCount}},
		{"acknowledged abandon not counted", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.abandoned(n, 1, nil)
			crashAndDrain(l, delivery(n, 1))
		}, []string{vCount}},
		{"failed abandon need not count", func(l *ledger) {
			n := send(l, 1, nil)[0]
			deliver(l, delivery(n, 1))
			l.abandoned(n, 1, errCrash)
			crashAndDrain(l, delivery(n, 1))
		}, nil},
		{"cancelled scheduled message fires", func(l *ledger) {
			ns, _ := l.newMessages(2, t0.Add(-time.Second))
			l.sent(ns, nil)
			l.cancelling(ns[1])
			l.cancelled(ns[1], nil)
			crashAndDrain(l, delivery(ns[0], 1), delivery(ns[1], 1))
		}, []string{vResurrected}},
		{"scheduled messages, one cancelled", func(l *ledger) {
			ns, _ := l.newMessages(2, t0.Add(-time.Second))
			l.sent(ns, nil)
			l.cancelling(ns[1])
			l.cancelled(ns[1], nil)
			crashAndDrain(l, delivery(ns[0], 1))
		}, nil},
		{"scheduled message lost", func(l *ledger) {
			ns, _ := l.newMessages(1, t0.Add(-time.Second))
			l.sent(ns, nil)
			crashAndDrain(l)
		}, []string{vLost}},
		{"scheduled message early", func(l *ledger) {
			ns, _ := l.newMessages(1, t0.Add(time.Second))
			l.sent(ns, nil)
			crashAndDrain(l, delivery(ns[0], 1))
		}, []string{vEarly}},
		{"body changed", func(l *ledger) {
			n := send(l, 1, nil)[0]
			m := delivery(n, 1)
			m.Body = []byte("other")
			crashAndDrain(l, m)
		}, []string{vCorrupt}},
		{"message nobody sent", func(l *ledger) {
			crashAndDrain(l, delivery(99, 1))
		}, []string{vPhantom}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger()
			tt.run(l)
			var got []string
			for _, v := range l.takeViolations() {
				got = append(got, v.kind)
				t.Log(v.text)
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("violations %v, want %v", got, want)
			}
		})
	}
}

// TestLedgerSessionState checks the verdicts on session state read back
// after a crash.
func TestLedgerSessionState(t *testing.T) {
	tests := []struct {
		name   string
		failed bool // the last set failed at the crash
		read   string
		want   int // violations
	}{
		{"last acknowledged", false, "s:2", 0},
		{"older value", false, "s:1", 1},
		{"in-flight value", true, "s:3", 0},
		{"acknowledged value, in-flight set lost", true, "s:2", 0},
		{"older value with a set in flight", true, "s:1", 1},
		{"nothing", false, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger()
			for _, v := range []string{"s:1", "s:2"} {
				l.setting("s", v)
				l.stateSet("s", v, nil)
			}
			if tt.failed {
				l.setting("s", "s:3")
				l.stateSet("s", "s:3", errors.New("connection lost"))
			}
			l.stateRead("s", []byte(tt.read))
			if v := l.takeViolations(); len(v) != tt.want {
				t.Errorf("%d violations %v, want %d", len(v), v, tt.want)
			}
			if got := l.ackedState("s"); got != tt.read {
				t.Errorf("after the read, the acknowledged state is %q, want %q", got, tt.read)
			}
		})
	}
}
