package amqp_test

import (
	"context"
	"fmt"
	"net"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/frames"
)

// echoHandler accepts links that send to "echo" and prints what arrives.
type echoHandler struct {
	amqp.BaseHandler
	got chan string
}

func (h *echoHandler) AttachReceiver(r *amqp.Receiver) (amqp.ReceiverHandler, error) {
	if t := r.Remote().Target; t == nil || t.Address != "echo" {
		return nil, amqp.NewError(amqp.CondNotFound, "no such node")
	}
	r.Reply().MaxMessageSize = 1 << 20 // announce the limit the engine enforces
	return h, nil
}

func (h *echoHandler) AttachSender(*amqp.Sender) (amqp.SenderHandler, error) {
	return nil, amqp.NewError(amqp.CondNotImplemented, "this node only receives")
}

func (h *echoHandler) Transfer(r *amqp.Receiver, d amqp.Delivery) {
	var m goamqp.Message
	if err := m.UnmarshalBinary(d.Payload); err == nil { // Payload is valid only here
		h.got <- string(m.GetData())
	}
	_ = d.Settle(&frames.Accepted{})
}

func (h *echoHandler) Detach(*amqp.Receiver, error) {}

// A server that accepts messages sent to the node "echo".
func Example() {
	h := &echoHandler{got: make(chan string, 1)}
	srv := amqp.NewServer(amqp.Config{Handler: h})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(l) }()
	defer srv.Close(context.Background())

	ctx := context.Background()
	c, _ := goamqp.Dial(ctx, "amqp://"+l.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	defer c.Close()
	s, _ := c.NewSession(ctx, nil)
	snd, _ := s.NewSender(ctx, "echo", nil)
	fmt.Println("max message size:", snd.MaxMessageSize())
	if err := snd.Send(ctx, goamqp.NewMessage([]byte("hello")), nil); err != nil {
		fmt.Println(err)
	}
	fmt.Println("received:", <-h.got)
	// Output:
	// max message size: 1048576
	// received: hello
}
