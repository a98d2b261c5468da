package server

import (
	"context"
	"net/http"

	"github.com/coder/websocket"

	"github.com/busbar-io/busbar/amqp"
)

// WebSocketPath is where the HTTP listener takes AMQP over WebSockets, as
// Service Bus does (wss://<namespace>/$servicebus/websocket): the SDKs'
// WebSocket transport, for clients behind proxies and firewalls that pass
// only HTTPS.
const WebSocketPath = "/$servicebus/websocket"

// webSocketProtocols are the subprotocols a client may ask for: the
// registered AMQP one (the JavaScript and .NET SDKs) and plain "amqp"
// (the Go SDK's example and tests).
var webSocketProtocols = []string{"AMQPWSB10", "amqp"}

// withWebSocket serves AMQP connections over WebSockets on WebSocketPath
// and passes every other request to next.
func withWebSocket(srv *amqp.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != WebSocketPath {
			next.ServeHTTP(w, r)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
			Subprotocols: webSocketProtocols,
			// Authorization is by SAS token on $cbs, never by ambient
			// credentials such as cookies, so a page of any origin may
			// connect, as it may to Service Bus.
			InsecureSkipVerify: true,
			CompressionMode:    websocket.CompressionDisabled,
		})
		if err != nil {
			return // Accept has answered the request with the reason
		}
		// Every AMQP frame the engine writes is one binary message; frames
		// a client sends may span messages or share one (NetConn reads the
		// messages as one byte stream). The connection lives until the
		// AMQP connection ends or the server closes it.
		srv.ServeConn(websocket.NetConn(context.Background(), c, websocket.MessageBinary))
	})
}
