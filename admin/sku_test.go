package admin

import (
	"context"
	"testing"

	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// On a Standard namespace a partitioned queue reports 16 partitions' worth
// of MaxSizeInMegabytes, an update that sends that total back keeps the
// per-partition size, and the namespace reports its tier; a Premium one
// reports the size given.
func TestStandardPartitionedSize(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(o *Options) { o.SKU = "Standard" })
	c := e.root()
	yes, size := true, int32(4096)
	created, err := c.CreateQueue(ctx, "p", &sbadmin.CreateQueueOptions{Properties: &sbadmin.QueueProperties{EnablePartitioning: &yes, MaxSizeInMegabytes: &size}})
	if err != nil {
		t.Fatal(err)
	}
	if *created.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("created partitioned queue reports %d MB, want %d", *created.MaxSizeInMegabytes, 16*4096)
	}
	updated, err := c.UpdateQueue(ctx, "p", created.QueueProperties, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *updated.MaxSizeInMegabytes != 16*4096 {
		t.Fatalf("after an update echoing it, the queue reports %d MB, want %d", *updated.MaxSizeInMegabytes, 16*4096)
	}
	if q, err := e.b.GetQueue(ctx, "p"); err != nil || q.Properties.MaxSizeInMegabytes != 4096 {
		t.Fatalf("the broker keeps %+v, %v; want 4096 MB per partition", q, err)
	}
	ns, err := c.GetNamespaceProperties(ctx, nil)
	if err != nil || ns.SKU != "Standard" || ns.MessagingUnits != nil {
		t.Fatalf("namespace %+v, %v; want SKU Standard without messaging units", ns, err)
	}

	premium := newEnv(t).root()
	pq, err := premium.CreateQueue(ctx, "p", &sbadmin.CreateQueueOptions{Properties: &sbadmin.QueueProperties{EnablePartitioning: &yes, MaxSizeInMegabytes: &size}})
	if err != nil {
		t.Fatal(err)
	}
	if *pq.MaxSizeInMegabytes != 4096 {
		t.Fatalf("Premium partitioned queue reports %d MB, want 4096", *pq.MaxSizeInMegabytes)
	}
}
