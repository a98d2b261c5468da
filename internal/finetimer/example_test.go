package finetimer_test

import (
	"fmt"
	"time"

	"github.com/busbar-io/busbar/internal/finetimer"
)

// A quarter-millisecond wait that ends early when work arrives: with a
// time.Timer an idle process would wait about a millisecond.
func Example() {
	t := finetimer.New()
	defer func() { _ = t.Close() }()
	work := make(chan int)
	t.Reset(250 * time.Microsecond)
	select {
	case n := <-work:
		t.Stop()
		fmt.Println("work", n)
	case <-t.C():
		fmt.Println("deadline")
	}
	// Output: deadline
}
