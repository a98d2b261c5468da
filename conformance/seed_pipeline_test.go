package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Seed 003, "Pipeline Execution using Azure Service Bus": one session per
// job, its tasks in FIFO order. A task that keeps failing marks the
// session state failed and is dead-lettered; the job's remaining tasks are
// dead-lettered without running; the last task clears the state. Another
// job's session carries on.

var pipelineQueue = sessionQueue("jobs", admin.QueueProperties{})

// pipelineAttempts is how many deliveries a task gets before the job is
// declared failed (the seed relies on MaxDeliveryCount; the handler counts
// DeliveryCount itself so the failure can mark the session).
const pipelineAttempts = 2

// pipelineState is the job's session state.
type pipelineState struct {
	IsFailedSession bool `json:"isFailedSession"`
}

// taskMessage is task name of job, optionally the last one of the job and
// optionally one that always fails.
func taskMessage(job, task string, last, fails bool) *azservicebus.Message {
	return &azservicebus.Message{
		Body:                  []byte(task),
		SessionID:             ptr(job),
		ApplicationProperties: map[string]any{"IsLastMessage": last, "Fails": fails},
	}
}

// TestSeedPipeline runs two jobs at once: the purchase job's payment task
// fails, so its receipt and email tasks are dead-lettered unexecuted; the
// import job runs all its tasks in order.
func TestSeedPipeline(t *testing.T) {
	t.Parallel()
	q := pipelineQueue.create(t)
	c := newClient(t)
	purchase, imports := uniqueID(t, "job-purchase"), uniqueID(t, "job-import")
	// The jobs' tasks, interleaved on the queue as two concurrent jobs are.
	send(t, newSender(t, c, q),
		taskMessage(purchase, "generate order number", false, false),
		taskMessage(imports, "import product 1", false, false),
		taskMessage(purchase, "process payment", false, true),
		taskMessage(imports, "import product 2", false, false),
		taskMessage(purchase, "generate receipt", false, false),
		taskMessage(imports, "import product 3", true, false),
		taskMessage(purchase, "send email", true, false),
	)

	log := newEventLog()
	var settled atomic.Int32
	handle := func(ctx context.Context, r *azservicebus.SessionReceiver, m *azservicebus.ReceivedMessage) error {
		job, task := r.SessionID(), string(m.Body)
		raw, err := r.GetSessionState(ctx, nil)
		if err != nil {
			return fmt.Errorf("GetSessionState: %w", err)
		}
		var st pipelineState
		if raw != nil {
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("session state %q: %w", raw, err)
			}
		}
		last, _ := m.ApplicationProperties["IsLastMessage"].(bool)
		fails, _ := m.ApplicationProperties["Fails"].(bool)
		switch {
		case st.IsFailedSession:
			log.add(job, "skipped "+task)
			err = r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
				Reason: ptr("SessionFailed"), ErrorDescription: ptr("an earlier task of the job failed"),
			})
		case fails && m.DeliveryCount < pipelineAttempts:
			log.add(job, fmt.Sprintf("failed %s (attempt %d)", task, m.DeliveryCount))
			if err := r.AbandonMessage(ctx, m, nil); err != nil {
				return fmt.Errorf("AbandonMessage: %w", err)
			}
			return nil // not settled for good: it comes back first
		case fails:
			log.add(job, fmt.Sprintf("failed %s (attempt %d), job failed", task, m.DeliveryCount))
			b, _ := json.Marshal(pipelineState{IsFailedSession: true})
			if err := r.SetSessionState(ctx, b, nil); err != nil {
				return fmt.Errorf("SetSessionState: %w", err)
			}
			err = r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
				Reason: ptr("TaskFailed"), ErrorDescription: ptr("payment service unavailable"),
			})
		default:
			log.add(job, "ran "+task)
			err = r.CompleteMessage(ctx, m, nil)
		}
		if err != nil {
			return fmt.Errorf("settling: %w", err)
		}
		if last {
			// The seed's clean-up: the last task clears the state.
			if err := r.SetSessionState(ctx, nil, nil); err != nil {
				return fmt.Errorf("clearing the state: %w", err)
			}
		}
		settled.Add(1)
		return nil
	}

	runSessionProcessors(t, handle, processorOptions{
		accept: func(ctx context.Context, c *azservicebus.Client) (*azservicebus.SessionReceiver, error) {
			return c.AcceptNextSessionForQueue(ctx, q, nil)
		},
		concurrency: 2,
		acceptWait:  2 * time.Second,
		idle:        time.Second,
		done:        func() bool { return settled.Load() == 7 },
		limit:       45 * time.Second,
		log:         log,
	})

	if got, want := log.get(purchase), []string{
		"ran generate order number",
		"failed process payment (attempt 1)",
		"failed process payment (attempt 2), job failed",
		"skipped generate receipt",
		"skipped send email",
	}; !slices.Equal(got, want) {
		t.Errorf("job %s did %q, want %q", purchase, got, want)
	}
	if got, want := log.get(imports), []string{"ran import product 1", "ran import product 2", "ran import product 3"}; !slices.Equal(got, want) {
		t.Errorf("job %s did %q, want %q", imports, got, want)
	}

	// The dead-letter queue holds the failed task and the skipped ones, in
	// order, with their reasons: what an operator resubmits under a new
	// session id.
	dlq := newQueueReceiver(t, c, q, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter, ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	dead := receiveN(t, dlq, 3, receiveTimeout)
	wantDead := []struct{ task, reason string }{
		{"process payment", "TaskFailed"}, {"generate receipt", "SessionFailed"}, {"send email", "SessionFailed"},
	}
	for i, m := range dead {
		if string(m.Body) != wantDead[i].task || strValue(m.DeadLetterReason) != wantDead[i].reason || strValue(m.SessionID) != purchase {
			t.Errorf("dead letter #%d: %q (reason %q, session %q), want %q (reason %q, session %q)",
				i, m.Body, strValue(m.DeadLetterReason), strValue(m.SessionID), wantDead[i].task, wantDead[i].reason, purchase)
		}
	}
	// Both jobs' states were cleared by their last task.
	for _, job := range []string{purchase, imports} {
		r := acceptSession(t, c, q, job)
		if state, err := r.GetSessionState(ctxFor(t, opTimeout), nil); err != nil || state != nil {
			t.Errorf("job %s: session state %q, %v after its last task; want nil", job, state, err)
		}
	}
}
