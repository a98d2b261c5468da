package pebble

import (
	"testing"

	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/storetest"
)

// openT opens a store in a fresh temporary directory.
func openT(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return openT(t, Options{}) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			r, err := Open(s.(*Store).Dir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Durable: true,
	})
}
