package pebble

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/busbar-io/busbar/internal/uring"
	"github.com/busbar-io/busbar/store"
)

// A store on the OS's file system flushes its write-ahead log through an
// io_uring where the system has one, for groups of ringMinOps operations
// or more; a store on any other file system (a test's) through that file
// system's own SyncData.
func TestWALFlushesThroughIOURingOnTheOSFileSystem(t *testing.T) {
	probe, err := uring.New()
	if errors.Is(err, uring.ErrUnavailable) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = probe.Close()

	for _, tc := range []struct {
		name     string
		fs       vfs.FS
		wantRing bool
	}{
		{"os", nil, true},
		{"wrapped", struct{ vfs.FS }{vfs.Default}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{fs: tc.fs})
			if err != nil {
				t.Fatal(err)
			}
			if (s.fs.ring != nil) != tc.wantRing {
				t.Fatalf("ring %v, want one: %v", s.fs.ring != nil, tc.wantRing)
			}
			for _, n := range []int{1, ringMinOps, 1} {
				var b store.Batch
				for i := range n {
					b.Set(fmt.Appendf(nil, "k%d", i), []byte("v"))
				}
				syncs, ringSyncs := s.Stats().Syncs, s.fs.ringSyncs.Load()
				if err := s.Commit(context.Background(), &b); err != nil {
					t.Fatal(err)
				}
				if st := s.Stats(); st.Syncs == syncs {
					t.Fatalf("a commit of %d operations made no fsync: %+v", n, st)
				}
				viaRing := s.fs.ringSyncs.Load() > ringSyncs
				if want := tc.wantRing && n >= ringMinOps; viaRing != want {
					t.Fatalf("a group of %d operations flushed through the ring: %v, want %v", n, viaRing, want)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(s.Dir(), Options{fs: tc.fs})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s2.Close() }()
			if v, err := s2.Get(context.Background(), []byte("k0")); err != nil || string(v) != "v" {
				t.Fatalf("after reopening: %q, %v", v, err)
			}
		})
	}
}
