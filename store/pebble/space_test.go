package pebble

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
)

// diskFS reports a free space the test sets.
type diskFS struct {
	vfs.FS
	avail atomic.Uint64
}

func (d *diskFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: d.avail.Load()}, nil
}

// TestCheckSpace: CheckSpace fails with store.ErrFull below the reserve,
// counts what the store commits between two readings as used, and passes
// again once the volume has room. The periodic reading is off (an hour): a
// reading between the commit and the test's next figure for the volume
// would see the old figure with the commit counted, as no real disk would.
func TestCheckSpace(t *testing.T) {
	fs := &diskFS{FS: vfs.Default}
	fs.avail.Store(3 << 20)
	s, err := Open(t.TempDir(), Options{fs: fs, MinFreeBytes: 1 << 20, spaceEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSpace(); err != nil {
		t.Fatalf("3 MiB free, 1 MiB reserve: %v", err)
	}
	// 2.5 MiB committed before the next reading leave 0.5 MiB: below.
	var b store.Batch
	b.Set([]byte("k"), make([]byte, 5<<19))
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	fs.avail.Store(512 << 10)
	if err := s.CheckSpace(); !errors.Is(err, store.ErrFull) {
		t.Fatalf("after 2.5 MiB committed on 3 MiB free: %v, want store.ErrFull", err)
	}
	fs.avail.Store(64 << 20)
	poll.Until(t, 5*time.Second, "CheckSpace passing once space returns", func() bool { return s.CheckSpace() == nil })
}

// TestCheckSpaceOff: a negative MinFreeBytes turns the check off.
func TestCheckSpaceOff(t *testing.T) {
	fs := &diskFS{FS: vfs.Default}
	s, err := Open(t.TempDir(), Options{fs: fs, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSpace(); err != nil {
		t.Fatalf("with the check off and no free space: %v", err)
	}
}
