// Package sagapg keeps saga instances in PostgreSQL, through pgx: a
// [saga.Store] whose instances can be queried (by saga, status, or the
// fields of their state with the jsonb operators) and whose every write is
// guarded by optimistic concurrency on a version column.
//
// One row per instance, in a table (default busbar_sagas) that
// [Store.CreateTable] creates:
//
//	saga text, id text, status text, version bigint, data jsonb, updated_at timestamptz,
//	primary key (saga, id)
//
// data is the instance as the saga stores it; its "state" member is the
// user's state, so `data->'state'->>'PaymentReceived'` reads a field.
package sagapg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/busbar-io/busbar/saga"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs of a database handle: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultTable is the table a Store uses unless told otherwise.
const DefaultTable = "busbar_sagas"

// Store is a saga.Store over a PostgreSQL table.
type Store struct {
	db    DB
	table string // quoted
	name  string
}

// New returns a Store on db using table (DefaultTable when empty).
func New(db DB, table string) *Store {
	if table == "" {
		table = DefaultTable
	}
	return &Store{db: db, table: pgx.Identifier{table}.Sanitize(), name: table}
}

// CreateTable creates the table and its status index if they do not exist.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	saga       text        NOT NULL,
	id         text        NOT NULL,
	status     text        NOT NULL,
	version    bigint      NOT NULL,
	data       jsonb       NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (saga, id)
);
CREATE INDEX IF NOT EXISTS %s ON %s (saga, status, updated_at)`,
		s.table, pgx.Identifier{s.name + "_status"}.Sanitize(), s.table))
	return err
}

// Load reads the instance of saga name keyed by the session id.
func (s *Store) Load(ctx context.Context, sess saga.Session, name string) (saga.Record, bool, error) {
	rec, ok, err := s.Get(ctx, name, sess.ID())
	return rec, ok, err
}

// Get reads one instance by saga name and id.
func (s *Store) Get(ctx context.Context, name, id string) (saga.Record, bool, error) {
	rec := saga.Record{Saga: name, ID: id}
	var status string
	err := s.db.QueryRow(ctx, fmt.Sprintf(`SELECT status, version, data::text, updated_at FROM %s WHERE saga = $1 AND id = $2`, s.table),
		name, id).Scan(&status, &rec.Version, &rec.Data, &rec.Updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return saga.Record{}, false, nil
	}
	if err != nil {
		return saga.Record{}, false, err
	}
	rec.Status = saga.Status(status)
	return rec, true, nil
}

// Save inserts the instance (Version 1) or updates it from Version-1,
// returning saga.ErrConflict when another writer got there first.
func (s *Store) Save(ctx context.Context, sess saga.Session, rec saga.Record) error {
	var tag pgconn.CommandTag
	var err error
	if rec.Version <= 1 {
		tag, err = s.db.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (saga, id, status, version, data, updated_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6) ON CONFLICT (saga, id) DO NOTHING`, s.table),
			rec.Saga, rec.ID, string(rec.Status), rec.Version, string(rec.Data), rec.Updated)
	} else {
		tag, err = s.db.Exec(ctx, fmt.Sprintf(`UPDATE %s SET status = $3, version = $4, data = $5::jsonb, updated_at = $6
WHERE saga = $1 AND id = $2 AND version = $4 - 1`, s.table),
			rec.Saga, rec.ID, string(rec.Status), rec.Version, string(rec.Data), rec.Updated)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return saga.ErrConflict
	}
	return nil
}

// Delete removes the instance if it is still at version.
func (s *Store) Delete(ctx context.Context, sess saga.Session, name string, version int64) error {
	tag, err := s.db.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE saga = $1 AND id = $2 AND version = $3`, s.table), name, sess.ID(), version)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return saga.ErrConflict
	}
	return nil
}

// Instance is a stored saga instance, as a query returns it.
type Instance struct {
	Saga    string
	ID      string
	Status  saga.Status
	Version int64
	Updated time.Time
	// State is the user's state as JSON.
	State json.RawMessage
}

// List returns up to limit instances of saga name with the given status
// ("" for any), most recently updated first.
func (s *Store) List(ctx context.Context, name string, status saga.Status, limit int) ([]Instance, error) {
	rows, err := s.db.Query(ctx, fmt.Sprintf(`SELECT id, status, version, updated_at, (data->'state')::text FROM %s
WHERE saga = $1 AND ($2 = '' OR status = $2) ORDER BY updated_at DESC, id LIMIT $3`, s.table), name, string(status), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Instance, error) {
		in := Instance{Saga: name}
		var st string
		var state *string
		if err := row.Scan(&in.ID, &st, &in.Version, &in.Updated, &state); err != nil {
			return Instance{}, err
		}
		in.Status = saga.Status(st)
		if state != nil {
			in.State = json.RawMessage(*state)
		}
		return in, nil
	})
}

// Count returns how many instances of saga name have each status.
func (s *Store) Count(ctx context.Context, name string) (map[saga.Status]int, error) {
	rows, err := s.db.Query(ctx, fmt.Sprintf(`SELECT status, count(*) FROM %s WHERE saga = $1 GROUP BY status`, s.table), name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[saga.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[saga.Status(st)] = n
	}
	return out, rows.Err()
}

var _ saga.Store = (*Store)(nil)
