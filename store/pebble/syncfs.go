package pebble

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/internal/uring"
)

// syncCountingFS wraps a vfs.FS and counts the fsyncs of write-ahead-log
// files (*.log): the number behind Stats.Syncs. Counting at the file is exact
// even when Pebble folds several of our group commits into one fsync, which
// its WAL writer does whenever a commit arrives while a sync is in progress.
type syncCountingFS struct {
	vfs.FS
	syncs atomic.Uint64
	// ring, when set, flushes the WAL files without blocking a thread of
	// the Go runtime (internal/uring); only for files of the OS's own file
	// system, whose descriptors it can flush. It is used while busy, which
	// the committer sets for a group of ringMinOps operations or more;
	// ringSyncs counts the flushes it made.
	ring      *uring.Syncer
	busy      atomic.Bool
	ringSyncs atomic.Uint64
	onSync    func(time.Duration) // Options.OnSync
}

// ringMinOps is the size of a group commit, in operations, from which its
// fsync goes through the ring. A goroutine blocked in fdatasync loses its P
// to another thread only when the runtime has other work for the P; at low
// rates it has none, and the ring's hand-off to a kernel worker and back
// through the poller costs more than the flush itself: at 5,000 msg/s the
// ring took 7% more CPU per message, at W4's 100,000 7% less. Groups carry
// two or three operations at the former, over a hundred at the latter.
const ringMinOps = 32

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs *syncCountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &syncCountingFile{File: f, fs: fs}, nil
}

// Create implements vfs.FS.
func (fs *syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

// ReuseForWrite implements vfs.FS; Pebble recycles old WAL files this way.
func (fs *syncCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// OpenReadWrite implements vfs.FS.
func (fs *syncCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

// syncCountingFile counts the syncs of one WAL file in its FS.
type syncCountingFile struct {
	vfs.File
	fs *syncCountingFS
}

// Sync implements vfs.File.
func (f *syncCountingFile) Sync() error {
	f.fs.syncs.Add(1)
	if skipWALSync {
		return nil
	}
	defer f.fs.timeSync(time.Now())
	return f.File.Sync()
}

// SyncData implements vfs.File.
func (f *syncCountingFile) SyncData() error {
	f.fs.syncs.Add(1)
	if skipWALSync {
		return nil
	}
	defer f.fs.timeSync(time.Now())
	if f.fs.ring != nil && f.fs.busy.Load() {
		f.fs.ringSyncs.Add(1)
		return f.fs.ring.Fdatasync(f.File.Fd())
	}
	return f.File.SyncData()
}

// timeSync reports the duration of an fsync that started at start.
func (fs *syncCountingFS) timeSync(start time.Time) {
	if fs.onSync != nil {
		fs.onSync(time.Since(start))
	}
}

// SyncTo implements vfs.File; only the busbar_ackbeforesync build changes
// it (to skip the sync).
func (f *syncCountingFile) SyncTo(length int64) (fullSync bool, err error) {
	if skipWALSync {
		return false, nil
	}
	return f.File.SyncTo(length)
}
