package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
	"github.com/busbar-io/busbar/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(*testing.T) store.Store { return memstore.New() },
		Reopen: func(_ *testing.T, s store.Store) store.Store {
			return s.(*memstore.Store).Reopen()
		},
		Durable: false,
	})
}

func TestReopenSharesData(t *testing.T) {
	a := memstore.New()
	b := a.Reopen()
	var batch store.Batch
	batch.Set([]byte("k"), []byte("v"))
	if err := a.Commit(context.Background(), &batch); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// A handle taken before the commit sees it, and outlives the closed one.
	got, err := b.Get(context.Background(), []byte("k"))
	if err != nil || string(got) != "v" {
		t.Fatalf("Get through the other handle = %q, %v", got, err)
	}
	if _, err := a.Get(context.Background(), []byte("k")); err != store.ErrClosed {
		t.Fatalf("closed handle Get: %v, want ErrClosed", err)
	}
}

// TestScanWhileDeleting deletes each key from inside the Scan callback: the
// chunked scan must resume after the deleted cursor and see every key once.
func TestScanWhileDeleting(t *testing.T) {
	s := memstore.New()
	const n = 1000
	var b store.Batch
	for i := range n {
		b.Set(fmt.Appendf(nil, "k%05d", i), []byte("v"))
	}
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err := s.Scan(context.Background(), nil, nil, func(k, _ []byte) error {
		if want := fmt.Sprintf("k%05d", seen); string(k) != want {
			return fmt.Errorf("scan saw %q, want %q", k, want)
		}
		seen++
		var d store.Batch
		d.Delete(k)
		return s.Commit(context.Background(), &d)
	})
	if err != nil || seen != n {
		t.Fatalf("Scan deleting as it goes: saw %d keys, %v; want %d", seen, err, n)
	}
	if err := s.Scan(context.Background(), nil, nil, func(k, _ []byte) error { return fmt.Errorf("left %q", k) }); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteOnceOfAKeyWrittenTwiceIsRefused: memstore holds callers to the
// contract the embedded store cannot check (there, the older value could
// come back).
func TestDeleteOnceOfAKeyWrittenTwiceIsRefused(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	defer s.Close()
	for _, v := range []string{"1", "2"} {
		var b store.Batch
		b.Set([]byte("k"), []byte(v))
		if err := s.Commit(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	var b store.Batch
	b.Set([]byte("other"), []byte("x"))
	b.DeleteOnce([]byte("k"))
	if err := s.Commit(ctx, &b); err == nil {
		t.Fatal("DeleteOnce of a key set twice was accepted")
	}
	if n := s.DeleteOnceViolations(); n != 1 {
		t.Fatalf("%d violations, want 1", n)
	}
	// Nothing of the refused batch applied.
	if v, err := s.Get(ctx, []byte("k")); err != nil || string(v) != "2" {
		t.Fatalf("k = %q, %v after the refused batch", v, err)
	}
	if _, err := s.Get(ctx, []byte("other")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other: %v, want not found", err)
	}
	// Within one batch: set twice, then DeleteOnce.
	b = store.Batch{}
	b.Set([]byte("j"), []byte("1"))
	b.Set([]byte("j"), []byte("2"))
	b.DeleteOnce([]byte("j"))
	if err := s.Commit(ctx, &b); err == nil {
		t.Fatal("DeleteOnce after two sets in one batch was accepted")
	}
}
