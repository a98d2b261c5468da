// Package pipelinepg keeps failed pipeline jobs in PostgreSQL, through pgx:
// a [pipeline.Store] whose set-aside tasks can be queried with SQL (by job,
// task type, reason, error text or time).
//
// One row per set-aside task, in a table (default busbar_failed_tasks)
// that [Store.CreateTable] creates:
//
//	job text, idx int, origin text, count int, last bool, type text, body bytea,
//	reason text, error text, attempts int, failed_at timestamptz,
//	primary key (job, idx)
//
// The package owns that table and nothing else: it never touches the
// broker.
package pipelinepg

import (
	"context"
	"fmt"
	"time"

	"github.com/busbar-io/busbar/pipeline"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs of a database handle: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// DefaultTable is the table a Store uses unless told otherwise.
const DefaultTable = "busbar_failed_tasks"

// Store is a pipeline.Store over a PostgreSQL table.
type Store struct {
	db    DB
	table string // quoted
}

// New returns a Store on db using table (DefaultTable when empty).
func New(db DB, table string) *Store {
	if table == "" {
		table = DefaultTable
	}
	return &Store{db: db, table: pgx.Identifier{table}.Sanitize()}
}

// CreateTable creates the table if it does not exist.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	job       text        NOT NULL,
	idx       integer     NOT NULL,
	origin    text        NOT NULL,
	count     integer     NOT NULL,
	last      boolean     NOT NULL,
	type      text        NOT NULL,
	body      bytea       NOT NULL,
	reason    text        NOT NULL,
	error     text        NOT NULL,
	attempts  integer     NOT NULL,
	failed_at timestamptz NOT NULL,
	PRIMARY KEY (job, idx))`, s.table))
	if err != nil {
		return fmt.Errorf("pipelinepg: creating %s: %w", s.table, err)
	}
	return nil
}

// Add inserts the task; a task already stored is kept as it is.
func (s *Store) Add(ctx context.Context, t pipeline.FailedTask) error {
	body := t.Body
	if body == nil {
		body = []byte{}
	}
	_, err := s.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s
	(job, idx, origin, count, last, type, body, reason, error, attempts, failed_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
	ON CONFLICT (job, idx) DO NOTHING`, s.table),
		t.Job, t.Index, t.Origin, t.Count, t.Last, t.Type, body, t.Reason, t.Error, t.Attempts, t.FailedAt)
	if err != nil {
		return fmt.Errorf("pipelinepg: storing task %d of job %s: %w", t.Index, t.Job, err)
	}
	return nil
}

const columns = `job, idx, origin, count, last, type, body, reason, error, attempts, failed_at`

// Job returns the job's tasks in index order.
func (s *Store) Job(ctx context.Context, job string) (pipeline.FailedJob, error) {
	jobs, err := s.query(ctx, fmt.Sprintf(`SELECT %s FROM %s WHERE job = $1 ORDER BY idx`, columns, s.table), job)
	if err != nil {
		return pipeline.FailedJob{}, err
	}
	if len(jobs) == 0 {
		return pipeline.FailedJob{Job: job}, pipeline.ErrNotFound
	}
	return jobs[0], nil
}

// Jobs returns every stored job in job id order.
func (s *Store) Jobs(ctx context.Context) ([]pipeline.FailedJob, error) {
	return s.query(ctx, fmt.Sprintf(`SELECT %s FROM %s ORDER BY job, idx`, columns, s.table))
}

// Remove deletes the job's tasks.
func (s *Store) Remove(ctx context.Context, job string) error {
	if _, err := s.db.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE job = $1`, s.table), job); err != nil {
		return fmt.Errorf("pipelinepg: removing job %s: %w", job, err)
	}
	return nil
}

// query reads rows ordered by job and index into jobs.
func (s *Store) query(ctx context.Context, sql string, args ...any) ([]pipeline.FailedJob, error) {
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pipelinepg: %w", err)
	}
	defer rows.Close()
	var out []pipeline.FailedJob
	for rows.Next() {
		var t pipeline.FailedTask
		var at time.Time
		if err := rows.Scan(&t.Job, &t.Index, &t.Origin, &t.Count, &t.Last, &t.Type, &t.Body, &t.Reason, &t.Error, &t.Attempts, &at); err != nil {
			return nil, fmt.Errorf("pipelinepg: %w", err)
		}
		t.FailedAt = at.UTC()
		if n := len(out); n == 0 || out[n-1].Job != t.Job {
			out = append(out, pipeline.FailedJob{Job: t.Job, Origin: t.Origin})
		}
		out[len(out)-1].Tasks = append(out[len(out)-1].Tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pipelinepg: %w", err)
	}
	return out, nil
}
