package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// deadLetterReasons groups an entity's dead letters by reason, scanning
// the whole dead-letter subqueue.
func (c *Console) deadLetterReasons(w http.ResponseWriter, r *http.Request, p *principal) error {
	path := r.URL.Query().Get("path")
	if _, err := splitPath(path); err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	type group struct {
		Reason      string `json:"reason"`
		Count       int    `json:"count"`
		Description string `json:"description"` // of the first message
	}
	by := map[string]*group{}
	var from int64
	total := 0
	for {
		ms, err := c.b.Peek(r.Context(), path+"/$DeadLetterQueue", from, broker.MaxPeek)
		if err != nil {
			return err
		}
		for _, m := range ms {
			from = m.SequenceNumber + 1
			reason, _ := m.Properties[broker.PropDeadLetterReason].(string)
			g := by[reason]
			if g == nil {
				g = &group{Reason: reason}
				g.Description, _ = m.Properties[broker.PropDeadLetterErrorDescription].(string)
				by[reason] = g
			}
			g.Count++
			total++
		}
		if len(ms) < broker.MaxPeek {
			break
		}
	}
	out := struct {
		Total   int      `json:"total"`
		Reasons []*group `json:"reasons"`
	}{Total: total, Reasons: []*group{}}
	for _, g := range by {
		out.Reasons = append(out.Reasons, g)
	}
	sort.Slice(out.Reasons, func(i, j int) bool {
		a, b := out.Reasons[i], out.Reasons[j]
		return a.Count > b.Count || a.Count == b.Count && a.Reason < b.Reason
	})
	return writeJSON(w, out)
}

// jobRequest starts a dead-letter job.
type jobRequest struct {
	Kind   string  `json:"kind"` // resubmit, purge
	Path   string  `json:"path"` // the entity whose dead letters are handled
	Seqs   []int64 `json:"sequenceNumbers"`
	Search search  `json:"search"` // with no Seqs: every dead letter matching it
	Target string  `json:"target"` // resubmit: "" for the source (a subscription's topic)
}

// Report is what a job did, and how far it is.
type Report struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Path        string   `json:"path"`
	Target      string   `json:"target,omitempty"`
	Total       int      `json:"total"`       // dead letters at the start
	Examined    int      `json:"examined"`    // dead letters looked at
	Matched     int      `json:"matched"`     // selected by the request
	Done        int      `json:"done"`        // resubmitted or purged
	Failed      int      `json:"failed"`      // selected, left in the dead-letter queue
	Unconfirmed int      `json:"unconfirmed"` // resubmitted, but their removal failed: they may be there twice
	Errors      []string `json:"errors"`
	Finished    bool     `json:"finished"`
	Started     string   `json:"started"`
	Ended       string   `json:"ended,omitempty"`
}

// jobs are the running and finished dead-letter jobs.
type jobs struct {
	mu sync.Mutex
	m  map[string]*job
}

type job struct {
	mu  sync.Mutex
	rep Report
	key string // who started it
}

func newJobs() *jobs { return &jobs{m: map[string]*job{}} }

func (j *job) update(f func(r *Report)) {
	j.mu.Lock()
	f(&j.rep)
	j.mu.Unlock()
}

func (j *job) report() Report {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.rep
	r.Errors = append([]string{}, r.Errors...)
	return r
}

// maxErrors bounds the errors a report keeps.
const maxErrors = 20

func (r *Report) fail(n int, err error) {
	r.Failed += n
	if len(r.Errors) < maxErrors {
		r.Errors = append(r.Errors, err.Error())
	}
}

func (c *Console) startJob(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in jobRequest
	if err := readJSON(r, &in); err != nil {
		return err
	}
	j, err := c.newJob(r.Context(), p, &in)
	if err != nil {
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(c.ctx, j, in)
	}()
	return writeJSON(w, j.report())
}

// newJob checks a job request and registers the job.
func (c *Console) newJob(ctx context.Context, p *principal, in *jobRequest) (*job, error) {
	bp, err := splitPath(in.Path)
	if err != nil {
		return nil, err
	}
	if err := c.need(p, in.Path, sas.Manage); err != nil {
		return nil, err
	}
	ev, err := c.entity(ctx, bp)
	if err != nil {
		return nil, err
	}
	switch in.Kind {
	case "purge":
	case "resubmit":
		if in.Target == "" {
			in.Target = bp.Entity // a subscription's dead letters go back through its topic
		}
		if err := c.need(p, in.Target, sas.Send); err != nil {
			return nil, err
		}
	default:
		return nil, badRequest("job kind %q is not resubmit or purge", in.Kind)
	}
	j := &job{key: p.keyName, rep: Report{ID: randomID()[:16], Kind: in.Kind, Path: ev.Path, Target: in.Target,
		Total: int(ev.Counts.DeadLetter), Errors: []string{}, Started: c.now().UTC().Format(time.RFC3339)}}
	c.jobs.mu.Lock()
	c.jobs.m[j.rep.ID] = j
	c.jobs.mu.Unlock()
	c.log.Info("console dead-letter job", "key", p.keyName, "kind", in.Kind, "path", in.Path, "target", in.Target)
	return j, nil
}

func (c *Console) getJob(w http.ResponseWriter, r *http.Request, p *principal) error {
	c.jobs.mu.Lock()
	j := c.jobs.m[r.URL.Query().Get("id")]
	c.jobs.mu.Unlock()
	if j == nil || j.key != p.keyName {
		return httpError(http.StatusNotFound, "no job %q", r.URL.Query().Get("id"))
	}
	return writeJSON(w, j.report())
}

// batchSize is how many dead letters a job takes at a time.
const batchSize = 250

// run carries a job out. Resubmitting takes the dead letters with a lock,
// sends the selected ones of a batch to the target as one atomic send, and
// only then completes them: a batch is either resubmitted and removed, or
// left where it was. Dead letters not selected stay locked until the end,
// so that each is examined once, and are then released.
func (c *Console) run(ctx context.Context, j *job, in jobRequest) {
	defer j.update(func(r *Report) { r.Finished, r.Ended = true, c.now().UTC().Format(time.RFC3339) })
	dlq := in.Path + "/$DeadLetterQueue"
	if in.Kind == "purge" && len(in.Seqs) == 0 && in.Search.empty() {
		c.purgeAll(ctx, j, dlq)
		return
	}
	want := map[int64]bool{}
	for _, s := range in.Seqs {
		want[s] = true
	}
	selected := func(m *broker.Message) bool {
		if len(want) > 0 {
			return want[m.SequenceNumber]
		}
		return in.Search.match(m)
	}
	var held []*taken // batches holding dead letters not selected
	defer func() {
		for _, t := range held {
			t.close() // AbandonOnClose releases them
		}
	}()
	seen := map[int64]bool{}
	for ctx.Err() == nil {
		t, err := c.take(ctx, dlq, batchSize, broker.PeekLock, false, "")
		if err != nil {
			j.update(func(r *Report) { r.fail(0, err) })
			return
		}
		if len(t.msgs) == 0 {
			t.close()
			return
		}
		var pick []*broker.Message
		fresh := 0
		for _, m := range t.msgs {
			if seen[m.SequenceNumber] {
				continue
			}
			seen[m.SequenceNumber] = true
			fresh++
			if selected(m) {
				pick = append(pick, m)
			}
		}
		if fresh == 0 {
			t.close()
			return // only dead letters already examined, whose locks expired
		}
		j.update(func(r *Report) { r.Examined += fresh; r.Matched += len(pick) })
		if len(pick) > 0 {
			c.settleBatch(ctx, j, in, dlq, pick)
		}
		if len(pick) < len(t.msgs) {
			t.msgs = nil // keep the consumer, which holds the locks, not the messages
			held = append(held, t)
		} else {
			t.close()
		}
		if len(want) > 0 && j.report().Matched >= len(want) {
			return
		}
	}
}

// settleBatch resubmits (or purges) one batch of locked dead letters.
func (c *Console) settleBatch(ctx context.Context, j *job, in jobRequest, dlq string, pick []*broker.Message) {
	tokens := make([]broker.LockToken, len(pick))
	for i, m := range pick {
		tokens[i] = m.LockToken
	}
	if in.Kind == "resubmit" {
		out := make([]*broker.Message, 0, len(pick))
		for _, m := range pick {
			n, err := resubmitted(m)
			if err != nil {
				j.update(func(r *Report) { r.fail(len(pick), err) })
				return
			}
			out = append(out, n)
		}
		if err := c.b.Send(ctx, in.Target, out); err != nil {
			j.update(func(r *Report) { r.fail(len(pick), fmt.Errorf("sending to %s: %w", in.Target, err)) })
			return
		}
	}
	if err := c.b.Complete(ctx, dlq, tokens...); err != nil {
		j.update(func(r *Report) {
			if in.Kind == "resubmit" {
				r.Unconfirmed += len(pick)
				r.Done += len(pick)
				if len(r.Errors) < maxErrors {
					r.Errors = append(r.Errors, "removing resubmitted dead letters: "+err.Error())
				}
				return
			}
			r.fail(len(pick), err)
		})
		return
	}
	j.update(func(r *Report) { r.Done += len(pick) })
}

// purgeAll deletes every dead letter, batch by batch.
func (c *Console) purgeAll(ctx context.Context, j *job, dlq string) {
	for {
		n, err := c.b.DeleteMessages(ctx, dlq, 4000, time.Time{})
		j.update(func(r *Report) { r.Examined += n; r.Matched += n; r.Done += n })
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				j.update(func(r *Report) { r.fail(0, err) })
			}
			return
		}
		if n == 0 {
			return
		}
	}
}
