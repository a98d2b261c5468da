package frames_test

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/frames"
)

// A connection's read loop: parse the header, take the whole frame, decode
// it with a reusable Decoder (no allocations for transfer, flow and
// disposition).
func ExampleDecoder() {
	id := uint32(7)
	wire, _ := frames.Append(nil, frames.TypeAMQP, 1, &frames.Transfer{Handle: 0, DeliveryID: &id,
		DeliveryTag: []byte{1}, Payload: []byte("hello")})
	wire, _ = frames.Append(wire, frames.TypeAMQP, 0, nil) // a heartbeat

	var dec frames.Decoder
	for len(wire) > 0 {
		h, err := frames.ParseHeader(wire)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, err := dec.Decode(h, wire[:h.Size])
		if err != nil {
			fmt.Println(err) // a *frames.DecodeError: close with its Condition
			return
		}
		switch b := body.(type) {
		case nil:
			fmt.Println("heartbeat")
		case *frames.Transfer:
			fmt.Printf("channel %d: transfer %d %q\n", h.Channel, *b.DeliveryID, b.Payload)
		}
		wire = wire[h.Size:]
	}
	// Output:
	// channel 1: transfer 7 "hello"
	// heartbeat
}
