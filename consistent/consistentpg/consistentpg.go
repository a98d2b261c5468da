// Package consistentpg keeps the state streams of package consistent in
// PostgreSQL, through pgx v5: one table of state versions keyed by business
// id and version, each row holding the MessageId of the input that produced
// it and the context captured while handling it. A version is added with
// optimistic concurrency: it is inserted only if the stream's newest version
// is the one before it and the input's MessageId is not in the stream yet,
// in one statement that also removes what the Retention no longer keeps.
//
// The same Store is a [consistent.OutboxStore]: a second table holds the
// outgoing messages of the outbox variant, written by the statement that
// adds the version (so in its transaction).
//
// Tables, created by [Store.CreateTables] (default name busbar_consistent):
//
//	busbar_consistent (id text, version bigint, message_id text, context jsonb,
//	    state jsonb, stored_at timestamptz, primary key (id, version),
//	    unique (id, message_id))
//	busbar_consistent_outbox (seq bigserial primary key, id text, input_id text,
//	    idx int, destination text, message bytea, stored_at timestamptz)
//
// The package owns these two tables and nothing else in the database.
package consistentpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/consistent"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs of a database handle: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx have it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultTable is the versions table a Store uses unless told otherwise.
const DefaultTable = "busbar_consistent"

// Options configure a Store. The zero value is usable.
type Options struct {
	// Table names the versions table (default DefaultTable); the outbox
	// table is Table + "_outbox".
	Table string
	// Retention says which versions are kept (consistent.DefaultRetention
	// for zero fields).
	Retention consistent.Retention
	// Clock is the time Prune measures MaxAge against and PruneEvery waits
	// on (default clock.Real()).
	Clock clock.Clock
}

// Store is a consistent.OutboxStore over PostgreSQL.
type Store struct {
	db        DB
	name      string
	table     string // quoted
	outbox    string // quoted
	retention consistent.Retention
	clock     clock.Clock

	load, appendV, appendOut, prune string
}

// New returns a Store on db.
func New(db DB, o *Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("consistentpg: New needs a database")
	}
	if o == nil {
		o = &Options{}
	}
	s := &Store{db: db, name: o.Table, retention: o.Retention.WithDefaults(), clock: o.Clock}
	if s.name == "" {
		s.name = DefaultTable
	}
	if s.clock == nil {
		s.clock = clock.Real()
	}
	s.table = pgx.Identifier{s.name}.Sanitize()
	s.outbox = pgx.Identifier{s.name + "_outbox"}.Sanitize()
	// The newest version, the one the input produced and the one before it.
	s.load = fmt.Sprintf(`WITH m AS (SELECT version FROM %[1]s WHERE id = $1 AND message_id = $2)
SELECT version, message_id, context::text, state::text, stored_at FROM %[1]s
WHERE id = $1 AND (version = (SELECT max(version) FROM %[1]s WHERE id = $1)
	OR version IN (SELECT version FROM m) OR version IN (SELECT version - 1 FROM m))`, s.table)
	// Insert version $2 if the newest is $2-1 and $3 is new; then remove
	// what the retention no longer keeps: below the oldest kept version
	// (the greatest of $2-$7+1 and one past the newest version stored
	// before $8), less one for the replay base.
	cte := fmt.Sprintf(`WITH ins AS (
	INSERT INTO %[1]s (id, version, message_id, context, state, stored_at)
	SELECT $1::text, $2::bigint, $3::text, $4::jsonb, $5::jsonb, $6::timestamptz
	WHERE COALESCE((SELECT max(version) FROM %[1]s WHERE id = $1::text), 0) = $2::bigint - 1
	ON CONFLICT DO NOTHING RETURNING version
), del AS (
	DELETE FROM %[1]s WHERE id = $1::text AND EXISTS (SELECT 1 FROM ins)
	AND version < LEAST($2::bigint, GREATEST($2::bigint - $7::bigint + 1,
		COALESCE((SELECT max(version) + 1 FROM %[1]s WHERE id = $1::text AND stored_at < $8::timestamptz), 1))) - 1
)`, s.table)
	s.appendV = cte + ` SELECT count(*) FROM ins`
	// The same, and the outputs into the outbox, in the same statement (so
	// in one transaction): $9 destinations, $10 messages.
	s.appendOut = cte + fmt.Sprintf(`, ob AS (
	INSERT INTO %s (id, input_id, idx, destination, message, stored_at)
	SELECT $1::text, $3::text, o.idx - 1, o.destination, o.message, $6::timestamptz
	FROM unnest($9::text[], $10::bytea[]) WITH ORDINALITY AS o(destination, message, idx)
	WHERE EXISTS (SELECT 1 FROM ins)
	RETURNING seq, idx
)
SELECT (SELECT count(*) FROM ins), COALESCE((SELECT array_agg(seq ORDER BY idx) FROM ob), '{}')`, s.outbox)
	s.prune = fmt.Sprintf(`WITH m AS (
	SELECT id, max(version) AS n, max(version) FILTER (WHERE stored_at < $2::timestamptz) AS old FROM %[1]s GROUP BY id
)
DELETE FROM %[1]s t USING m WHERE t.id = m.id
AND t.version < LEAST(m.n, GREATEST(m.n - $1::bigint + 1, COALESCE(m.old + 1, 1))) - 1`, s.table)
	return s, nil
}

// Table returns the name of the versions table (the outbox table is Table()
// + "_outbox").
func (s *Store) Table() string { return s.name }

// CreateTables creates the versions and outbox tables if they do not exist.
func (s *Store) CreateTables(ctx context.Context) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	id         text        NOT NULL,
	version    bigint      NOT NULL,
	message_id text        NOT NULL,
	context    jsonb       NOT NULL,
	state      jsonb       NOT NULL,
	stored_at  timestamptz NOT NULL,
	PRIMARY KEY (id, version),
	UNIQUE (id, message_id)
);
CREATE TABLE IF NOT EXISTS %[2]s (
	seq         bigserial   PRIMARY KEY,
	id          text        NOT NULL,
	input_id    text        NOT NULL,
	idx         int         NOT NULL,
	destination text        NOT NULL,
	message     bytea       NOT NULL,
	stored_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS %[3]s ON %[2]s (id, input_id);
CREATE INDEX IF NOT EXISTS %[4]s ON %[2]s (stored_at)`,
		s.table, s.outbox, pgx.Identifier{s.name + "_outbox_input"}.Sanitize(), pgx.Identifier{s.name + "_outbox_stored"}.Sanitize()))
	return err
}

// Load reads the newest version of key.ID's stream and, when messageID is
// in it, the version it produced and the one before, in one query.
func (s *Store) Load(ctx context.Context, key consistent.Key, messageID string) (consistent.Loaded, error) {
	rows, err := s.db.Query(ctx, s.load, key.ID, messageID)
	if err != nil {
		return consistent.Loaded{}, err
	}
	vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (consistent.Version, error) {
		var v consistent.Version
		var c, st string
		err := row.Scan(&v.Number, &v.MessageID, &c, &st, &v.Stored)
		v.Context, v.State = []byte(c), []byte(st)
		return v, err
	})
	if err != nil {
		return consistent.Loaded{}, err
	}
	var ld consistent.Loaded
	for i := range vs {
		if vs[i].Number > ld.Latest.Number {
			ld.Latest = vs[i]
		}
		if vs[i].MessageID == messageID {
			ld.Match = &vs[i]
		}
	}
	if ld.Match != nil {
		for i := range vs {
			if vs[i].Number == ld.Match.Number-1 {
				ld.Base = &vs[i]
			}
		}
	}
	return ld, nil
}

func (s *Store) appendArgs(key consistent.Key, v consistent.Version) []any {
	return []any{key.ID, v.Number, v.MessageID, string(v.Context), string(v.State), v.Stored,
		int64(s.retention.MaxVersions), s.retention.Cutoff(v.Stored)}
}

// Append inserts v, or returns consistent.ErrConflict.
func (s *Store) Append(ctx context.Context, key consistent.Key, v consistent.Version) error {
	var n int
	if err := s.db.QueryRow(ctx, s.appendV, s.appendArgs(key, v)...).Scan(&n); err != nil {
		return err
	}
	if n != 1 {
		return consistent.ErrConflict
	}
	return nil
}

// AppendWithOutbox inserts v and outs in one statement, so atomically.
func (s *Store) AppendWithOutbox(ctx context.Context, key consistent.Key, v consistent.Version, outs []consistent.Outgoing) ([]consistent.Outgoing, error) {
	dests, msgs := make([]string, len(outs)), make([][]byte, len(outs))
	for i, o := range outs {
		dests[i], msgs[i] = o.To, o.Message
	}
	var n int
	var seqs []int64
	if err := s.db.QueryRow(ctx, s.appendOut, append(s.appendArgs(key, v), dests, msgs)...).Scan(&n, &seqs); err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, consistent.ErrConflict
	}
	if len(seqs) != len(outs) {
		return nil, fmt.Errorf("consistentpg: stored %d of %d outputs", len(seqs), len(outs))
	}
	stored := make([]consistent.Outgoing, len(outs))
	for i, o := range outs {
		o.Seq, o.BusinessID, o.InputID, o.Index, o.Stored = seqs[i], key.ID, v.MessageID, i, v.Stored
		stored[i] = o
	}
	return stored, nil
}

func (s *Store) pending(ctx context.Context, where string, args ...any) ([]consistent.Outgoing, error) {
	rows, err := s.db.Query(ctx, fmt.Sprintf(`SELECT seq, id, input_id, idx, destination, message, stored_at FROM %s WHERE %s`, s.outbox, where), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (consistent.Outgoing, error) {
		var o consistent.Outgoing
		err := row.Scan(&o.Seq, &o.BusinessID, &o.InputID, &o.Index, &o.To, &o.Message, &o.Stored)
		return o, err
	})
}

// Pending returns the outbox entries of one input, in order.
func (s *Store) Pending(ctx context.Context, key consistent.Key, inputID string) ([]consistent.Outgoing, error) {
	return s.pending(ctx, `id = $1 AND input_id = $2 ORDER BY idx`, key.ID, inputID)
}

// PendingBefore returns up to limit outbox entries stored before t, oldest
// first.
func (s *Store) PendingBefore(ctx context.Context, t time.Time, limit int) ([]consistent.Outgoing, error) {
	return s.pending(ctx, `stored_at < $1 ORDER BY seq LIMIT $2`, t, limit)
}

// Sent deletes outbox entries.
func (s *Store) Sent(ctx context.Context, key consistent.Key, seqs []int64) error {
	_, err := s.db.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE seq = ANY($1)`, s.outbox), seqs)
	return err
}

// Prune removes, from every stream, the versions the Retention no longer
// keeps at the Clock's now, and returns how many it removed. Append prunes
// the stream it writes; Prune is for streams that no longer receive
// messages (run it from a periodic job).
func (s *Store) Prune(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, s.prune, int64(s.retention.MaxVersions), s.retention.Cutoff(s.clock.Now()))
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// PruneEvery calls Prune every interval (on the Options' Clock) until ctx
// is cancelled, then returns ctx.Err(). A failed Prune goes to onError (if
// set) and is tried again at the next interval.
func (s *Store) PruneEvery(ctx context.Context, interval time.Duration, onError func(error)) error {
	if interval <= 0 {
		return errors.New("consistentpg: PruneEvery needs a positive interval")
	}
	for {
		wake := make(chan struct{})
		t := s.clock.AfterFunc(interval, func() { close(wake) })
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
		}
		if _, err := s.Prune(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
	}
}

var _ consistent.OutboxStore = (*Store)(nil)
