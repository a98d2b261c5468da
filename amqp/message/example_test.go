package message_test

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
)

// A broker's view of a message: parse what a client sent, keep its bare
// message, and re-emit it on delivery with a new header and annotations.
func ExampleBuild() {
	sent, _ := message.Encode(nil, &message.Message{
		Header:                &message.Header{Durable: true, Priority: message.DefaultPriority},
		Properties:            &message.Properties{MessageID: "m-1", GroupID: "session-a"},
		ApplicationProperties: map[string]any{"color": "red"},
		Body:                  message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("payload")}},
	})
	p, err := message.Parse(sent)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Properties.MessageID, p.Properties.GroupID, p.ApplicationProperties["color"])

	delivered, _ := message.Build(nil,
		&message.Header{Durable: true, Priority: message.DefaultPriority, DeliveryCount: 1}, nil,
		encoding.Annotations{encoding.Symbol("x-opt-sequence-number"): int64(1)}, p.Bare())
	d, _ := message.Parse(delivered)
	fmt.Println(d.Header.DeliveryCount, d.MessageAnnotations[encoding.Symbol("x-opt-sequence-number")], string(d.Body.Data[0]))
	// Output:
	// m-1 session-a red
	// 1 1 payload
}
