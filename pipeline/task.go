package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/processor"
)

// Application properties a task message carries besides its Subject (the
// task type) and its SessionId (the job id).
const (
	PropIndex  = "PipelineTaskIndex" // the task's position in its job, from 0
	PropCount  = "PipelineTaskCount" // how many tasks the job was submitted with
	PropLast   = "PipelineLastTask"  // true on the job's last task
	PropOrigin = "PipelineOrigin"    // the job a resubmitted job was made from
)

// TaskSpec is one task to submit: its type, which selects the handler, and
// its payload.
type TaskSpec struct {
	Type string
	Body []byte
}

// JSONTask returns a TaskSpec of type typ with v encoded as JSON.
func JSONTask(typ string, v any) (TaskSpec, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return TaskSpec{}, fmt.Errorf("pipeline: encoding a %s task: %w", typ, err)
	}
	return TaskSpec{Type: typ, Body: b}, nil
}

// Task is a task as its handler sees it.
type Task struct {
	Job     string // the job (session) id
	Origin  string // the job this one was resubmitted from, or ""
	Type    string
	Index   int  // position in the job, from 0 (kept across resubmission)
	Count   int  // how many tasks the job was first submitted with
	Last    bool // the job's last task
	Attempt int  // 1 on the first delivery; above 1 the task may have run before
	Body    []byte
	// Enqueued is when the task message was sent.
	Enqueued time.Time
}

// Decode decodes the task's JSON payload into v.
func (t *Task) Decode(v any) error {
	if err := json.Unmarshal(t.Body, v); err != nil {
		return Permanent(fmt.Errorf("pipeline: decoding the payload of %s task %d of job %s: %w", t.Type, t.Index, t.Job, err))
	}
	return nil
}

// taskMessage builds the message of task i of job; origin is "" for an
// original job.
func taskMessage(job, origin string, index, count int, last bool, spec TaskSpec) *azservicebus.Message {
	id := MessageID(job, index)
	typ := spec.Type
	m := &azservicebus.Message{
		MessageID: &id,
		SessionID: &job,
		Subject:   &typ,
		Body:      spec.Body,
		ApplicationProperties: map[string]any{
			PropIndex: int64(index),
			PropCount: int64(count),
			PropLast:  last,
		},
	}
	if origin != "" {
		m.ApplicationProperties[PropOrigin] = origin
	}
	return m
}

// MessageID is the message id of task index of job: deterministic, so a
// repeated send is a duplicate the queue can drop.
func MessageID(job string, index int) string { return job + "/" + strconv.Itoa(index) }

var errMalformed = errors.New("not a pipeline task message")

// decodeTask reads a received task message.
func decodeTask(m *azservicebus.ReceivedMessage) (*Task, error) {
	t := &Task{Attempt: int(m.DeliveryCount), Body: m.Body}
	if m.SessionID != nil {
		t.Job = *m.SessionID
	}
	if m.Subject != nil {
		t.Type = *m.Subject
	}
	if m.EnqueuedTime != nil {
		t.Enqueued = *m.EnqueuedTime
	}
	idx, ok1 := asInt(m.ApplicationProperties[PropIndex])
	cnt, ok2 := asInt(m.ApplicationProperties[PropCount])
	last, ok3 := m.ApplicationProperties[PropLast].(bool)
	if !ok1 || !ok2 || !ok3 || t.Job == "" || t.Type == "" || idx < 0 || idx >= cnt {
		return t, fmt.Errorf("pipeline: message %s: %w", m.MessageID, errMalformed)
	}
	t.Index, t.Count, t.Last = idx, cnt, last
	t.Origin, _ = m.ApplicationProperties[PropOrigin].(string)
	if t.Attempt < 1 {
		t.Attempt = 1
	}
	return t, nil
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int64:
		return int(n), true
	case int32:
		return int(n), true
	case int:
		return n, true
	}
	return 0, false
}

// resubmitSuffix separates a job id from its resubmission generation.
const resubmitSuffix = "~r"

// ResubmittedID returns the id a resubmission of job gets: job~r1 for an
// original job, job~r(N+1) for job~rN. It is deterministic, so repeating a
// resubmission produces the same job.
func ResubmittedID(job string) string {
	if i := strings.LastIndex(job, resubmitSuffix); i >= 0 {
		if n, err := strconv.Atoi(job[i+len(resubmitSuffix):]); err == nil && n > 0 {
			return job[:i] + resubmitSuffix + strconv.Itoa(n+1)
		}
	}
	return job + resubmitSuffix + "1"
}

// Permanent wraps err so that the task fails at once, without retries.
// Permanent(nil) is nil. It is processor.Permanent: either marks an error
// as not worth retrying.
func Permanent(err error) error { return processor.Permanent(err) }

// IsPermanent reports whether err, or an error it wraps, was made by
// Permanent.
func IsPermanent(err error) bool { return processor.IsPermanent(err) }
