package memstore_test

import (
	"context"
	"fmt"

	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/memstore"
)

// A test of recovery commits through one handle, closes it as a stopping
// broker would, and reopens the same data.
func ExampleStore_Reopen() {
	s := memstore.New()
	var b store.Batch
	b.Set([]byte("entity/orders"), []byte("queue"))
	if err := s.Commit(context.Background(), &b); err != nil {
		panic(err)
	}
	_ = s.Close()

	restarted := s.Reopen()
	v, err := restarted.Get(context.Background(), []byte("entity/orders"))
	fmt.Printf("%s %v\n", v, err)
	// Output: queue <nil>
}
