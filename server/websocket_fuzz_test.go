package server

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/amqptest"
)

// wsFrame encodes one client WebSocket frame (masked, as RFC 6455 requires
// of clients) with the given opcode.
func wsFrame(op byte, fin bool, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	mask := [4]byte{0x11, 0x22, 0x33, 0x44}
	out = append(out, mask[:]...)
	for i, c := range payload {
		out = append(out, c^mask[i%4])
	}
	return out
}

// wsUpgrade is a client's opening handshake for the AMQP subprotocol.
const wsUpgrade = "GET " + WebSocketPath + " HTTP/1.1\r\nHost: busbar\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: AMQPWSB10\r\n\r\n"

// FuzzWebSocket sends arbitrary bytes after a WebSocket handshake: frames
// of any opcode, length, fragmentation and masking, carrying AMQP or not.
// Whatever arrives, the AMQP connection behind the WebSocket must end
// promptly once the client goes away (no hang, no leaked connection), and
// the server must keep accepting new ones.
func FuzzWebSocket(f *testing.F) {
	b, err := amqptest.Start(amqp.Config{HandshakeTimeout: 2 * time.Second, IdleTimeout: -1, MaxFrameSize: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = b.Close() })
	done := make(chan struct{}, 1)
	ws := withWebSocket(b.Server, http.NotFoundHandler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	f.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	saslHdr := []byte("AMQP\x03\x01\x00\x00")
	f.Add(wsFrame(2, true, saslHdr))
	f.Add(append(wsFrame(2, false, saslHdr[:3]), wsFrame(0, true, saslHdr[3:])...))
	f.Add(wsFrame(1, true, []byte("text is not AMQP")))
	f.Add(append(wsFrame(9, true, []byte("ping")), wsFrame(8, true, []byte{3, 232})...))
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}) // 4 GiB declared
	f.Add([]byte{0x82, 0x04, 'A', 'M', 'Q', 'P'})                             // unmasked
	f.Add(wsFrame(2, true, append(saslHdr, make([]byte, 300)...)))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(wsUpgrade)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %v %v", resp, err)
		}
		_, _ = c.Write(in)
		_ = c.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the connection was still served 10s after the client left (input %q)", in)
		}
	})
}
