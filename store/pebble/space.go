package pebble

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/store"
)

// spaceCheckEvery is how often the volume's free space is read.
const spaceCheckEvery = 100 * time.Millisecond

var _ store.SpaceGuard = (*Store)(nil)

// spaceGuard reads the volume's free space in the background, so that
// CheckSpace, on every send, costs two atomic loads and no system call or
// clock read.
type spaceGuard struct {
	avail   atomic.Uint64 // bytes available at the last reading
	written atomic.Uint64 // the store's BytesWritten at the last reading
	read    atomic.Bool   // a reading exists
	quit    chan struct{}
	stopped chan struct{}
}

// startSpaceGuard reads the free space now and then every spaceCheckEvery
// until stopSpaceGuard; a negative MinFreeBytes turns it off.
func (s *Store) startSpaceGuard() {
	if s.opts.MinFreeBytes < 0 {
		return
	}
	g := &s.space
	g.quit, g.stopped = make(chan struct{}), make(chan struct{})
	s.readSpace()
	go func() {
		defer close(g.stopped)
		every := s.opts.spaceEvery
		if every == 0 {
			every = spaceCheckEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.readSpace()
			case <-g.quit:
				return
			}
		}
	}()
}

func (s *Store) stopSpaceGuard() {
	if s.space.quit != nil {
		close(s.space.quit)
		<-s.space.stopped
	}
}

// readSpace records the volume's free space; a failed reading keeps the
// previous one (Pebble logs disk trouble itself).
func (s *Store) readSpace() {
	u, err := s.opts.fs.GetDiskUsage(s.dir)
	if err != nil {
		return
	}
	s.space.written.Store(s.bytes.Load())
	s.space.avail.Store(u.AvailBytes)
	s.space.read.Store(true)
}

// availEstimate is the last reading less what the store committed since.
func (s *Store) availEstimate() uint64 {
	avail := s.space.avail.Load()
	if used := s.bytes.Load() - s.space.written.Load(); used < avail {
		return avail - used
	}
	return 0
}

// CheckSpace implements store.SpaceGuard: it returns an error wrapping
// store.ErrFull while the volume holding the store has less than
// Options.MinFreeBytes available. The volume is read every 100 ms; in
// between, what the store committed since the reading counts as used, and
// an estimate below the reserve is checked with a fresh reading before a
// write is refused.
func (s *Store) CheckSpace() error {
	if s.opts.MinFreeBytes < 0 || !s.space.read.Load() {
		return nil
	}
	avail := s.availEstimate()
	if avail < uint64(s.opts.MinFreeBytes) {
		// Refuse on a fresh reading only: the last one may be stale.
		s.readSpace()
		avail = s.availEstimate()
	}
	if avail < uint64(s.opts.MinFreeBytes) {
		return fmt.Errorf("%w: %d bytes free on the volume of %s, below the reserve of %d bytes kept for completions",
			store.ErrFull, avail, s.dir, s.opts.MinFreeBytes)
	}
	return nil
}
