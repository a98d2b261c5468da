package servicebus

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"time"
)

// batchConnLimit bounds what a batchConn holds unwritten: a writer that
// finds this much waits until the socket has taken it.
const batchConnLimit = 1 << 20

// batchConnCloseWait bounds how long Close waits for the buffered bytes to
// be written before it closes the socket under them.
const batchConnCloseWait = 5 * time.Second

// errBatchConnClosed is a batchConn's sticky error once it is closed.
var errBatchConnClosed = errors.New("servicebus: peer connection closed")

// batchConn is a net.Conn whose writes are gathered and written to the
// socket together by a goroutine of its own. The relay's internal client
// (go-amqp) writes every frame with its own Write, which was a system call
// per transfer, flow and disposition: 2.5 per forwarded message, a third of
// the forwarding node's CPU. Write copies the bytes and returns; a write
// error is returned by the next Write (go-amqp then closes the connection).
// Close writes what is buffered first, waiting at most closeWait.
type batchConn struct {
	net.Conn
	closeWait time.Duration

	mu       sync.Mutex
	room     sync.Cond // signalled when buf was taken, or on error or close
	buf      []byte    // bytes not yet handed to the socket
	spare    []byte
	deadline time.Time // the write deadline last set
	err      error     // sticky
	closing  bool
	wake     chan struct{} // capacity 1: buf became non-empty, or closing
	done     chan struct{} // closed when the writing goroutine returns
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c, closeWait: batchConnCloseWait, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.room.L = &b.mu
	go b.run()
	return b
}

// Write implements net.Conn: it queues p for the writing goroutine.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.buf) >= batchConnLimit && b.err == nil && !b.closing {
		b.room.Wait()
	}
	if b.err != nil || b.closing {
		err := b.err
		b.mu.Unlock()
		if err == nil {
			err = errBatchConnClosed
		}
		return 0, err
	}
	first := len(b.buf) == 0
	b.buf = append(b.buf, p...)
	b.mu.Unlock()
	if first {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// SetWriteDeadline implements net.Conn: the writing goroutine's next
// socket write uses it.
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	b.deadline = t
	b.mu.Unlock()
	return nil
}

// SetDeadline implements net.Conn.
func (b *batchConn) SetDeadline(t time.Time) error {
	_ = b.SetWriteDeadline(t)
	return b.Conn.SetReadDeadline(t)
}

// run writes the buffered bytes until Close, yielding once before each
// write so that frames queued by goroutines already running join it.
func (b *batchConn) run() {
	defer close(b.done)
	for {
		<-b.wake
		runtime.Gosched()
		b.mu.Lock()
		out, closing, deadline := b.buf, b.closing, b.deadline
		b.buf, b.spare = b.spare[:0], nil
		b.room.Broadcast()
		b.mu.Unlock()
		var err error
		if len(out) > 0 {
			_ = b.Conn.SetWriteDeadline(deadline)
			_, err = b.Conn.Write(out)
		}
		b.mu.Lock()
		b.spare = out[:0]
		if err != nil && b.err == nil {
			b.err = err
			b.room.Broadcast()
		}
		stop := closing && len(b.buf) == 0 || b.err != nil
		b.mu.Unlock()
		if stop {
			return
		}
	}
}

// Close implements net.Conn: it writes what is buffered, then closes. A
// peer that takes nothing for closeWait gets the socket closed under the
// write.
func (b *batchConn) Close() error {
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		b.room.Broadcast()
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(b.closeWait)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
	err := b.Conn.Close()
	<-b.done
	return err
}
