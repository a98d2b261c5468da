package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// CreateQueue creates name as a queue fit for a pipeline or a BrokerStore,
// unless it exists: session-enabled, with duplicate detection over an hour
// (a repeated Submit or Resubmit is dropped), and a MaxDeliveryCount of 100
// so that Options.MaxAttempts, not the broker, decides when a task has
// failed. An existing queue is left as it is.
func CreateQueue(ctx context.Context, ac *admin.Client, name string) error {
	yes := true
	window := "PT1H"
	deliveries := int32(100)
	_, err := ac.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		RequiresSession:                     &yes,
		RequiresDuplicateDetection:          &yes,
		DuplicateDetectionHistoryTimeWindow: &window,
		MaxDeliveryCount:                    &deliveries,
	}})
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusConflict {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pipeline: creating queue %s: %w", name, err)
	}
	return nil
}
