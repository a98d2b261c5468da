package uring

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// From linux/io_uring.h.
const (
	opNop            = 0
	opFsync          = 3
	fsyncDatasync    = 1 << 0
	registerEventfd  = 4
	offSQRing        = 0
	offCQRing        = 0x8000000
	offSQEs          = 0x10000000
	featSingleMmap   = 1 << 0
	ringEntries      = 4 // one operation at a time, and a few spare
	sqeSize, cqeSize = 64, 16
)

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad         uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Syncer runs one fdatasync at a time through its own io_uring. It is safe
// for concurrent use; concurrent calls take turns.
type Syncer struct {
	mu     sync.Mutex
	fd     int
	maps   [][]byte
	sqTail *uint32 // one operation at a time: the ring never fills, its head is not read
	sqMask uint32
	sqArr  unsafe.Pointer // uint32 indexes into sqes
	sqes   unsafe.Pointer
	cqHead *uint32
	cqTail *uint32
	cqMask uint32
	cqes   unsafe.Pointer
	efd    *os.File
	next   uint64 // user data of the last operation submitted
	broken bool   // the ring failed: flush without it
	closed bool
}

// Hooks for tests.
var (
	setup      = ringSetup
	plainFsync = unix.Fdatasync
)

func ringSetup(p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, ringEntries, uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// New sets up a ring and checks it answers; ErrUnavailable (wrapped) if the
// system has no io_uring or refuses it.
func New() (*Syncer, error) {
	var p params
	fd, err := setup(&p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s := &Syncer{fd: fd}
	if err := s.init(&p); err != nil {
		_ = s.release()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// A no-op round trip proves the ring, its eventfd and the poller work.
	if res, err := s.do(sqe{opcode: opNop, fd: -1}); err != nil || res != 0 {
		_ = s.release()
		return nil, fmt.Errorf("%w: no-op answered %d, %v", ErrUnavailable, res, err)
	}
	return s, nil
}

func (s *Syncer) mmap(off int64, size uint32) ([]byte, error) {
	b, err := unix.Mmap(s.fd, off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	s.maps = append(s.maps, b)
	return b, nil
}

func (s *Syncer) init(p *params) error {
	sqSize := p.sqOff.array + p.sqEntries*4
	cqSize := p.cqOff.cqes + p.cqEntries*cqeSize
	if p.features&featSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
	}
	sq, err := s.mmap(offSQRing, sqSize)
	if err != nil {
		return err
	}
	cq := sq
	if p.features&featSingleMmap == 0 {
		if cq, err = s.mmap(offCQRing, cqSize); err != nil {
			return err
		}
	}
	sqes, err := s.mmap(offSQEs, p.sqEntries*sqeSize)
	if err != nil {
		return err
	}
	at := func(b []byte, off uint32) unsafe.Pointer { return unsafe.Pointer(&b[off]) }
	s.sqTail = (*uint32)(at(sq, p.sqOff.tail))
	s.sqMask, s.sqArr = *(*uint32)(at(sq, p.sqOff.ringMask)), at(sq, p.sqOff.array)
	s.cqHead, s.cqTail = (*uint32)(at(cq, p.cqOff.head)), (*uint32)(at(cq, p.cqOff.tail))
	s.cqMask, s.cqes = *(*uint32)(at(cq, p.cqOff.ringMask)), at(cq, p.cqOff.cqes)
	s.sqes = at(sqes, 0)

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	// A non-blocking descriptor becomes a pollable File: Read parks the
	// goroutine in the runtime's poller instead of blocking a thread.
	s.efd = os.NewFile(uintptr(efd), "io_uring eventfd")
	arg := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(s.fd), registerEventfd, uintptr(unsafe.Pointer(&arg)), 1, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// Fdatasync flushes the file fd's data (and the metadata needed to read it)
// to disk, as fdatasync(2). If the ring fails, it and every later call
// flush with fdatasync(2) itself: the data is flushed either way.
func (s *Syncer) Fdatasync(fd uintptr) error {
	res, err := s.do(sqe{opcode: opFsync, fd: int32(fd), opFlags: fsyncDatasync})
	switch {
	case err != nil:
		return plainFsync(int(fd))
	case res == -int32(unix.EINVAL) || res == -int32(unix.EOPNOTSUPP):
		return plainFsync(int(fd)) // a file the ring cannot flush
	case res < 0:
		return unix.Errno(-res)
	}
	return nil
}

var errBroken = errors.New("uring: ring failed")

// do submits one operation and waits for its completion; err is a failure
// of the ring, res the operation's result (a negated errno on failure).
func (s *Syncer) do(op sqe) (res int32, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, os.ErrClosed
	}
	if s.broken {
		return 0, errBroken
	}
	s.next++
	tail := atomic.LoadUint32(s.sqTail)
	i := tail & s.sqMask
	op.userData = s.next
	*(*sqe)(unsafe.Add(s.sqes, uintptr(i)*sqeSize)) = op
	*(*uint32)(unsafe.Add(s.sqArr, uintptr(i)*4)) = i
	atomic.StoreUint32(s.sqTail, tail+1)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(s.fd), 1, 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n != 1 {
			s.broken = true
			return 0, errBroken
		}
		break
	}
	var buf [8]byte
	for {
		head := atomic.LoadUint32(s.cqHead)
		if head != atomic.LoadUint32(s.cqTail) {
			c := (*cqe)(unsafe.Add(s.cqes, uintptr(head&s.cqMask)*cqeSize))
			ud, r := c.userData, c.res
			atomic.StoreUint32(s.cqHead, head+1)
			if ud == s.next {
				return r, nil
			}
			continue // not ours: cannot happen with one operation at a time
		}
		// The ring signals the eventfd after it posts a completion; a
		// count left from an operation reaped before its signal was read
		// only sends the loop round once more.
		if _, err := s.efd.Read(buf[:]); err != nil {
			s.broken = true
			return 0, errBroken
		}
	}
}

// Close releases the ring after any operation in flight finished.
func (s *Syncer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.release()
}

func (s *Syncer) release() error {
	var errs []error
	if s.efd != nil {
		errs = append(errs, s.efd.Close())
	}
	for _, b := range s.maps {
		errs = append(errs, unix.Munmap(b))
	}
	s.maps = nil
	errs = append(errs, unix.Close(s.fd))
	return errors.Join(errs...)
}
