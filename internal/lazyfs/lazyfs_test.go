//go:build linux

package lazyfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountT mounts a lazy file system in a temporary directory, or skips the
// test when FUSE is not available.
func mountT(t *testing.T) (*FS, string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("needs FUSE (/dev/fuse, as root): %v", err)
	}
	tmp := t.TempDir()
	mnt, cache, disk := filepath.Join(tmp, "mnt"), filepath.Join(tmp, "cache"), filepath.Join(tmp, "disk")
	for _, d := range []string{mnt, cache, disk} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Mount(mnt, cache, disk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unmount() })
	return l, mnt
}

func write(t *testing.T, f *os.File, p []byte) {
	t.Helper()
	if _, err := f.Write(p); err != nil {
		t.Fatal(err)
	}
}

// TestPowerOff: synced data survives, unsynced data is lost, names are
// durable at once, a torn power off keeps a prefix of the unsynced tail.
func TestPowerOff(t *testing.T) {
	l, mnt := mountT(t)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("s"), 10000)
	lost := bytes.Repeat([]byte("u"), 5000)
	f, err := os.Create(filepath.Join(mnt, "d", "log"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, synced)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write(t, f, lost)
	// Before the power goes, the unsynced bytes are there to read.
	if got, _ := os.ReadFile(filepath.Join(mnt, "d", "log")); len(got) != len(synced)+len(lost) {
		t.Fatalf("read %d bytes before the power off, want %d", len(got), len(synced)+len(lost))
	}
	// An unsynced new file keeps its name but not its data; a renamed one
	// keeps its new name.
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "new"), filepath.Join(mnt, "renamed")); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if l.Syncs() != 1 {
		t.Errorf("Syncs = %d, want 1", l.Syncs())
	}
	n, err := l.PowerOff(false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("PowerOff reported %d files with unsynced data, want 2", n)
	}
	got, err := os.ReadFile(filepath.Join(mnt, "d", "log"))
	if err != nil || !bytes.Equal(got, synced) {
		t.Fatalf("after the power off the log holds %d bytes (%v), want the %d synced ones", len(got), err, len(synced))
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "renamed")); err != nil || len(got) != 0 {
		t.Errorf("renamed unsynced file: %q, %v; want it empty", got, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old name of a renamed file is back: %v", err)
	}

	// A torn power off keeps a prefix of the unsynced bytes.
	f, err = os.OpenFile(filepath.Join(mnt, "d", "log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, lost)
	_ = f.Close()
	if _, err := l.PowerOff(true, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(mnt, "d", "log"))
	if len(got) < len(synced) || len(got) > len(synced)+len(lost) ||
		!bytes.Equal(got[:len(synced)], synced) || !bytes.Equal(got[len(synced):], lost[:len(got)-len(synced)]) {
		t.Errorf("after a torn power off the log holds %d bytes, not the synced ones and a prefix of the rest", len(got))
	}
}

// TestFailSyncs: a failed fsync reports EIO and its data is lost at the
// power off although it could be read before.
func TestFailSyncs(t *testing.T) {
	l, mnt := mountT(t)
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, []byte("kept"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	l.FailSyncs(true)
	write(t, f, []byte("gone"))
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync with failing syncs: %v, want EIO", err)
	}
	l.FailSyncs(false)
	// The retried fsync succeeds but has nothing left to write: Linux
	// forgets the pages whose writeback failed.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if got, _ := os.ReadFile(p); string(got) != "keptgone" {
		t.Fatalf("before the power off: %q", got)
	}
	if _, err := l.PowerOff(false, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "kept" {
		t.Errorf("after the power off: %q, want %q", got, "kept")
	}
}
