package amqp_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/amqptest"
	"github.com/busbar-io/busbar/amqp/frames"
)

// fuzzBroker is shared by a fuzz target's executions.
var (
	fuzzOnce sync.Once
	fuzzB    *amqptest.Broker
)

func fuzzBroker(f *testing.F) *amqptest.Broker {
	fuzzOnce.Do(func() {
		b, err := amqptest.Start(amqp.Config{HandshakeTimeout: 2 * time.Second, IdleTimeout: -1,
			MaxFrameSize: 4096, SessionWindow: 8, LinkCredit: 4, MaxMessageSize: 8192})
		if err != nil {
			f.Fatal(err)
		}
		fuzzB = b
	})
	return fuzzB
}

// runConn feeds input to one connection over an in-memory pipe, discarding
// what the engine writes, and fails if the engine has not finished with
// the connection soon after the client end closes (a hang).
func runConn(t *testing.T, b *amqptest.Broker, input []byte) {
	cli, srv := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		b.Server.ServeConn(srv)
	}()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, cli)
	}()
	_ = cli.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = cli.Write(input)
	_ = cli.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("connection still served 10s after the client closed (input %q)", input)
	}
	<-drained
}

// saslPrefix is a client's SASL header.
var saslPrefix = []byte("AMQP\x03\x01\x00\x00")

// saslSeeds are FuzzSASL's seed inputs (also in testdata/fuzz/FuzzSASL).
func saslSeeds(tb testing.TB) [][]byte {
	seed := func(body frames.Body) []byte {
		fr, err := frames.Append(nil, frames.TypeSASL, 0, body)
		if err != nil {
			tb.Fatal(err)
		}
		return fr
	}
	return [][]byte{
		seed(&frames.SASLInit{Mechanism: "ANONYMOUS"}),
		seed(&frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00user\x00pass")}),
		seed(&frames.SASLInit{Mechanism: "MSSBCBS", Hostname: "ns.example"}),
		seed(&frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("no-nul")}),
		seed(&frames.SASLResponse{Response: []byte("x")}),
		append(seed(&frames.SASLInit{Mechanism: "ANONYMOUS"}), "AMQP\x00\x01\x00\x00"...),
		{0, 0, 0, 8, 2, 1, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 2, 1, 0, 0},
	}
}

// FuzzSASL feeds arbitrary bytes after the SASL protocol header.
func FuzzSASL(f *testing.F) {
	b := fuzzBroker(f)
	for _, s := range saslSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runConn(t, b, append(append([]byte(nil), saslPrefix...), data...))
	})
}

// connPrefix is a valid exchange up to a session with two links: handle 0
// sends to address "f", handle 1 receives from it.
func connPrefix(tb testing.TB) []byte {
	var out []byte
	add := func(typ uint8, body frames.Body) {
		var err error
		if out, err = frames.Append(out, typ, 0, body); err != nil {
			tb.Fatal(err)
		}
	}
	out = append(out, saslPrefix...)
	add(frames.TypeSASL, &frames.SASLInit{Mechanism: "ANONYMOUS"})
	out = append(out, "AMQP\x00\x01\x00\x00"...)
	add(frames.TypeAMQP, &frames.Open{ContainerID: "fuzz", MaxFrameSize: 512, ChannelMax: 4})
	add(frames.TypeAMQP, &frames.Begin{IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 4})
	add(frames.TypeAMQP, &frames.Attach{Name: "s", Handle: 0, Role: frames.RoleSender, Target: &frames.Target{Address: "f"}})
	add(frames.TypeAMQP, &frames.Attach{Name: "r", Handle: 1, Role: frames.RoleReceiver, Source: &frames.Source{Address: "f"}, RcvSettleMode: frames.ReceiverSettleSecond})
	return out
}

// connSeeds are FuzzConn's seed inputs (also in testdata/fuzz/FuzzConn).
func connSeeds(tb testing.TB) [][]byte {
	frame := func(bodies ...frames.Body) []byte {
		var out []byte
		for _, body := range bodies {
			var err error
			if out, err = frames.Append(out, frames.TypeAMQP, 0, body); err != nil {
				tb.Fatal(err)
			}
		}
		return out
	}
	var seeds [][]byte
	seeds = append(seeds, frame(&frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), MessageFormat: u32(0), Payload: []byte("\x00Su\xa0\x01x")}))
	seeds = append(seeds, frame(
		&frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), More: true, Payload: []byte("part1")},
		&frames.Transfer{Handle: 0, More: true, Payload: []byte("part2")},
		&frames.Transfer{Handle: 0, Payload: []byte("part3")}))
	seeds = append(seeds, frame(
		&frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), More: true, Payload: []byte("x")},
		&frames.Transfer{Handle: 0, Aborted: true}))
	seeds = append(seeds, frame(
		&frames.Flow{NextIncomingID: u32(0), IncomingWindow: 10, Handle: u32(1), DeliveryCount: u32(0), LinkCredit: u32(5), Drain: true, Echo: true},
		&frames.Transfer{Handle: 0, DeliveryID: u32(0), DeliveryTag: []byte("a"), Payload: []byte("m")},
		&frames.Disposition{Role: frames.RoleReceiver, First: 0, Last: u32(9), State: &frames.Accepted{}},
		&frames.Disposition{Role: frames.RoleSender, First: 0, Settled: true}))
	seeds = append(seeds, frame(&frames.Detach{Handle: 0, Closed: true}, &frames.Detach{Handle: 1, Error: &frames.Error{Condition: "x:y", Description: "d"}}))
	seeds = append(seeds, frame(&frames.End{}, &frames.Begin{IncomingWindow: 1, OutgoingWindow: 1}))
	seeds = append(seeds, frame(&frames.Close{Error: &frames.Error{Condition: "amqp:internal-error"}}))
	seeds = append(seeds, frame(&frames.Attach{Name: "s", Handle: 0, Role: frames.RoleSender}))
	seeds = append(seeds, frame(nil, nil))
	seeds = append(seeds, []byte{0, 0, 0, 9, 2, 0, 0, 0, 0x45})
	return seeds
}

// FuzzConn feeds arbitrary bytes to a connection after a valid handshake,
// session and two links, so that mutations explore the performatives.
func FuzzConn(f *testing.F) {
	b := fuzzBroker(f)
	prefix := connPrefix(f)
	for _, s := range connSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runConn(t, b, append(append([]byte(nil), prefix...), data...))
	})
}
