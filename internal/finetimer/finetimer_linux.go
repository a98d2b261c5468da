package finetimer

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sysTimer is a timerfd whose expirations a goroutine reads through the
// runtime's poller; where the system refuses a timerfd (a sandbox), a
// time.Timer.
type sysTimer struct {
	fd   int
	file *os.File
	done chan struct{}

	fallback *time.Timer
}

// timerfdCreate is unix.TimerfdCreate; tests refuse it.
var timerfdCreate = unix.TimerfdCreate

func (s *sysTimer) open(expired func()) {
	fd, err := timerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		s.fallback = stoppedTimer(expired)
		return
	}
	// A non-blocking descriptor becomes a pollable File: Read parks the
	// goroutine in the network poller instead of blocking a thread.
	s.fd, s.file, s.done = fd, os.NewFile(uintptr(fd), "timerfd"), make(chan struct{})
	go s.read(expired)
}

func (s *sysTimer) read(expired func()) {
	defer close(s.done)
	var buf [8]byte // the number of expirations, which does not matter
	for {
		if _, err := s.file.Read(buf[:]); err != nil {
			return // closed
		}
		expired()
	}
}

func (s *sysTimer) arm(d time.Duration) {
	if s.fallback != nil {
		s.fallback.Reset(d)
		return
	}
	if d <= 0 {
		d = 1 // a zero it_value would disarm the timerfd
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	// The descriptor is valid until close, and these arguments are
	// valid: timerfd_settime cannot fail here.
	_ = unix.TimerfdSettime(s.fd, 0, &spec, nil)
}

func (s *sysTimer) close() error {
	if s.fallback != nil {
		s.fallback.Stop()
		return nil
	}
	err := s.file.Close()
	<-s.done
	return err
}
