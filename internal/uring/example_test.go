package uring_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/busbar-io/busbar/internal/uring"
)

// Flush a file without blocking a thread of the Go runtime, or with
// fdatasync(2) where io_uring is not available.
func Example() {
	f, err := os.CreateTemp("", "wal")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = os.Remove(f.Name()) }()
	defer func() { _ = f.Close() }()
	_, _ = f.WriteString("record")

	ring, err := uring.New()
	switch {
	case errors.Is(err, uring.ErrUnavailable):
		err = f.Sync()
	case err == nil:
		defer func() { _ = ring.Close() }()
		err = ring.Fdatasync(f.Fd())
	}
	fmt.Println("flushed:", err == nil)
	// Output: flushed: true
}
