package amqp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
)

// countingConn counts the writes that reach it and can be made to fail.
type countingConn struct {
	net.Conn
	writes atomic.Int64
	fail   atomic.Bool
}

var errBroken = errors.New("broken")

func (c *countingConn) Write(p []byte) (int, error) {
	if c.fail.Load() {
		return 0, errBroken
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// batchPair is a batchConn over one end of a TCP connection on loopback,
// and the other end.
func batchPair(t *testing.T) (*batchConn, *countingConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	cc := &countingConn{Conn: nc}
	b := BatchConn(cc, 0).(*batchConn)
	t.Cleanup(func() { _ = b.Close(); _ = peer.Close() })
	return b, cc, peer
}

// TestBatchConnGathersWritesInOrder writes 2,000 frames of varied sizes
// from one goroutine, as go-amqp's writer does: the peer reads every byte in
// order, and the socket saw fewer writes than frames.
func TestBatchConnGathersWritesInOrder(t *testing.T) {
	b, cc, peer := batchPair(t)
	var want bytes.Buffer
	for i := 0; i < 2000; i++ {
		frame := bytes.Repeat([]byte{byte(i)}, 8+i%300)
		want.Write(frame)
	}
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, want.Len())
		_, _ = io.ReadFull(peer, buf)
		got <- buf
	}()
	for off, i := 0, 0; i < 2000; i++ {
		n := 8 + i%300
		if w, err := b.Write(want.Bytes()[off : off+n]); err != nil || w != n {
			t.Fatalf("write %d: %d, %v", i, w, err)
		}
		off += n
	}
	select {
	case buf := <-got:
		if !bytes.Equal(buf, want.Bytes()) {
			t.Fatal("the peer read other bytes than were written")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not get every byte")
	}
	if w := cc.writes.Load(); w >= 2000 {
		t.Fatalf("%d socket writes for 2,000 frames: nothing was gathered", w)
	}
}

// TestBatchConnCloseWritesWhatIsBuffered: bytes written just before Close
// reach the peer before the connection ends.
func TestBatchConnCloseWritesWhatIsBuffered(t *testing.T) {
	b, _, peer := batchPair(t)
	var wg sync.WaitGroup
	wg.Add(1)
	var got []byte
	go func() {
		defer wg.Done()
		got, _ = io.ReadAll(peer)
	}()
	for i := 0; i < 100; i++ {
		_, _ = b.Write([]byte("close frame "))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if want := bytes.Repeat([]byte("close frame "), 100); !bytes.Equal(got, want) {
		t.Fatalf("the peer read %d bytes before the end, want %d", len(got), len(want))
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, errWriterClosed) {
		t.Fatalf("a write after Close: %v", err)
	}
}

// TestBatchConnErrorIsSticky: a socket write that fails is reported by a
// later Write, and every Write after it fails too.
func TestBatchConnErrorIsSticky(t *testing.T) {
	b, cc, _ := batchPair(t)
	cc.fail.Store(true)
	_, _ = b.Write([]byte("lost"))
	poll.Until(t, 5*time.Second, "the write error to show", func() bool {
		_, err := b.Write([]byte("x"))
		return errors.Is(err, errBroken)
	})
	if _, err := b.Write([]byte("y")); !errors.Is(err, errBroken) {
		t.Fatalf("the next write: %v", err)
	}
}

// TestBatchConnWriteTimeoutApplies: with the peer not reading, a socket
// write times out after the writeTimeout given, and that is the error the
// next Write returns.
func TestBatchConnWriteTimeoutApplies(t *testing.T) {
	b, _, _ := batchPair(t)
	b.w.writeTimeout = 50 * time.Millisecond
	chunk := make([]byte, 64<<10)
	poll.Until(t, 30*time.Second, "the timeout to show", func() bool {
		_, err := b.Write(chunk)
		return errors.Is(err, os.ErrDeadlineExceeded)
	})
}

// gateConn holds every write until open is closed, then discards it; a
// write held when the conn is closed fails.
type gateConn struct {
	net.Conn
	open   chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newGateConn(t *testing.T) *gateConn {
	nc, other := net.Pipe()
	t.Cleanup(func() { _ = other.Close() })
	return &gateConn{Conn: nc, open: make(chan struct{}), closed: make(chan struct{})}
}

func (g *gateConn) Write(p []byte) (int, error) {
	select {
	case <-g.open:
		return len(p), nil
	case <-g.closed:
		return 0, net.ErrClosed
	}
}

func (g *gateConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

// TestBatchConnCloseDoesNotWaitForever: when the socket takes nothing,
// Close gives up on the buffered bytes after closeWait and closes it.
func TestBatchConnCloseDoesNotWaitForever(t *testing.T) {
	g := newGateConn(t)
	b := BatchConn(g, 0).(*batchConn)
	b.closeWait = 10 * time.Millisecond
	_, _ = b.Write([]byte("never taken"))
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a socket that takes nothing")
	}
}

// TestBatchConnBoundsWhatItHolds: while the socket takes nothing, a writer
// stops once batchConnLimit bytes are held, and goes on when it does.
func TestBatchConnBoundsWhatItHolds(t *testing.T) {
	g := newGateConn(t)
	b := BatchConn(g, 0).(*batchConn)
	var written atomic.Int64
	done := make(chan struct{})
	chunk := make([]byte, 64<<10)
	const total = 16 << 20
	go func() {
		defer close(done)
		for written.Load() < total {
			n, err := b.Write(chunk)
			if err != nil {
				return
			}
			written.Add(int64(n))
		}
	}()
	// The first batch is stuck in the socket; the writer fills the next up
	// to the limit and must then wait.
	poll.Until(t, 10*time.Second, "the buffer to fill", func() bool {
		b.w.mu.Lock()
		defer b.w.mu.Unlock()
		return len(b.w.buf) >= batchConnLimit
	})
	select {
	case <-done:
		t.Fatalf("the writer queued all %d bytes while the socket took none", written.Load())
	default:
	}
	if w := written.Load(); w > 2*batchConnLimit+int64(len(chunk)) {
		t.Fatalf("%d bytes queued while the socket took none, more than two batches", w)
	}
	close(g.open)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not go on once the socket took the bytes")
	}
	if w := written.Load(); w < total {
		t.Fatalf("the writer stopped at %d bytes", w)
	}
	_ = b.Close()
}
