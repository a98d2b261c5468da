package amqp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// recorder is a Handler that hands links to the test and records events.
type recorder struct {
	amqp.BaseHandler
	senders   chan *amqp.Sender
	receivers chan *amqp.Receiver
	sessions  chan *amqp.Session
	conns     chan *amqp.Conn
	closed    chan error
	ended     chan error

	mu     sync.Mutex
	events []string
}

func newRecorder() *recorder {
	return &recorder{
		senders: make(chan *amqp.Sender, 16), receivers: make(chan *amqp.Receiver, 16),
		sessions: make(chan *amqp.Session, 16), conns: make(chan *amqp.Conn, 16),
		closed: make(chan error, 16), ended: make(chan error, 16),
	}
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) logged() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) Open(c *amqp.Conn) error        { r.conns <- c; return nil }
func (r *recorder) Begin(s *amqp.Session) error    { r.sessions <- s; return nil }
func (r *recorder) End(_ *amqp.Session, err error) { r.ended <- err }
func (r *recorder) Close(_ *amqp.Conn, err error)  { r.closed <- err }
func (r *recorder) Flow(_ *amqp.Sender, f amqp.Flow) {
	r.log("flow credit=%d drain=%v", f.Credit, f.Drain)
}
func (r *recorder) Outcome(_ *amqp.Sender, o amqp.Outcome) {
	r.log("outcome id=%d tag=%s state=%T settled=%v lost=%v", o.ID, o.Tag, o.State, o.Settled, o.Lost)
}
func (r *recorder) Detach(_ *amqp.Sender, err error) { r.log("sender detach err=%v", err) }

func (r *recorder) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	r.senders <- s
	return r, nil
}

func (r *recorder) AttachReceiver(rc *amqp.Receiver) (amqp.ReceiverHandler, error) {
	r.receivers <- rc
	return recvSide{r}, nil
}

type recvSide struct{ r *recorder }

func (s recvSide) Transfer(_ *amqp.Receiver, d amqp.Delivery) {
	s.r.log("transfer id=%d settled=%v payload=%d", d.ID, d.Settled, len(d.Payload))
	if !d.Settled {
		_ = d.Settle(&frames.Accepted{})
	}
}
func (s recvSide) Detach(_ *amqp.Receiver, err error) { s.r.log("receiver detach err=%v", err) }

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		var zero T
		t.Fatalf("timed out waiting for %T", zero)
		return zero
	}
}

func TestSenderSendWaitsForCredit(t *testing.T) {
	rec := newRecorder()
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: rec}))
	c, err := goamqp.Dial(testCtx(t), "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "src", &goamqp.ReceiverOptions{Credit: -1})
	if err != nil {
		t.Fatal(err)
	}
	snd := recv(t, rec.senders)
	msg := encode(t, "hello")

	// No credit: TrySend refuses, Send waits until its context ends.
	if _, err := snd.TrySend(&amqp.Message{Payload: msg}); !errors.Is(err, amqp.ErrNoCredit) {
		t.Fatalf("TrySend without credit: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := snd.Send(short, &amqp.Message{Payload: msg}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send without credit: %v", err)
	}

	// Send blocks until credit arrives.
	sent := make(chan error, 1)
	go func() {
		_, err := snd.Send(ctx, &amqp.Message{Tag: []byte("t1"), Payload: msg})
		sent <- err
	}()
	if err := rcv.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, sent); err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "hello" {
		t.Fatalf("got %q", m.GetData())
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, e := range rec.logged() {
			if e == "outcome id=0 tag=t1 state=*frames.Accepted settled=true lost=false" {
				return true
			}
		}
		return false
	}, "the accepted outcome")
}

func TestApplicationDetachReportsLost(t *testing.T) {
	rec := newRecorder()
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: rec}))
	c, err := goamqp.Dial(testCtx(t), "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "src", &goamqp.ReceiverOptions{Credit: 5})
	if err != nil {
		t.Fatal(err)
	}
	snd := recv(t, rec.senders)
	waitFor(t, func() bool { return snd.Credit() == 5 }, "credit 5")
	for i := range 2 {
		if _, err := snd.TrySend(&amqp.Message{Tag: []byte{'a' + byte(i)}, Payload: encode(t, "x")}); err != nil {
			t.Fatal(err)
		}
	}
	// Mixed mode: a pre-settled delivery is never reported.
	if _, err := snd.TrySend(&amqp.Message{Tag: []byte("s"), Settled: true, Payload: encode(t, "y")}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rcv.Receive(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	snd.Detach(amqp.NewError(amqp.CondDetachForced, "test detach"))
	// The callbacks ran on this goroutine before Detach returned.
	got := rec.logged()
	want := map[string]bool{
		"outcome id=0 tag=a state=<nil> settled=false lost=true": true,
		"outcome id=1 tag=b state=<nil> settled=false lost=true": true,
		"sender detach err=amqp:link:detach-forced: test detach": true,
		"flow credit=5 drain=false":                              true,
	}
	for _, e := range got {
		delete(want, e)
	}
	if len(want) != 0 || got[len(got)-1] != "sender detach err=amqp:link:detach-forced: test detach" {
		t.Fatalf("events %q; missing %v", got, want)
	}
	if _, err := snd.TrySend(&amqp.Message{Payload: encode(t, "z")}); !errors.Is(err, amqp.ErrLinkClosed) {
		t.Fatalf("TrySend after Detach: %v", err)
	}
	_, err = rcv.Receive(ctx, nil)
	var le *goamqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondDetachForced {
		t.Fatalf("client saw %v, want the detach-forced error", err)
	}
}

func TestApplicationEndAndClose(t *testing.T) {
	rec := newRecorder()
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: rec}))
	c, err := goamqp.Dial(testCtx(t), "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	conn := recv(t, rec.conns)
	if conn.Identity() != "ANONYMOUS" {
		t.Fatalf("identity %v", conn.Identity())
	}
	if conn.Value() != nil {
		t.Fatalf("fresh connection has value %v", conn.Value())
	}
	conn.SetValue("tokens")
	conn.SetValue(42)
	if conn.Value() != 42 {
		t.Fatalf("Value() = %v after SetValue(42)", conn.Value())
	}
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.NewSender(ctx, "dst", nil); err != nil {
		t.Fatal(err)
	}
	recv(t, rec.receivers)
	s := recv(t, rec.sessions)
	s.End(amqp.NewError(amqp.CondResourceDeleted, "gone"))
	if err := recv(t, rec.ended); err == nil || err.Error() != "amqp:resource-deleted: gone" {
		t.Fatalf("End callback error %v", err)
	}
	if ev := rec.logged(); len(ev) != 1 || ev[0] != "receiver detach err=amqp:resource-deleted: gone" {
		t.Fatalf("events %q", ev)
	}
	conn.Close(amqp.NewError(amqp.CondConnectionForced, "bye"))
	if err := recv(t, rec.closed); err == nil || err.Error() != "amqp:connection:forced: bye" {
		t.Fatalf("Close callback error %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client not closed")
	}
	var ce *goamqp.ConnError
	if !errors.As(c.Err(), &ce) || ce.RemoteErr == nil || ce.RemoteErr.Condition != goamqp.ErrCondConnectionForced {
		t.Fatalf("client error %v", c.Err())
	}
}

func TestTLSListener(t *testing.T) {
	cert := selfSigned(t)
	var sawTLS sync.Once
	tlsSeen := make(chan bool, 1)
	srv := amqp.NewServer(amqp.Config{
		Handler: newRecorder(),
		Authenticate: func(cr *amqp.Credentials) (any, error) {
			sawTLS.Do(func() { tlsSeen <- cr.TLS != nil && cr.TLS.HandshakeComplete })
			return "tls-user", nil
		},
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	c, err := goamqp.Dial(testCtx(t), "amqps://"+l.Addr().String(), &goamqp.ConnOptions{
		SASLType:  goamqp.SASLTypeAnonymous(),
		TLSConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test certificate
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !recv(t, tlsSeen) {
		t.Fatal("Credentials.TLS is not set on a TLS connection")
	}
	if _, err := c.NewSession(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
}

// selfSigned makes a throwaway certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// badProps puts a value no AMQP type can carry into the attach reply.
type badProps struct{ *recorder }

func (h badProps) AttachReceiver(r *amqp.Receiver) (amqp.ReceiverHandler, error) {
	r.Reply().Properties = map[encoding.Symbol]any{"x": struct{}{}}
	return recvSide{h.recorder}, nil
}

func TestUnencodableReplyClosesConnection(t *testing.T) {
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: badProps{newRecorder()}}))
	c := rawDial(t, addr)
	c.open(nil)
	c.begin(nil)
	c.write(0, &frames.Attach{Name: "l", Role: frames.RoleSender, Target: &frames.Target{Address: "q"}})
	cl := expect[*frames.Close](c)
	if cl.Error == nil || cl.Error.Condition != amqp.CondInternalError || !strings.Contains(cl.Error.Description, "attach") {
		t.Fatalf("close %+v, want an internal-error naming the attach", cl.Error)
	}
}
