package amqp

import (
	"net"
	"time"
)

// batchConnLimit bounds what a BatchConn holds unwritten: a writer that
// finds this much waits until the socket has taken it.
const batchConnLimit = 256 << 10

// batchConnCloseWait bounds how long Close waits for the buffered bytes to
// be written before it closes the socket under them.
const batchConnCloseWait = 5 * time.Second

// BatchConn returns nc with its writes gathered by this package's
// connection writer: Write copies the bytes and returns, and one goroutine
// writes what has gathered with one system call, as the broker's own
// connections do. It is for a client library that writes every frame with
// its own Write (go-amqp, which the cluster's relay uses). A write error is
// returned by the next Write; writes carry writeTimeout each (0: none), and
// SetWriteDeadline is ignored. Close writes what is buffered first, waiting
// at most five seconds for a peer that takes nothing.
func BatchConn(nc net.Conn, writeTimeout time.Duration) net.Conn {
	b := &batchConn{Conn: nc, w: newWriter(nc, batchConnLimit, writeTimeout), closeWait: batchConnCloseWait}
	go b.w.run()
	return b
}

type batchConn struct {
	net.Conn
	w         *writer
	closeWait time.Duration
}

// Write implements net.Conn: it queues p for the writer goroutine.
func (b *batchConn) Write(p []byte) (int, error) {
	if err := b.w.reserve(); err != nil {
		return 0, err
	}
	had := len(b.w.buf)
	b.w.buf = append(b.w.buf, p...)
	b.w.release(had)
	return len(p), nil
}

// SetWriteDeadline implements net.Conn; the writer's own timeout applies.
func (b *batchConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline implements net.Conn: it sets the read deadline only.
func (b *batchConn) SetDeadline(t time.Time) error { return b.Conn.SetReadDeadline(t) }

// Close implements net.Conn: it writes what is buffered, then closes.
func (b *batchConn) Close() error {
	b.w.close()
	t := time.NewTimer(b.closeWait)
	defer t.Stop()
	select {
	case <-b.w.done:
	case <-t.C:
	}
	err := b.Conn.Close()
	b.w.wait()
	return err
}
