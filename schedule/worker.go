package schedule

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/processor"
)

// DoneAfter wraps the handler of a target's fired messages for the overlap
// policies skip and queue: after h succeeds (or fails permanently), it
// reports the firing done with Done. A failed report is passed to onError
// (which may be nil) and does not fail the message: the firing then counts
// as running until the schedule's MaxRunTime.
func (s *Scheduler) DoneAfter(h processor.Handler, onError func(error)) processor.Handler {
	return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		err := h(ctx, m)
		if err != nil && !processor.IsPermanent(err) {
			return err
		}
		if f, ok := ParseFiring(m); ok && f.ControlQueue == s.queue {
			if derr := s.Done(ctx, f); derr != nil && onError != nil {
				onError(derr)
			}
		}
		return err
	}
}
