package frames

import (
	"bytes"
	"context"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
)

// peer is the broker side of a connection, speaking through this package.
type peer struct {
	t      *testing.T
	conn   net.Conn
	frames [][]byte // every frame read or written, for the fuzz seed corpus
}

func (p *peer) readProto(want string) {
	p.t.Helper()
	b := make([]byte, 8)
	if _, err := io.ReadFull(p.conn, b); err != nil {
		p.t.Fatalf("reading protocol header: %v", err)
	}
	if string(b) != want {
		p.t.Fatalf("protocol header % x, want % x", b, want)
	}
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

// read returns the next non-empty frame's body.
func (p *peer) read() (Header, Body) {
	p.t.Helper()
	for {
		hb := make([]byte, HeaderSize)
		if _, err := io.ReadFull(p.conn, hb); err != nil {
			p.t.Fatalf("reading frame header: %v", err)
		}
		h, err := ParseHeader(hb)
		if err != nil {
			p.t.Fatal(err)
		}
		frame := make([]byte, h.Size)
		copy(frame, hb)
		if _, err := io.ReadFull(p.conn, frame[HeaderSize:]); err != nil {
			p.t.Fatalf("reading frame: %v", err)
		}
		body, err := Decode(h, frame)
		if err != nil {
			p.t.Fatalf("decoding go-amqp frame % x: %v", frame, err)
		}
		if body != nil {
			p.frames = append(p.frames, frame)
			return h, body
		}
	}
}

func (p *peer) write(typ uint8, ch uint16, body Body) {
	p.t.Helper()
	b, err := Append(nil, typ, ch, body)
	if err != nil {
		p.t.Fatal(err)
	}
	p.frames = append(p.frames, b)
	if _, err := p.conn.Write(b); err != nil {
		p.t.Fatalf("writing %T: %v", body, err)
	}
}

func expect[T Body](p *peer) T {
	p.t.Helper()
	_, body := p.read()
	v, ok := body.(T)
	if !ok {
		var zero T
		p.t.Fatalf("got %#v, want %T", body, zero)
	}
	return v
}

// TestGoAMQPInterop drives a real go-amqp v1.7.0 client (the library the Go
// Service Bus SDK uses) through SASL, open, begin, a sender and a receiver
// link, one message each way and close: every frame it sends must decode,
// and every frame this package encodes must satisfy it.
func TestGoAMQPInterop(t *testing.T) {
	// A loopback TCP connection rather than net.Pipe: go-amqp closes its
	// socket right after sending close and expects net.ErrClosed from it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	p := &peer{t: t, conn: server}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); server.Close() }()

	sent := amqp.NewMessage([]byte("to the broker"))
	sent.ApplicationProperties = map[string]any{"k": "v"}
	sentBytes, _ := sent.MarshalBinary()
	delivered := amqp.NewMessage([]byte("from the broker"))
	deliveredBytes, _ := delivered.MarshalBinary()

	clientErr := make(chan error, 1)
	received := make(chan *amqp.Message, 1)
	go func() {
		clientErr <- func() error {
			conn, err := amqp.NewConn(ctx, client, &amqp.ConnOptions{
				ContainerID: "client-1", HostName: "localhost", SASLType: amqp.SASLTypeAnonymous(),
			})
			if err != nil {
				return err
			}
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				return err
			}
			snd, err := sess.NewSender(ctx, "queue1", &amqp.SenderOptions{
				Properties: map[string]any{"com.microsoft:timeout": uint32(60000)},
			})
			if err != nil {
				return err
			}
			if err := snd.Send(ctx, sent, nil); err != nil {
				return err
			}
			rcv, err := sess.NewReceiver(ctx, "queue1", &amqp.ReceiverOptions{
				Credit: 5, SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(),
				Filters: []amqp.LinkFilter{amqp.NewLinkFilter("com.microsoft:session-filter", 0x137000000c, "s1")},
			})
			if err != nil {
				return err
			}
			msg, err := rcv.Receive(ctx, nil)
			if err != nil {
				return err
			}
			received <- msg
			if err := rcv.AcceptMessage(ctx, msg); err != nil {
				return err
			}
			return conn.Close()
		}()
	}()

	p.readProto("AMQP\x03\x01\x00\x00")
	p.write(TypeSASL, 0, &SASLMechanisms{Mechanisms: []encoding.Symbol{"MSSBCBS", "ANONYMOUS"}})
	if in := expect[*SASLInit](p); in.Mechanism != "ANONYMOUS" {
		t.Errorf("sasl-init %#v", in)
	}
	p.write(TypeSASL, 0, &SASLOutcome{Code: SASLOK})
	p.readProto("AMQP\x00\x01\x00\x00")

	open := expect[*Open](p)
	if open.ContainerID != "client-1" || open.Hostname != "localhost" {
		t.Errorf("open %#v", open)
	}
	p.write(TypeAMQP, 0, &Open{ContainerID: "busbar", MaxFrameSize: 65536, ChannelMax: 4999, IdleTimeout: 120000})

	begin := expect[*Begin](p)
	if begin.RemoteChannel != nil {
		t.Errorf("client begin has remote-channel %d", *begin.RemoteChannel)
	}
	rc := uint16(0)
	p.write(TypeAMQP, 0, &Begin{RemoteChannel: &rc, NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 255})

	att := expect[*Attach](p)
	if att.Role != RoleSender || att.Target == nil || att.Target.Address != "queue1" ||
		att.Properties["com.microsoft:timeout"] != uint32(60000) {
		t.Errorf("sender attach %#v target %#v", att, att.Target)
	}
	p.write(TypeAMQP, 0, &Attach{Name: att.Name, Handle: 0, Role: RoleReceiver, SndSettleMode: att.SndSettleMode,
		RcvSettleMode: att.RcvSettleMode, Source: att.Source, Target: att.Target, MaxMessageSize: 1 << 20})
	p.write(TypeAMQP, 0, &Flow{NextIncomingID: u32(0), IncomingWindow: 5000, NextOutgoingID: 1, OutgoingWindow: 5000,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(10)})

	tr := expect[*Transfer](p)
	if tr.DeliveryID == nil || len(tr.DeliveryTag) == 0 || tr.MessageFormat == nil || *tr.MessageFormat != 0 ||
		!bytes.Equal(tr.Payload, sentBytes) {
		t.Errorf("transfer %#v", tr)
	}
	if !tr.Settled {
		p.write(TypeAMQP, 0, &Disposition{Role: RoleReceiver, First: *tr.DeliveryID, Settled: true, State: &Accepted{}})
	}

	ratt := expect[*Attach](p)
	if ratt.Role != RoleReceiver || ratt.Source == nil || ratt.Source.Address != "queue1" || ratt.RcvSettleMode != ReceiverSettleSecond {
		t.Errorf("receiver attach %#v", ratt)
	}
	filter, _ := ratt.Source.Filter["com.microsoft:session-filter"].(*encoding.Described)
	if filter == nil || !reflect.DeepEqual(filter, &encoding.Described{Descriptor: uint64(0x137000000c), Value: "s1"}) {
		t.Errorf("session filter %#v", ratt.Source.Filter)
	}
	p.write(TypeAMQP, 0, &Attach{Name: ratt.Name, Handle: 1, Role: RoleSender, SndSettleMode: ratt.SndSettleMode,
		RcvSettleMode: ratt.RcvSettleMode, Source: ratt.Source, Target: ratt.Target, InitialDeliveryCount: 0})

	fl := expect[*Flow](p)
	if fl.Handle == nil || *fl.Handle != ratt.Handle || fl.LinkCredit == nil || *fl.LinkCredit != 5 {
		t.Errorf("receiver flow %#v", fl)
	}
	p.write(TypeAMQP, 0, &Transfer{Handle: ratt.Handle, DeliveryID: u32(0), DeliveryTag: []byte("tag-0"),
		MessageFormat: u32(0), Payload: deliveredBytes})

	select {
	case msg := <-received:
		if string(msg.GetData()) != "from the broker" {
			t.Errorf("client received %q", msg.GetData())
		}
	case err := <-clientErr:
		t.Fatalf("client failed before receiving: %v", err)
	}
	disp := expect[*Disposition](p)
	if disp.Role != RoleReceiver || disp.First != 0 || !reflect.DeepEqual(disp.State, &Accepted{}) {
		t.Errorf("disposition %#v", disp)
	}
	// In rcv-settle-mode second the client waits for our settlement.
	if !disp.Settled {
		p.write(TypeAMQP, 0, &Disposition{Role: RoleSender, First: 0, Settled: true, State: &Accepted{}})
	}
	expect[*Close](p)
	// go-amqp closes the socket right after its close frame without waiting
	// for ours, so there is no one to answer.
	if err := <-clientErr; err != nil {
		t.Fatalf("client: %v", err)
	}
	writeSeeds(t, "FuzzDecode", p.frames)
}
