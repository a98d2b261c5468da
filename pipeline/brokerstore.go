package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Application properties of a task in a BrokerStore, besides the task
// properties (PropIndex, PropCount, PropLast, PropOrigin).
const (
	PropReason   = "PipelineReason"
	PropError    = "PipelineError"
	PropAttempts = "PipelineAttempts"
	PropFailedAt = "PipelineFailedAt" // Unix milliseconds
)

// BrokerStore keeps failed jobs in the broker itself: a session-enabled
// queue where each session is a failed job and its messages are the job's
// set-aside tasks. Reading a job locks its session for a moment; listing
// uses the SDK's session listing and reads each job, so PostgreSQL
// (package pipelinepg) suits large failed-job populations better. Create the queue with CreateQueue (its
// duplicate detection drops a task stored twice; without it, the store
// drops the repeat when it reads the job).
type BrokerStore struct {
	client *azservicebus.Client
	queue  string

	mu     sync.Mutex
	sender *azservicebus.Sender
}

// NewBrokerStore returns a store on queue, a session-enabled queue.
func NewBrokerStore(client *azservicebus.Client, queue string) *BrokerStore {
	return &BrokerStore{client: client, queue: queue}
}

// Close closes the store's sender.
func (s *BrokerStore) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sender == nil {
		return nil
	}
	err := s.sender.Close(ctx)
	s.sender = nil
	return err
}

// Add stores t as a message of the job's session.
func (s *BrokerStore) Add(ctx context.Context, t FailedTask) error {
	s.mu.Lock()
	if s.sender == nil {
		snd, err := s.client.NewSender(s.queue, nil)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.sender = snd
	}
	snd := s.sender
	s.mu.Unlock()
	m := taskMessage(t.Job, t.Origin, t.Index, t.Count, t.Last, TaskSpec{Type: t.Type, Body: t.Body})
	m.ApplicationProperties[PropReason] = t.Reason
	m.ApplicationProperties[PropError] = t.Error
	m.ApplicationProperties[PropAttempts] = int64(t.Attempts)
	m.ApplicationProperties[PropFailedAt] = t.FailedAt.UnixMilli()
	return snd.SendMessage(ctx, m, nil)
}

// Job returns the job's tasks in index order.
func (s *BrokerStore) Job(ctx context.Context, job string) (FailedJob, error) {
	fj := FailedJob{Job: job}
	err := withSession(ctx, s.client, s.queue, job, func(r *azservicebus.SessionReceiver) error {
		msgs, err := peekAll(ctx, r)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			ft, err := storedTask(m)
			if err != nil {
				return err
			}
			fj.Tasks = append(fj.Tasks, ft)
		}
		return nil
	})
	if err != nil {
		return fj, err
	}
	if len(fj.Tasks) == 0 {
		return fj, ErrNotFound
	}
	fj.Tasks = sortTasks(fj.Tasks)
	fj.Origin = fj.Tasks[0].Origin
	return fj, nil
}

// Jobs returns every stored job in job id order.
func (s *BrokerStore) Jobs(ctx context.Context) ([]FailedJob, error) {
	ids, err := listSessions(ctx, s.client, s.queue)
	if err != nil {
		return nil, err
	}
	var out []FailedJob
	for _, id := range ids {
		fj, err := s.Job(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, fj)
	}
	return out, nil
}

// Remove receives and completes the job's messages.
func (s *BrokerStore) Remove(ctx context.Context, job string) error {
	r, err := s.client.AcceptSessionForQueue(ctx, s.queue, job, nil)
	if err != nil {
		return fmt.Errorf("pipeline: locking failed job %s: %w", job, err)
	}
	defer func() { _ = r.Close(context.WithoutCancel(ctx)) }()
	msgs, err := peekAll(ctx, r)
	if err != nil || len(msgs) == 0 {
		return err
	}
	last := *msgs[len(msgs)-1].SequenceNumber
	for {
		// The messages are known to be there, so this returns at once;
		// the deadline only guards against a broker that does not.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		got, err := r.ReceiveMessages(rctx, len(msgs), nil)
		cancel()
		if err != nil {
			return fmt.Errorf("pipeline: removing failed job %s: %w", job, err)
		}
		done := false
		for _, m := range got {
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				return fmt.Errorf("pipeline: removing failed job %s: %w", job, err)
			}
			done = done || *m.SequenceNumber >= last
		}
		if done {
			return nil
		}
	}
}

// peekAll peeks every message of the session, in sequence order.
func peekAll(ctx context.Context, r *azservicebus.SessionReceiver) ([]*azservicebus.ReceivedMessage, error) {
	return peekSession(ctx, r, -1)
}

// peekSession peeks up to limit (all, when negative) messages of the
// session, in sequence order. It keeps only the session's messages: the
// broker scopes a session receiver's peek to its session (the Go SDK names
// the receiver's link rather than the session), but an older Busbar
// answered with the whole queue, and the filter costs nothing.
func peekSession(ctx context.Context, r *azservicebus.SessionReceiver, limit int) ([]*azservicebus.ReceivedMessage, error) {
	var out []*azservicebus.ReceivedMessage
	var from *int64
	id := r.SessionID()
	for limit < 0 || len(out) < limit {
		msgs, err := r.PeekMessages(ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: from})
		if err != nil {
			return nil, fmt.Errorf("pipeline: peeking session %s: %w", id, err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.SessionID != nil && *m.SessionID == id && (limit < 0 || len(out) < limit) {
				out = append(out, m)
			}
		}
		next := *msgs[len(msgs)-1].SequenceNumber + 1
		from = &next
	}
	return out, nil
}

// storedTask reads a BrokerStore message.
func storedTask(m *azservicebus.ReceivedMessage) (FailedTask, error) {
	t, err := decodeTask(m)
	if err != nil {
		return FailedTask{}, err
	}
	ft := FailedTask{Job: t.Job, Origin: t.Origin, Index: t.Index, Count: t.Count, Last: t.Last, Type: t.Type, Body: t.Body}
	ft.Reason, _ = m.ApplicationProperties[PropReason].(string)
	ft.Error, _ = m.ApplicationProperties[PropError].(string)
	ft.Attempts, _ = asInt(m.ApplicationProperties[PropAttempts])
	ms, ok := m.ApplicationProperties[PropFailedAt].(int64)
	if !ok {
		return ft, fmt.Errorf("pipeline: failed task %s has no %s (%s)", m.MessageID, PropFailedAt, strconv.Quote(fmt.Sprint(m.ApplicationProperties[PropFailedAt])))
	}
	ft.FailedAt = time.UnixMilli(ms).UTC()
	return ft, nil
}

// FailedQueueSuffix names the BrokerStore queue conventionally paired with
// a work queue: the CLI and the example use queue+FailedQueueSuffix.
const FailedQueueSuffix = "-failed"
