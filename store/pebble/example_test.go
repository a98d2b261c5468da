package pebble_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/busbar-io/busbar/store"
	"github.com/busbar-io/busbar/store/pebble"
)

func Example() {
	dir, err := os.MkdirTemp("", "busbar-store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// One batch: both messages are durable, or neither, when Commit returns.
	var b store.Batch
	b.Set([]byte("q/orders/0001"), []byte("first"))
	b.Set([]byte("q/orders/0002"), []byte("second"))
	if err := s.Commit(context.Background(), &b); err != nil {
		log.Fatal(err)
	}

	// Complete the first message.
	b.Reset()
	b.Delete([]byte("q/orders/0001"))
	if err := s.Commit(context.Background(), &b); err != nil {
		log.Fatal(err)
	}

	err = s.Scan(context.Background(), []byte("q/orders/"), []byte("q/orders0"), func(k, v []byte) error {
		fmt.Printf("%s = %s\n", k, v)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	st := s.Stats()
	fmt.Println("commits:", st.Commits, "ops:", st.Ops)
	// Output:
	// q/orders/0002 = second
	// commits: 2 ops: 3
}
