package amqp

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/amqp/frames"
)

// errIdleTimeout is returned by the frame reader when the peer sent nothing
// within our advertised idle timeout.
var errIdleTimeout = errors.New("amqp: peer idle timeout expired")

// frameError is a violation found while reading a frame header: the
// connection is closed with this condition.
type frameError struct{ err *frames.Error }

// Error implements error.
func (e *frameError) Error() string { return e.err.Error() }

// frameReader reads whole frames from the socket into one reusable buffer.
// A returned frame aliases the buffer and is valid until the next call.
//
// Idle detection: with idle > 0 the reader keeps a read deadline at most idle
// after the last byte received; when it fires it checks the real time of the
// last receipt, so the peer is given exactly idle of silence, without
// resetting the deadline on every read.
type frameReader struct {
	nc   net.Conn
	buf  []byte
	r, w int

	stopping *atomic.Bool  // set once close was sent: a timeout then ends reading
	idle     time.Duration // 0 = no idle detection
	lastRecv time.Time
	deadline time.Time // the deadline currently set on nc (zero = none)
}

func newFrameReader(nc net.Conn, size int, stopping *atomic.Bool) *frameReader {
	return &frameReader{nc: nc, buf: make([]byte, size), stopping: stopping}
}

// setIdle switches to idle detection (d > 0) or to no deadline (d == 0).
func (fr *frameReader) setIdle(d time.Duration) {
	fr.idle = d
	fr.lastRecv = time.Now()
	fr.deadline = time.Time{}
	if d == 0 {
		_ = fr.nc.SetReadDeadline(time.Time{})
	}
}

// setDeadline sets an absolute deadline (handshake, close grace period) and
// turns idle detection off.
func (fr *frameReader) setDeadline(t time.Time) {
	fr.idle = 0
	fr.deadline = t
	_ = fr.nc.SetReadDeadline(t)
}

// read performs one Read, managing the idle deadline.
func (fr *frameReader) read(p []byte) (int, error) {
	for {
		if fr.idle > 0 && fr.deadline.IsZero() && !fr.stopping.Load() {
			fr.deadline = fr.lastRecv.Add(fr.idle)
			_ = fr.nc.SetReadDeadline(fr.deadline)
		}
		n, err := fr.nc.Read(p)
		if n > 0 && fr.idle > 0 {
			fr.lastRecv = time.Now()
		}
		if err != nil && n == 0 && fr.idle > 0 {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !fr.stopping.Load() {
				if time.Since(fr.lastRecv) < fr.idle {
					fr.deadline = time.Time{} // re-arm from the last receipt
					continue
				}
				return 0, errIdleTimeout
			}
		}
		return n, err
	}
}

// fill makes sure at least n unread bytes are buffered. The buffer grows
// only as data actually arrives, so a peer cannot make us allocate a frame's
// declared size without sending it.
func (fr *frameReader) fill(n int) error {
	for fr.w-fr.r < n {
		if fr.r > 0 && fr.r+n > len(fr.buf) {
			copy(fr.buf, fr.buf[fr.r:fr.w])
			fr.w -= fr.r
			fr.r = 0
		}
		if fr.w == len(fr.buf) {
			size := 2 * len(fr.buf)
			if size > n {
				size = n
			}
			nb := make([]byte, size)
			copy(nb, fr.buf[:fr.w])
			fr.buf = nb
		}
		m, err := fr.read(fr.buf[fr.w:])
		fr.w += m
		if err != nil {
			if fr.w-fr.r >= n {
				return nil
			}
			return err
		}
	}
	return nil
}

// protoHeader reads the 8-byte protocol header.
func (fr *frameReader) protoHeader() ([8]byte, error) {
	var h [8]byte
	if err := fr.fill(8); err != nil {
		return h, err
	}
	copy(h[:], fr.buf[fr.r:fr.r+8])
	fr.r += 8
	return h, nil
}

// next reads one frame of at most max bytes. It validates the header: a size
// below 8 or above max, or a data offset outside the frame, is a framing
// error.
func (fr *frameReader) next(max uint32) (frames.Header, []byte, error) {
	if err := fr.fill(frames.HeaderSize); err != nil {
		return frames.Header{}, nil, err
	}
	h, err := frames.ParseHeader(fr.buf[fr.r : fr.r+frames.HeaderSize])
	if err != nil {
		return h, nil, &frameError{NewError(CondFramingError, "malformed frame header: %v", err)}
	}
	if h.Size > max {
		return h, nil, &frameError{NewError(CondFramingError, "frame of %d bytes exceeds the max-frame-size of %d", h.Size, max)}
	}
	if uint32(h.DataOff)*4 > h.Size {
		return h, nil, &frameError{NewError(CondFramingError, "frame data offset %d words is beyond the frame size %d", h.DataOff, h.Size)}
	}
	if err := fr.fill(int(h.Size)); err != nil {
		return h, nil, err
	}
	f := fr.buf[fr.r : fr.r+int(h.Size)]
	fr.r += int(h.Size)
	if fr.r == fr.w {
		fr.r, fr.w = 0, 0
	}
	return h, f, nil
}

// buffered reports whether a whole frame is already buffered, so that the
// next call to next needs no read.
func (fr *frameReader) buffered() bool {
	n := fr.w - fr.r
	if n < frames.HeaderSize {
		return false
	}
	size := uint32(fr.buf[fr.r])<<24 | uint32(fr.buf[fr.r+1])<<16 | uint32(fr.buf[fr.r+2])<<8 | uint32(fr.buf[fr.r+3])
	return uint64(n) >= uint64(size)
}
