package geo_test

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/geo"
)

// A Sender writes each status of a shipment to both regions' namespaces:
// the primary copy at once, the secondary one Delay later. The send
// succeeds while one region is up and says which accepted it.
func ExampleSender() {
	ctx := context.Background()
	props := map[string]broker.QueueProperties{"shipments": {RequiresSession: true}}
	eastConn, stopEast, err := busbartest.StartExample(props)
	if err != nil {
		panic(err)
	}
	defer stopEast()
	westConn, stopWest, err := busbartest.StartExample(props)
	if err != nil {
		panic(err)
	}
	defer stopWest()
	east, _ := azservicebus.NewClientFromConnectionString(eastConn, nil)
	west, _ := azservicebus.NewClientFromConnectionString(westConn, nil)
	defer east.Close(ctx)
	defer west.Close(ctx)
	es, _ := east.NewSender("shipments", nil)
	ws, _ := west.NewSender("shipments", nil)

	sender, err := geo.NewSender(es, ws, &geo.SenderOptions{Delay: 15 * time.Second})
	if err != nil {
		panic(err)
	}
	tracking, id := "1Z999AA10123456784", "1Z999AA10123456784-1"
	sent, err := sender.Send(ctx, &azservicebus.Message{MessageID: &id, SessionID: &tracking, Body: []byte("Departed Seattle")}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("accepted by", sent.Accepted())
	// Output: accepted by [primary secondary]
}
