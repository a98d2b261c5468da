package admin

import (
	"context"
	"net/http"
	"testing"

	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// A key without Manage gets Service Bus's 401 texts on an existing queue:
// read and list "Manage,EntityRead claims required", update
// "Manage,EntityWrite", delete "Manage,EntityDelete"; subscriptions name
// the operation.
func TestNoManageTexts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	root := e.root()
	if _, err := root.CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := root.CreateSubscription(ctx, "t", "s", nil); err != nil {
		t.Fatal(err)
	}
	c := e.client(listenName, listenKey, "")
	_, err := c.GetQueue(ctx, "q", nil)
	responseError(t, err, http.StatusUnauthorized, "Manage,EntityRead claims required for this operation.")
	_, err = c.NewListQueuesPager(nil).NextPage(ctx)
	responseError(t, err, http.StatusUnauthorized, "Manage,EntityRead claims required for this operation.")
	_, err = c.UpdateQueue(ctx, "q", sbadmin.QueueProperties{}, nil)
	responseError(t, err, http.StatusUnauthorized, "Authorization failed for specified action: Manage,EntityWrite.")
	_, err = c.DeleteQueue(ctx, "q", nil)
	responseError(t, err, http.StatusUnauthorized, "Authorization failed for specified action: Manage,EntityDelete.")
	_, err = c.GetSubscription(ctx, "t", "s", nil)
	responseError(t, err, http.StatusUnauthorized, "401 SubCode=40100: Unauthorized : Unauthorized access for 'GetSubscription' operation")
	_, err = c.GetSubscription(ctx, "t", "missing", nil)
	responseError(t, err, http.StatusUnauthorized, "401 SubCode=40100: Unauthorized : Unauthorized access for 'GetSubscription' operation")
	_, err = c.DeleteSubscription(ctx, "t", "s", nil)
	responseError(t, err, http.StatusUnauthorized, "Unauthorized access for 'DeleteSubscription' operation")
	if q, err := root.GetQueue(ctx, "q", nil); err != nil || q == nil {
		t.Fatalf("the queue is gone after refused requests: %v, %v", q, err)
	}
}
