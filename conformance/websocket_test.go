package conformance

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/coder/websocket"

	"github.com/busbar-io/busbar/sas"
)

var webSocketQueue = declareQueue("websocket", admin.QueueProperties{})

// TestWebSockets: the SDK's WebSocket transport (ClientOptions.
// NewWebSocketConn, AMQP over wss://<namespace>/$servicebus/websocket)
// sends and receives through the broker's HTTP listener. The harness's
// listener is plain HTTP, so the test dials ws:// there; with --http-tls it
// is wss:// on the same path.
func TestWebSockets(t *testing.T) {
	t.Parallel()
	q := webSocketQueue.create(t)
	ep := strings.TrimSuffix(strings.TrimPrefix(sas.ParseConnectionString(suite.adminCS).Endpoint, "sb://"), "/")
	scheme := "ws://"
	if suite.adminTLS {
		scheme = "wss://"
	}
	var dialed atomic.Int32
	c, err := azservicebus.NewClientFromConnectionString(suite.connStr, &azservicebus.ClientOptions{
		RetryOptions: retryOptions,
		NewWebSocketConn: func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			const path = "/$servicebus/websocket"
			if !strings.HasSuffix(args.Host, path) {
				t.Errorf("the SDK asks for %q, want a URL ending in %s", args.Host, path)
			}
			dialed.Add(1)
			ws, _, err := websocket.Dial(ctx, scheme+ep+path, &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}})
			if err != nil {
				return nil, err
			}
			if ws.Subprotocol() != "AMQPWSB10" {
				t.Errorf("negotiated subprotocol %q, want AMQPWSB10", ws.Subprotocol())
			}
			return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	body := strings.Repeat("over websockets ", 8000) // 128 KB: many frames, many WebSocket messages
	send(t, newSender(t, c, q), textMessage(body))
	r := newQueueReceiver(t, c, q, nil)
	m := receiveOne(t, r)
	if string(m.Body) != body {
		t.Fatalf("received %d bytes, want the %d sent", len(m.Body), len(body))
	}
	complete(t, r, m)
	if dialed.Load() == 0 {
		t.Fatalf("the SDK never used the WebSocket transport")
	}
}
