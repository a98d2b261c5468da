package uring

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// newSyncer returns a Syncer, or skips where this machine has no io_uring.
func newSyncer(t *testing.T) *Syncer {
	t.Helper()
	s, err := New()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// noPlainFsync fails the test if a flush falls back to fdatasync(2).
func noPlainFsync(t *testing.T) {
	t.Helper()
	old := plainFsync
	plainFsync = func(fd int) error {
		t.Errorf("fdatasync(%d) called directly; the ring should have flushed it", fd)
		return old(fd)
	}
	t.Cleanup(func() { plainFsync = old })
}

func tempFile(t *testing.T, data string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFdatasyncFlushesThroughTheRing(t *testing.T) {
	s := newSyncer(t)
	noPlainFsync(t)
	f := tempFile(t, "hello")
	for range 3 {
		if err := s.Fdatasync(f.Fd()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFdatasyncReportsTheFlushsError(t *testing.T) {
	s := newSyncer(t)
	noPlainFsync(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fd := r.Fd()
	_ = r.Close()
	_ = w.Close()
	if err := s.Fdatasync(fd); !errors.Is(err, unix.EBADF) {
		t.Fatalf("flushing a closed descriptor: %v, want EBADF", err)
	}
	// The ring still works after an operation failed.
	if err := s.Fdatasync(tempFile(t, "x").Fd()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentFlushesTakeTurns(t *testing.T) {
	s := newSyncer(t)
	noPlainFsync(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		f := tempFile(t, string(rune('a'+i)))
		wg.Go(func() {
			for range 8 {
				if err := s.Fdatasync(f.Fd()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestABrokenRingFallsBackToFdatasync(t *testing.T) {
	s := newSyncer(t)
	var plain []int
	old := plainFsync
	plainFsync = func(fd int) error { plain = append(plain, fd); return old(fd) }
	t.Cleanup(func() { plainFsync = old })

	_ = s.efd.Close() // the wait for the completion now fails
	f := tempFile(t, "x")
	for range 2 {
		if err := s.Fdatasync(f.Fd()); err != nil {
			t.Fatal(err)
		}
	}
	if len(plain) != 2 || !s.broken {
		t.Fatalf("flushes with fdatasync(2): %d (broken %v), want 2 and a broken ring", len(plain), s.broken)
	}
	s.efd = nil // closed above
}

func TestCloseThenFlushUsesFdatasync(t *testing.T) {
	s := newSyncer(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := 0
	old := plainFsync
	plainFsync = func(fd int) error { calls++; return old(fd) }
	t.Cleanup(func() { plainFsync = old })
	if err := s.Fdatasync(tempFile(t, "x").Fd()); err != nil || calls != 1 {
		t.Fatalf("flush after Close: %v, fdatasync(2) calls %d, want nil and 1", err, calls)
	}
}

func TestNewWithoutIOUring(t *testing.T) {
	old := setup
	setup = func(*params) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { setup = old })
	if s, err := New(); !errors.Is(err, ErrUnavailable) || s != nil {
		t.Fatalf("New on a system without io_uring: %v, %v; want ErrUnavailable", s, err)
	}
}
