package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/busbar-io/busbar/sas"
)

// The toolkit keeps its durable state in session states, as JSON:
//
//   - saga (SessionStateStore): {"saga", "id", "status", "version",
//     "started", "updated", "deadline", "timeouts": {name: {seq, due,
//     kind}}, "state"}, one session per instance;
//   - schedule: {"format", "definition": {"name", "target", ...}, "hash",
//     "generation", "paused", "finished", "next", "lastFired", "firings"},
//     one session of the control queue per schedule;
//   - pipeline: {"lastTask", "count", "failed", "failedTask", "error",
//     "started", "updated"}, one session per job in progress.
//
// The console recognises them by those fields and lists them. A pipeline's
// failed jobs, kept by its BrokerStore, are the sessions of a
// session-enabled queue whose messages carry PipelineReason: one session per
// job, one message per task set aside. The failed jobs of pipelines that
// keep them outside the broker (in PostgreSQL) come from Toolkit.FailedJobs.

// Toolkit runs the toolkit packages' own operations for the console, as
// the signed-in key: connStr is a connection string to the broker's AMQP
// listener carrying the key's SAS token. cmd/busbar implements it with the
// schedule and pipeline packages, so the console never rewrites their state
// itself.
type Toolkit interface {
	// Schedule pauses, resumes or triggers schedule name of control queue.
	Schedule(ctx context.Context, connStr, queue, name, op string) error
	// ResubmitJob resubmits failed job of pipeline queue from its failed
	// task, and returns the new job's id. store is "" for the broker store
	// (QUEUE-failed), or the Store of a job FailedJobs listed.
	ResubmitJob(ctx context.Context, connStr, queue, store, job string) (string, error)
	// FailedJobs lists the failed jobs of the pipelines whose failed-job
	// store is outside the broker; the console shows each to the keys with
	// Listen on its Queue.
	FailedJobs(ctx context.Context) ([]FailedJob, error)
}

// FailedJob is a failed pipeline job kept outside the broker, by the task
// that failed it.
type FailedJob struct {
	Queue    string // the pipeline's work queue
	Store    string // the store, as ResubmitJob takes it: "postgres:TABLE"
	Job      string
	Index    int // the failed task's index in its job
	Type     string
	Reason   string
	Error    string
	Attempts int
	FailedAt time.Time
}

// pipelineSuffix ends the name of a pipeline's broker failed-job store
// (pipeline.FailedQueueSuffix).
const pipelineSuffix = "-failed"

// toolkitAction runs a Toolkit operation. It needs the Manage right on the
// queue concerned.
func (c *Console) toolkitAction(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Op    string `json:"op"`    // pause, resume, trigger, resubmit
		Queue string `json:"queue"` // the schedules' control queue, or the pipeline's queue
		Name  string `json:"name"`  // the schedule, or the failed job
		Store string `json:"store"` // resubmit: the failed job's store ("": the broker's)
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if c.o.Toolkit == nil {
		return httpError(http.StatusNotImplemented, "this broker runs no toolkit operations from the console")
	}
	if in.Queue == "" || in.Name == "" {
		return badRequest("name the queue and the schedule or job")
	}
	if err := c.need(p, in.Queue, sas.Manage); err != nil {
		return err
	}
	cs := "Endpoint=sb://" + c.o.AMQPAddr + ";SharedAccessSignature=" + p.token + ";UseDevelopmentEmulator=true"
	out := map[string]string{"op": in.Op, "name": in.Name}
	var err error
	switch in.Op {
	case "pause", "resume", "trigger":
		err = c.o.Toolkit.Schedule(r.Context(), cs, in.Queue, in.Name, in.Op)
	case "resubmit":
		if in.Store == "" { // the broker store is a queue of its own
			err = c.need(p, in.Queue+pipelineSuffix, sas.Manage)
		}
		if err == nil {
			out["job"], err = c.o.Toolkit.ResubmitJob(r.Context(), cs, in.Queue, in.Store, in.Name)
		}
	default:
		return badRequest("op %q is not pause, resume, trigger or resubmit", in.Op)
	}
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return err
		}
		return httpError(http.StatusBadGateway, "%s %s: %v", in.Op, in.Name, err)
	}
	c.log.Info("console toolkit operation", "key", p.keyName, "op", in.Op, "queue", in.Queue, "name", in.Name)
	return writeJSON(w, out)
}

type sagaView struct {
	Entity   string                     `json:"entity"`
	ID       string                     `json:"id"`
	Saga     string                     `json:"saga"`
	Status   string                     `json:"status"`
	Version  int64                      `json:"version"`
	Started  time.Time                  `json:"started"`
	Updated  time.Time                  `json:"updated"`
	Deadline *time.Time                 `json:"deadline,omitempty"`
	Cause    string                     `json:"cause,omitempty"`
	Timeouts map[string]json.RawMessage `json:"timeouts,omitempty"`
	State    json.RawMessage            `json:"state"`
}

type scheduleView struct {
	Entity     string         `json:"entity"`
	Session    string         `json:"session"`
	Definition map[string]any `json:"definition"` // name, target, the spec (cron, every, ...)
	Generation int64          `json:"generation"`
	Paused     bool           `json:"paused"`
	Finished   bool           `json:"finished"`
	Next       time.Time      `json:"next"`
	LastFired  time.Time      `json:"lastFired"`
	Firings    int            `json:"firings"`
	Missed     int64          `json:"missed"`
}

// failedTask is a task a pipeline set aside, as its BrokerStore keeps it,
// or the task that failed a job kept outside the broker.
type failedTask struct {
	Entity   string `json:"entity"` // the broker store's queue; "" outside the broker
	Queue    string `json:"queue"`  // the pipeline's work queue, when known
	Store    string `json:"store"`  // "" for the broker store, else FailedJob.Store
	Job      string `json:"job"`
	Sequence int64  `json:"sequenceNumber"`
	Type     string `json:"type"`
	Index    any    `json:"index"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
	Attempts any    `json:"attempts"`
	FailedAt string `json:"failedAt,omitempty"`
}

// maxFailedScan bounds the messages the toolkit view reads per queue for
// failed pipeline tasks.
const maxFailedScan = 4096

// failedTasks lists the pipeline tasks set aside in path.
func (c *Console) failedTasks(ctx context.Context, path string) ([]failedTask, error) {
	ms, err := c.b.Peek(ctx, path, 0, maxFailedScan)
	if err != nil {
		return nil, err
	}
	var out []failedTask
	for _, m := range ms {
		reason, ok := m.Properties["PipelineReason"].(string)
		if !ok {
			continue
		}
		ft := failedTask{Entity: path, Job: m.SessionID, Sequence: m.SequenceNumber, Type: m.Subject, Reason: reason,
			Index: m.Properties["PipelineTaskIndex"], Attempts: m.Properties["PipelineAttempts"]}
		if q, ok := strings.CutSuffix(path, pipelineSuffix); ok {
			ft.Queue = q // the store's default name: its pipeline is known
		}
		ft.Error, _ = m.Properties["PipelineError"].(string)
		if ms, ok := m.Properties["PipelineFailedAt"].(int64); ok {
			ft.FailedAt = time.UnixMilli(ms).UTC().Format(time.RFC3339)
		}
		out = append(out, ft)
	}
	return out, nil
}

type jobView struct {
	Entity     string    `json:"entity"`
	Job        string    `json:"job"`
	LastTask   int       `json:"lastTask"`
	Count      int       `json:"count"`
	Failed     bool      `json:"failed"`
	FailedTask int       `json:"failedTask"`
	Error      string    `json:"error,omitempty"`
	Failures   int       `json:"failures"`
	Started    time.Time `json:"started"`
	Updated    time.Time `json:"updated"`
}

// toolkitState classifies one session state.
func toolkitState(entity, id string, st []byte, sagas *[]sagaView, scheds *[]scheduleView, jobs *[]jobView) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(st, &keys) != nil {
		return
	}
	has := func(ks ...string) bool {
		for _, k := range ks {
			if _, ok := keys[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("saga", "status", "version", "state"):
		var v sagaView
		if json.Unmarshal(st, &v) == nil {
			v.Entity, v.ID = entity, id
			*sagas = append(*sagas, v)
		}
	case has("format", "definition", "hash", "generation"):
		var v scheduleView
		if json.Unmarshal(st, &v) == nil {
			v.Entity, v.Session = entity, id
			*scheds = append(*scheds, v)
		}
	case has("lastTask", "count", "started", "updated"):
		var v jobView
		if json.Unmarshal(st, &v) == nil {
			v.Entity, v.Job = entity, id
			*jobs = append(*jobs, v)
		}
	}
}

// toolkit lists the sagas, schedules and pipeline jobs kept in the session
// states of every session-enabled queue and subscription the key may see.
func (c *Console) toolkit(w http.ResponseWriter, r *http.Request, p *principal) error {
	ctx := r.Context()
	out := struct {
		Actions   bool           `json:"actions"` // the Toolkit's operations are available
		Sagas     []sagaView     `json:"sagas"`
		Schedules []scheduleView `json:"schedules"`
		Jobs      []jobView      `json:"jobs"`
		Failed    []failedTask   `json:"failed"`
		// FailedError says why failed jobs kept outside the broker are missing.
		FailedError string `json:"failedError,omitempty"`
	}{c.o.Toolkit != nil, []sagaView{}, []scheduleView{}, []jobView{}, []failedTask{}, ""}
	scan := func(path string) error {
		if c.need(p, path, sas.Listen) != nil {
			return nil
		}
		failed, err := c.failedTasks(ctx, path)
		if err != nil {
			return err
		}
		out.Failed = append(out.Failed, failed...)
		ss, err := c.b.Sessions(ctx, path, 0, maxSessionList)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if !s.HasState {
				continue
			}
			st, err := c.b.GetSessionState(ctx, path, s.ID)
			if err != nil {
				return err
			}
			toolkitState(path, s.ID, st, &out.Sagas, &out.Schedules, &out.Jobs)
		}
		return nil
	}
	if err := c.sessionEntities(ctx, scan); err != nil {
		return err
	}
	if c.o.Toolkit != nil {
		jobs, err := c.o.Toolkit.FailedJobs(ctx)
		if err != nil { // the broker's part of the view stands; the log has the database's error
			out.FailedError = "the failed jobs kept outside the broker could not be read (the broker's log says why)"
			c.log.Warn("console: reading failed pipeline jobs", "err", err)
		}
		for _, j := range jobs {
			if c.need(p, j.Queue, sas.Listen) == nil {
				out.Failed = append(out.Failed, failedTask{Queue: j.Queue, Store: j.Store, Job: j.Job, Type: j.Type, Index: j.Index,
					Reason: j.Reason, Error: j.Error, Attempts: j.Attempts, FailedAt: j.FailedAt.UTC().Format(time.RFC3339)})
			}
		}
	}
	return writeJSON(w, out)
}

// sessionEntities calls f with the path of every session-enabled queue and
// subscription.
func (c *Console) sessionEntities(ctx context.Context, f func(path string) error) error {
	qs, err := c.b.ListQueues(ctx, 0, 0)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.Properties.RequiresSession {
			if err := f(q.Name); err != nil {
				return err
			}
		}
	}
	ts, err := c.b.ListTopics(ctx, 0, 0)
	if err != nil {
		return err
	}
	for _, t := range ts {
		subs, err := c.b.ListSubscriptions(ctx, t.Name, 0, 0)
		if err != nil {
			continue
		}
		for _, s := range subs {
			if s.Properties.RequiresSession {
				if err := f(t.Name + "/Subscriptions/" + s.Name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
