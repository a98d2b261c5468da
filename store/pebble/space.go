package pebble

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/busbar-io/busbar/store"
)

// spaceCheckEvery is how long a free-space reading is trusted.
const spaceCheckEvery = 100 * time.Millisecond

var _ store.SpaceGuard = (*Store)(nil)

// spaceGuard caches the volume's free space for CheckSpace.
type spaceGuard struct {
	checked atomic.Int64  // UnixNano of the last reading; 0: none yet
	avail   atomic.Uint64 // bytes available at the last reading
	written atomic.Uint64 // the store's BytesWritten at the last reading
}

// CheckSpace implements store.SpaceGuard: it returns an error wrapping
// store.ErrFull while the volume holding the store has less than
// Options.MinFreeBytes available. The volume is read at most every 100 ms;
// in between, what the store committed since the reading counts as used.
func (s *Store) CheckSpace() error {
	if s.opts.MinFreeBytes < 0 {
		return nil
	}
	now := time.Now().UnixNano()
	if last := s.space.checked.Load(); last == 0 || now-last > int64(spaceCheckEvery) {
		u, err := s.opts.fs.GetDiskUsage(s.dir)
		if err != nil {
			return fmt.Errorf("store/pebble: reading the free space of %s: %w", s.dir, err)
		}
		s.space.written.Store(s.bytes.Load())
		s.space.avail.Store(u.AvailBytes)
		s.space.checked.Store(now)
	}
	avail := s.space.avail.Load()
	if used := s.bytes.Load() - s.space.written.Load(); used < avail {
		avail -= used
	} else {
		avail = 0
	}
	if avail < uint64(s.opts.MinFreeBytes) {
		return fmt.Errorf("%w: %d bytes free on the volume of %s, below the reserve of %d bytes kept for completions",
			store.ErrFull, avail, s.dir, s.opts.MinFreeBytes)
	}
	return nil
}
