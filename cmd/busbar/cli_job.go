package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/jackc/pgx/v5/pgxpool"
)

// busbar job: operate the pipelines of package pipeline (jobs as sessions
// of a work queue, failed jobs in a store).
func init() { commandGroups["job"] = jobCommand }

func jobCommand(env *cliEnv, args []string) error {
	return group{name: "job", summary: "Operate job pipelines (package pipeline): jobs in progress, failed jobs, resubmission.", subs: []subcommand{
		{"list", "list the jobs of a work queue with their progress", jobList},
		{"show", "show one job's progress and its failed tasks", jobShow},
		{"failed", "list failed jobs with the reason and error of their failed task", jobFailed},
		{"resubmit", "resubmit a failed job, or all failed jobs matching a filter", jobResubmit},
		{"purge", "delete a failed job, or all failed jobs matching a filter, from the store", jobPurge},
		{"sweep", "clear the state of jobs whose last task never arrived", jobSweep},
	}}.dispatch(env, args)
}

// storeFlags choose the failed-job store: the broker queue QUEUE-failed by
// default, or a PostgreSQL table.
type storeFlags struct {
	failedQueue string
	postgres    string
	table       string
}

func (f *storeFlags) register(fs *flagSet) {
	fs.StringVar(&f.failedQueue, "failed-queue", "", "the broker store's session-enabled queue (default: QUEUE"+pipeline.FailedQueueSuffix+")")
	fs.StringVar(&f.postgres, "postgres", "", "keep failed jobs in PostgreSQL at this DSN instead of the broker")
	fs.StringVar(&f.table, "table", pipelinepg.DefaultTable, "the PostgreSQL table, with --postgres")
}

// open returns the store and a function releasing it.
func (f *storeFlags) open(s *dataSession, queue string) (pipeline.Store, func(), error) {
	if f.postgres != "" {
		pool, err := pgxpool.New(s.ctx, f.postgres)
		if err != nil {
			return nil, nil, err
		}
		return pipelinepg.New(pool, f.table), pool.Close, nil
	}
	q := f.failedQueue
	if q == "" {
		q = queue + pipeline.FailedQueueSuffix
	}
	st := pipeline.NewBrokerStore(s.client, q)
	return st, func() { _ = st.Close(context.Background()) }, nil
}

// storeCommand is dataCommand with the failed-job store of the work queue
// pos[0] opened for body.
func storeCommand(env *cliEnv, c command, args []string, minArgs, maxArgs int, timeout time.Duration,
	register func(fs *flagSet), body func(s *dataSession, pos []string, st pipeline.Store) error) error {
	var sf storeFlags
	return dataCommand(env, c, args, minArgs, maxArgs, timeout, func(fs *flagSet) {
		sf.register(fs)
		if register != nil {
			register(fs)
		}
	}, func(s *dataSession, pos []string) error {
		st, done, err := sf.open(s, pos[0])
		if err != nil {
			return err
		}
		defer done()
		return body(s, pos, st)
	})
}

// filterFlags select failed jobs.
type filterFlags struct {
	prefix, typ, errText string
	before, after        string
}

func (f *filterFlags) register(fs *flagSet) {
	fs.StringVar(&f.prefix, "job-prefix", "", "only jobs whose id starts with this")
	fs.StringVar(&f.typ, "type", "", "only jobs whose failed task has this type")
	fs.StringVar(&f.errText, "error", "", "only jobs whose failed task's error contains this")
	fs.StringVar(&f.before, "before", "", "only jobs failed before this time (RFC 3339)")
	fs.StringVar(&f.after, "after", "", "only jobs failed after this time (RFC 3339)")
}

func (f *filterFlags) filter() (pipeline.Filter, error) {
	flt := pipeline.Filter{Job: f.prefix, TaskType: f.typ, ErrorContains: f.errText}
	for _, t := range []struct {
		s   string
		dst *time.Time
	}{{f.before, &flt.Before}, {f.after, &flt.After}} {
		if t.s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.s)
		if err != nil {
			return flt, usageErrorf("bad time %q: %v", t.s, err)
		}
		*t.dst = v
	}
	return flt, nil
}

// jobRow is a job's progress as printed.
type jobRow struct {
	Job      string     `json:"job"`
	Status   string     `json:"status"`
	LastTask *int       `json:"lastTask,omitempty"`
	Count    int        `json:"count,omitempty"`
	Pending  int        `json:"pending"`
	Failed   *int       `json:"failedTask,omitempty"`
	Error    string     `json:"error,omitempty"`
	Origin   string     `json:"origin,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Updated  *time.Time `json:"updated,omitempty"`
}

func progressRow(jp pipeline.JobProgress) jobRow {
	r := jobRow{Job: jp.Job, Pending: jp.Pending, Status: "waiting"}
	switch {
	case jp.Locked:
		r.Status = "running"
	case jp.State != nil:
		st := jp.State
		last := st.LastTask
		r.LastTask, r.Count, r.Origin, r.Started, r.Updated = &last, st.Count, st.Origin, &st.Started, &st.Updated
		r.Status = "in progress"
		if st.Failed {
			r.Status, r.Failed, r.Error = "failed", &st.FailedTask, st.Error
		}
		if jp.Pending == 0 {
			r.Status += " (no task pending)"
		}
	}
	return r
}

func printJobRows(w io.Writer, rows []jobRow) {
	row(w, "JOB", "STATUS", "DONE", "PENDING", "UPDATED", "ERROR")
	for _, r := range rows {
		done, updated := "-", "-"
		if r.LastTask != nil {
			done = fmt.Sprintf("%d/%d", *r.LastTask+1, r.Count)
			updated = r.Updated.UTC().Format(time.RFC3339)
		}
		row(w, r.Job, r.Status, done, r.Pending, updated, r.Error)
	}
}

func jobList(env *cliEnv, args []string) error {
	c := command{path: "job list", args: "QUEUE [flags]",
		summary: "List the jobs of a pipeline's work queue (sessions with tasks or state) with their progress. " +
			"Each job's session is locked for a moment to read it; a job a worker holds shows as running.",
		examples: `busbar job list purchases
busbar job list imports --json`}
	return dataCommand(env, c, args, 1, 1, defaultTimeout, nil, func(s *dataSession, pos []string) error {
		jobs, err := pipeline.Jobs(s.ctx, s.client, pos[0])
		if err != nil {
			return err
		}
		rows := make([]jobRow, 0, len(jobs))
		for _, jp := range jobs {
			rows = append(rows, progressRow(jp))
		}
		return s.out.emit(rows, func(w io.Writer) { printJobRows(w, rows) })
	})
}

// failedRow is a failed job as printed.
type failedRow struct {
	Job        string                `json:"job"`
	Origin     string                `json:"origin,omitempty"`
	FailedTask int                   `json:"failedTask"`
	Type       string                `json:"type"`
	Reason     string                `json:"reason"`
	Error      string                `json:"error"`
	Attempts   int                   `json:"attempts"`
	FailedAt   time.Time             `json:"failedAt"`
	Tasks      []pipeline.FailedTask `json:"tasks,omitempty"`
}

func failedRowOf(fj pipeline.FailedJob, withTasks bool) failedRow {
	ft := fj.Failed()
	r := failedRow{Job: fj.Job, Origin: fj.Origin, FailedTask: ft.Index, Type: ft.Type, Reason: ft.Reason, Error: ft.Error,
		Attempts: ft.Attempts, FailedAt: fj.FailedAt()}
	if withTasks {
		r.Tasks = fj.Tasks
	}
	return r
}

func jobShow(env *cliEnv, args []string) error {
	c := command{path: "job show", args: "QUEUE JOB [flags]",
		summary:  "Show a job's progress in the work queue and, if it failed, its set-aside tasks in order.",
		examples: `busbar job show purchases order-1042`}
	return storeCommand(env, c, args, 2, 2, defaultTimeout, nil, func(s *dataSession, pos []string, st pipeline.Store) error {
		jp, err := pipeline.JobOf(s.ctx, s.client, pos[0], pos[1])
		if err != nil {
			return err
		}
		fj, err := st.Job(s.ctx, pos[1])
		var failed *failedRow
		switch {
		case err == nil:
			r := failedRowOf(fj, true)
			failed = &r
		case !errors.Is(err, pipeline.ErrNotFound):
			return err
		}
		pr := progressRow(jp)
		if failed == nil && jp.State == nil && jp.Pending == 0 && !jp.Locked {
			return notFoundf("job %s is neither in %s nor among the failed jobs", pos[1], pos[0])
		}
		return s.out.emit(struct {
			Progress jobRow     `json:"progress"`
			Failed   *failedRow `json:"failed,omitempty"`
		}{pr, failed}, func(w io.Writer) {
			printJobRows(w, []jobRow{pr})
			if failed != nil {
				fmt.Fprintf(w, "\nfailed job %s (origin %q): set-aside tasks\n", failed.Job, failed.Origin)
				row(w, "TASK", "TYPE", "REASON", "ATTEMPTS", "FAILED AT", "ERROR")
				for _, t := range failed.Tasks {
					row(w, t.Index, t.Type, t.Reason, t.Attempts, t.FailedAt.Format(time.RFC3339), t.Error)
				}
			}
		})
	})
}

func jobFailed(env *cliEnv, args []string) error {
	c := command{path: "job failed", args: "QUEUE [flags]",
		summary: "List the failed jobs of a pipeline, with the task that failed each and its error.",
		examples: `busbar job failed purchases
busbar job failed purchases --type payment --error declined
busbar job failed imports --postgres postgres://localhost/app --json`}
	var ff filterFlags
	return storeCommand(env, c, args, 1, 1, defaultTimeout, ff.register, func(s *dataSession, pos []string, st pipeline.Store) error {
		flt, err := ff.filter()
		if err != nil {
			return err
		}
		jobs, err := st.Jobs(s.ctx)
		if err != nil {
			return err
		}
		rows := []failedRow{}
		for _, fj := range jobs {
			if flt.Match(fj) {
				rows = append(rows, failedRowOf(fj, false))
			}
		}
		return s.out.emit(rows, func(w io.Writer) {
			row(w, "JOB", "TASK", "TYPE", "REASON", "ATTEMPTS", "FAILED AT", "ORIGIN", "ERROR")
			for _, r := range rows {
				row(w, r.Job, r.FailedTask, r.Type, r.Reason, r.Attempts, r.FailedAt.Format(time.RFC3339), r.Origin, firstLine(r.Error))
			}
		})
	})
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// bulk runs one job (pos[1]) or, with all, every job the filter matches,
// printing progress on stderr.
func bulk(s *dataSession, verb string, pos []string, all bool, ff *filterFlags, interval time.Duration,
	one func(job string) (string, error), many func(pipeline.Filter, pipeline.Progress) (int, error)) error {
	type result struct {
		Job    string `json:"job"`
		NewJob string `json:"newJob,omitempty"`
		Error  string `json:"error,omitempty"`
	}
	var results []result
	switch {
	case len(pos) == 2 && !all:
		newJob, err := one(pos[1])
		if errors.Is(err, pipeline.ErrNotFound) {
			return notFoundf("job %s is not among the failed jobs (already %s?)", pos[1], verb)
		}
		if err != nil {
			return err
		}
		results = append(results, result{Job: pos[1], NewJob: newJob})
	case len(pos) == 1 && all:
		flt, err := ff.filter()
		if err != nil {
			return err
		}
		var pl *progressLine
		n, err := many(flt, func(done, total int, job, newJob string, jerr error) {
			if pl == nil {
				pl = newProgress(s.env.stderr, verb, total, interval)
			}
			r := result{Job: job, NewJob: newJob}
			if jerr != nil {
				r.Error = jerr.Error()
			}
			results = append(results, r)
			pl.update(done, 0)
		})
		if pl != nil {
			pl.finish()
		}
		if err != nil {
			return fmt.Errorf("%s %d jobs, then: %w", verb, n, err)
		}
	default:
		return usageErrorf("give a JOB, or --all (with filters)")
	}
	return s.out.emit(results, func(w io.Writer) {
		for _, r := range results {
			switch {
			case r.Error != "":
				fmt.Fprintf(w, "%s: %s\n", r.Job, r.Error)
			case r.NewJob != "":
				fmt.Fprintf(w, "%s %s as %s\n", verb, r.Job, r.NewJob)
			default:
				fmt.Fprintf(w, "%s %s\n", verb, r.Job)
			}
		}
	})
}

func jobResubmit(env *cliEnv, args []string) error {
	c := command{path: "job resubmit", args: "QUEUE (JOB | --all) [flags]",
		summary: "Resubmit failed jobs: each from its failed task (or --from), in the original order, as a new job JOB~rN " +
			"linked to the old one, which leaves the store. Repeating it does not run a job twice.",
		examples: `busbar job resubmit purchases order-1042
busbar job resubmit purchases order-1042 --from 3
busbar job resubmit purchases --all --type payment --error "gateway timeout"`}
	var ff filterFlags
	var all bool
	var from int
	var interval time.Duration
	return storeCommand(env, c, args, 1, 2, 10*time.Minute, func(fs *flagSet) {
		ff.register(fs)
		fs.BoolVar(&all, "all", false, "every failed job matching the filters")
		fs.IntVar(&from, "from", -1, "resubmit from this task index (default: the failed task)")
		fs.DurationVar(&interval, "progress-interval", time.Second, "how often to print progress on stderr (0: never)")
	}, func(s *dataSession, pos []string, st pipeline.Store) error {
		p, err := pipeline.New(s.client, pos[0], &pipeline.Options{Store: st})
		if err != nil {
			return err
		}
		defer p.Close(context.Background())
		var o *pipeline.ResubmitOptions
		if from >= 0 {
			o = &pipeline.ResubmitOptions{From: &from}
		}
		return bulk(s, "resubmitted", pos, all, &ff, interval,
			func(job string) (string, error) { return p.Resubmit(s.ctx, job, o) },
			func(f pipeline.Filter, pr pipeline.Progress) (int, error) { return p.ResubmitAll(s.ctx, f, o, pr) })
	})
}

func jobPurge(env *cliEnv, args []string) error {
	c := command{path: "job purge", args: "QUEUE (JOB | --all) [flags]",
		summary: "Delete failed jobs from the store without running them.",
		examples: `busbar job purge purchases order-1042
busbar job purge imports --all --before 2026-11-01T00:00:00Z`}
	var ff filterFlags
	var all bool
	var interval time.Duration
	return storeCommand(env, c, args, 1, 2, 10*time.Minute, func(fs *flagSet) {
		ff.register(fs)
		fs.BoolVar(&all, "all", false, "every failed job matching the filters")
		fs.DurationVar(&interval, "progress-interval", time.Second, "how often to print progress on stderr (0: never)")
	}, func(s *dataSession, pos []string, st pipeline.Store) error {
		return bulk(s, "purged", pos, all, &ff, interval,
			func(job string) (string, error) {
				if _, err := st.Job(s.ctx, job); err != nil {
					return "", err
				}
				return "", st.Remove(s.ctx, job)
			},
			func(f pipeline.Filter, pr pipeline.Progress) (int, error) { return pipeline.PurgeAll(s.ctx, st, f, pr) })
	})
}

func jobSweep(env *cliEnv, args []string) error {
	c := command{path: "job sweep", args: "QUEUE [flags]",
		summary: "Clear the session state of jobs whose last task never arrived: no task pending, not held by a worker, " +
			"not updated for --older-than.",
		examples: `busbar job sweep purchases --older-than 24h --dry-run`}
	var age time.Duration
	var dry bool
	return dataCommand(env, c, args, 1, 1, 10*time.Minute, func(fs *flagSet) {
		fs.DurationVar(&age, "older-than", 24*time.Hour, "only states not updated for this long")
		fs.BoolVar(&dry, "dry-run", false, "list what would be cleared")
	}, func(s *dataSession, pos []string) error {
		p, err := pipeline.New(s.client, pos[0], &pipeline.Options{Store: pipeline.NewBrokerStore(s.client, pos[0]+pipeline.FailedQueueSuffix)})
		if err != nil {
			return err
		}
		swept, err := p.Sweep(s.ctx, &pipeline.SweepOptions{OlderThan: age, DryRun: dry})
		if err != nil {
			return err
		}
		if swept == nil {
			swept = []string{}
		}
		return s.out.emit(swept, func(w io.Writer) {
			for _, id := range swept {
				fmt.Fprintln(w, id)
			}
		})
	})
}
