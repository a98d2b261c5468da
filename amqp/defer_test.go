package amqp_test

import (
	"errors"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// deferrer defers every attach of a sending link to the test.
type deferrer struct{ *recorder }

func (d deferrer) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	d.senders <- s
	return nil, amqp.ErrDeferAttach
}

const sessionFilter = encoding.Symbol("com.microsoft:session-filter")

func TestDeferredAttach(t *testing.T) {
	rec := newRecorder()
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: deferrer{rec}}))
	ctx := testCtx(t)
	c, err := goamqp.Dial(ctx, "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   *goamqp.Receiver
		err error
	}
	attached := make(chan result, 2)
	go func() {
		r, err := sess.NewReceiver(ctx, "sessions", &goamqp.ReceiverOptions{
			Credit: 3, Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(string(sessionFilter), 0, nil)}})
		attached <- result{r, err}
	}()
	snd := recv(t, rec.senders)

	// While the attach waits, the connection keeps working.
	other, err := sess.NewSender(ctx, "elsewhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Send(ctx, goamqp.NewMessage([]byte("x")), nil); err != nil {
		t.Fatal(err)
	}

	// The application picks a session and says so in the reply's filter;
	// the peer's own attach is left as it was.
	snd.Reply().Source.Filter[sessionFilter] = &encoding.Described{Descriptor: uint64(0x137000000C), Value: "session-1"}
	if v := snd.Remote().Source.Filter[sessionFilter]; v != nil {
		if d, ok := v.(*encoding.Described); !ok || d.Value != nil {
			t.Fatalf("editing the reply changed the peer's attach: %#v", v)
		}
	}
	if err := snd.CompleteAttach(rec, nil, nil); err != nil {
		t.Fatal(err)
	}
	res := recv(t, attached)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if got := res.r.LinkSourceFilterValue(string(sessionFilter)); got != "session-1" {
		t.Fatalf("client sees session filter %v", got)
	}
	waitFor(t, func() bool { return snd.Credit() == 3 }, "the client's credit")
	if _, err := snd.TrySend(&amqp.Message{Payload: encode(t, "in session")}); err != nil {
		t.Fatal(err)
	}
	m, err := res.r.Receive(ctx, nil)
	if err != nil || string(m.GetData()) != "in session" {
		t.Fatalf("receive: %v %v", m, err)
	}
	if err := snd.CompleteAttach(rec, nil, nil); err == nil {
		t.Fatal("completing an attach twice succeeded")
	}

	// A deferred attach can be refused too.
	go func() {
		r, err := sess.NewReceiver(ctx, "none", nil)
		attached <- result{r, err}
	}()
	snd2 := recv(t, rec.senders)
	if err := snd2.CompleteAttach(nil, nil, amqp.NewError("com.microsoft:timeout", "no session available")); err != nil {
		t.Fatal(err)
	}
	res = recv(t, attached)
	var le *goamqp.Error
	if !errors.As(res.err, &le) || le.Condition != "com.microsoft:timeout" {
		t.Fatalf("refused deferred attach: %v", res.err)
	}
}

func TestDeferredAttachPipelinedFlowAndPeerDetach(t *testing.T) {
	rec := newRecorder()
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: deferrer{rec}}))
	c := rawDial(t, addr)
	c.open(nil)
	c.begin(nil)
	// Attach and credit before any reply, as a pipelining client may.
	c.write(0, &frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver, Source: &frames.Source{Address: "a"}})
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100,
		Handle: u32(0), DeliveryCount: u32(0), LinkCredit: u32(5), Echo: true})
	snd := recv(t, rec.senders)
	// An echo on a pending link waits: the first frame for it is the attach.
	c.write(0, &frames.Flow{NextIncomingID: u32(0), IncomingWindow: 100, OutgoingWindow: 100, Echo: true})
	if f := expect[*frames.Flow](c); f.Handle != nil {
		t.Fatalf("a link flow preceded the deferred attach: %+v", f)
	}
	// The answer edits the reply under the engine's lock.
	edit := func(r *frames.Attach) { r.Properties = encoding.Fields{"locked": "yes"} }
	if err := snd.CompleteAttach(rec, edit, nil); err != nil {
		t.Fatal(err)
	}
	if a := expect[*frames.Attach](c); a.Source == nil || a.Source.Address != "a" || a.Properties["locked"] != "yes" {
		t.Fatalf("attach reply %+v, want the edited properties", a)
	}
	waitFor(t, func() bool {
		for _, e := range rec.logged() {
			if e == "flow credit=5 drain=false" {
				return true
			}
		}
		return false
	}, "the credit granted while deferred reported on completion")

	// The peer gives up on a second deferred attach: the engine answers
	// with a refused attach and the detach; completing it then fails.
	c.write(0, &frames.Attach{Name: "r2", Handle: 1, Role: frames.RoleReceiver, Source: &frames.Source{Address: "b"}})
	snd2 := recv(t, rec.senders)
	c.write(0, &frames.Detach{Handle: 1, Closed: true})
	if a := expect[*frames.Attach](c); a.Source != nil || a.Name != "r2" {
		t.Fatalf("answer to the abandoned attach %+v", a)
	}
	if d := expect[*frames.Detach](c); !d.Closed {
		t.Fatalf("detach %+v", d)
	}
	if err := snd2.CompleteAttach(rec, nil, nil); !errors.Is(err, amqp.ErrLinkClosed) {
		t.Fatalf("CompleteAttach after the peer detached: %v", err)
	}
}

// earlyCompleter completes its deferred attach from another goroutine and
// waits for that call to return before the callback returns ErrDeferAttach:
// the answer arrives while the engine still runs the callback.
type earlyCompleter struct {
	*recorder
	results chan error
}

func (e earlyCompleter) AttachSender(s *amqp.Sender) (amqp.SenderHandler, error) {
	done := make(chan error, 1)
	go func() { done <- s.CompleteAttach(e.recorder, nil, nil) }()
	e.results <- <-done
	return nil, amqp.ErrDeferAttach
}

func TestDeferredAttachCompletedBeforeTheCallbackReturns(t *testing.T) {
	h := earlyCompleter{newRecorder(), make(chan error, 1)}
	addr := serve(t, amqp.NewServer(amqp.Config{Handler: h}))
	ctx := testCtx(t)
	c, err := goamqp.Dial(ctx, "amqp://"+addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.NewReceiver(ctx, "early", nil); err != nil {
		t.Fatalf("attach completed early was never answered: %v", err)
	}
	if err := <-h.results; err != nil {
		t.Fatalf("CompleteAttach during the callback = %v, want nil", err)
	}
}
