// Package geopg keeps the journal of package geo in PostgreSQL, through
// pgx v5: one table of records keyed by session and position, written with
// row-level optimistic concurrency (an insert that conflicts on the key, an
// update conditional on the version), and a LISTEN/NOTIFY channel named
// after the table on which every create and replace announces its session,
// in its own transaction, so waiting consumers wake only on a change.
//
// CompleteWith commits a handler's effects in the transaction that marks
// the message done, which makes the effects happen once.
//
// Table, created by [Store.CreateTable] (default name busbar_geo):
//
//	busbar_geo (session text, position bigint, status smallint, next bigint,
//	    owner text, lease_until timestamptz, message_id text, reason text,
//	    version bigint, updated_at timestamptz, primary key (session, position))
//
// The package owns that table and its channel, nothing else.
package geopg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/geo"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTable is the table a Store uses unless told otherwise.
const DefaultTable = "busbar_geo"

// Options configure a Store. The zero value is usable.
type Options struct {
	// Table names the table and the notification channel (default
	// DefaultTable): letters, digits and underscores.
	Table string
	// Logger logs the listener's lost connections (default: discarded).
	Logger *slog.Logger
	// Clock times the listener's pauses before it reconnects (default:
	// clock.Real()).
	Clock clock.Clock
}

// Store is a geo.Journal on PostgreSQL. Close stops its listener.
type Store struct {
	pool   *pgxpool.Pool
	name   string
	logger *slog.Logger
	clk    clock.Clock

	get, create, replace, renew, prune string

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	started  bool
	cancel   context.CancelFunc
	stopped  chan struct{}
}

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

const columns = `session, position, status, next, owner, lease_until, message_id, reason, version`

// New returns a Store on pool.
func New(pool *pgxpool.Pool, o *Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("geopg: New needs a pool")
	}
	if o == nil {
		o = &Options{}
	}
	s := &Store{pool: pool, name: o.Table, logger: o.Logger, clk: o.Clock, watchers: map[string]map[chan struct{}]struct{}{}, stopped: make(chan struct{})}
	if s.name == "" {
		s.name = DefaultTable
	}
	if !validName.MatchString(s.name) {
		return nil, fmt.Errorf("geopg: table name %q: letters, digits and underscores only", s.name)
	}
	if s.clk == nil {
		s.clk = clock.Real()
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	t := pgx.Identifier{s.name}.Sanitize()
	s.get = fmt.Sprintf(`SELECT %s FROM %s WHERE session = $1 AND position = $2`, columns, t)
	// Each write announces its session on the channel, in its transaction.
	s.create = fmt.Sprintf(`WITH w AS (
	INSERT INTO %s (%s, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, now())
	ON CONFLICT DO NOTHING RETURNING session)
SELECT pg_notify('%s', session) FROM w`, t, columns, s.name)
	s.replace = fmt.Sprintf(`WITH w AS (
	UPDATE %s SET status = $3, next = $4, owner = $5, lease_until = $6, message_id = $7, reason = $8,
		version = version + 1, updated_at = now()
	WHERE session = $1 AND position = $2 AND version = $9 RETURNING session)
SELECT pg_notify('%s', session) FROM w`, t, s.name)
	done := fmt.Sprintf("(%d, %d)", geo.Completed, geo.Failed)
	s.prune = fmt.Sprintf(`WITH top AS (
	SELECT session, max(position) AS position FROM %[1]s WHERE position > 0 AND status IN %[2]s GROUP BY session
), del AS (
	DELETE FROM %[1]s t USING top WHERE t.session = top.session AND t.position > 0 AND t.position < top.position
		AND t.status IN %[2]s AND t.updated_at < $1
	RETURNING t.session, t.position
), floor AS (
	INSERT INTO %[1]s AS f (%[3]s, updated_at)
	SELECT session, 0, %[4]d, max(position) + 1, '', '0001-01-01 00:00:00+00', '', 'pruned', 1, now() FROM del GROUP BY session
	ON CONFLICT (session, position) DO UPDATE SET next = GREATEST(f.next, EXCLUDED.next), version = f.version + 1, updated_at = now()
	RETURNING 1
)
SELECT (SELECT count(*) FROM del) + 0 * (SELECT count(*) FROM floor)`, t, done, columns, geo.Pending)
	s.renew = fmt.Sprintf(`UPDATE %s SET lease_until = $3 WHERE session = $1 AND position = $2 AND version = $4 AND owner = $5`, t)
	return s, nil
}

// Table returns the table's name, which is also the channel's.
func (s *Store) Table() string { return s.name }

// CreateTable creates the table if it does not exist.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	session     text        NOT NULL,
	position    bigint      NOT NULL,
	status      smallint    NOT NULL,
	next        bigint      NOT NULL,
	owner       text        NOT NULL,
	lease_until timestamptz NOT NULL,
	message_id  text        NOT NULL,
	reason      text        NOT NULL,
	version     bigint      NOT NULL,
	updated_at  timestamptz NOT NULL,
	PRIMARY KEY (session, position)
)`, pgx.Identifier{s.name}.Sanitize()))
	return err
}

// DB is what the writes need: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Get returns the record of k, or geo.ErrNotFound.
func (s *Store) Get(ctx context.Context, k geo.Key) (geo.Record, error) {
	var r geo.Record
	var st int16
	err := s.pool.QueryRow(ctx, s.get, k.Session, k.Position).Scan(&r.Key.Session, &r.Key.Position, &st, &r.Next,
		&r.Owner, &r.LeaseUntil, &r.MessageID, &r.Reason, &r.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return geo.Record{}, geo.ErrNotFound
	}
	r.Status = geo.Status(st)
	return r, err
}

// Create stores r with version 1, or returns geo.ErrConflict.
func (s *Store) Create(ctx context.Context, r geo.Record) (geo.Record, error) {
	tag, err := s.pool.Exec(ctx, s.create, r.Key.Session, r.Key.Position, int16(r.Status), r.Next, r.Owner,
		r.LeaseUntil, r.MessageID, r.Reason)
	if err != nil {
		return geo.Record{}, err
	}
	if tag.RowsAffected() != 1 {
		return geo.Record{}, geo.ErrConflict
	}
	r.Version = 1
	return r, nil
}

// Replace stores r if the stored version is r.Version, or returns
// geo.ErrConflict.
func (s *Store) Replace(ctx context.Context, r geo.Record) (geo.Record, error) {
	return s.ReplaceIn(ctx, s.pool, r)
}

// ReplaceIn is Replace through db: in a transaction, the record commits
// (and is announced) with it.
func (s *Store) ReplaceIn(ctx context.Context, db DB, r geo.Record) (geo.Record, error) {
	tag, err := db.Exec(ctx, s.replace, r.Key.Session, r.Key.Position, int16(r.Status), r.Next, r.Owner,
		r.LeaseUntil, r.MessageID, r.Reason, r.Version)
	if err != nil {
		return geo.Record{}, err
	}
	if tag.RowsAffected() != 1 {
		return geo.Record{}, geo.ErrConflict
	}
	r.Version++
	return r, nil
}

// Renew moves the lease of r.Key to r.LeaseUntil if r's version and owner
// are stored, or returns geo.ErrConflict.
func (s *Store) Renew(ctx context.Context, r geo.Record) error {
	tag, err := s.pool.Exec(ctx, s.renew, r.Key.Session, r.Key.Position, r.LeaseUntil, r.Version, r.Owner)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return geo.ErrConflict
	}
	return nil
}

// CompleteWith runs effects and marks w's message done (w.Finished) in one
// transaction: both commit, or neither. It returns geo.ErrConflict, with
// nothing committed, when the claim was lost. After the commit it tells w
// (Work.Finish), so the consumer does not write the record again.
func (s *Store) CompleteWith(ctx context.Context, w *geo.Work, effects func(ctx context.Context, tx pgx.Tx) error) error {
	var done geo.Record
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := effects(ctx, tx); err != nil {
			return err
		}
		var err error
		done, err = s.ReplaceIn(ctx, tx, w.Finished())
		return err
	})
	if err != nil {
		return err
	}
	w.Finish(done)
	return nil
}

// Watch returns a channel signalled after every create or replace of a
// record of session, and after the listener's connection was lost and
// re-established (a notification may have been missed then).
func (s *Store) Watch(ctx context.Context, session string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if !s.started {
		s.started = true
		lctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		go s.listen(lctx)
	}
	set := s.watchers[session]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.watchers[session] = set
	}
	set[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		if cur := s.watchers[session]; cur != nil {
			delete(cur, ch)
			if len(cur) == 0 {
				delete(s.watchers, session)
			}
		}
		s.mu.Unlock()
	}, nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// notify signals the watchers of session, or every watcher for "".
func (s *Store) notify(session string, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if all {
		for _, set := range s.watchers {
			for ch := range set {
				signal(ch)
			}
		}
		return
	}
	for ch := range s.watchers[session] {
		signal(ch)
	}
}

// listen holds one connection LISTENing on the channel, reconnecting after
// a failure; after every (re)connection it wakes every watcher.
func (s *Store) listen(ctx context.Context) {
	defer close(s.stopped)
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() { pause = 50 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.logger.Warn("geopg: listener lost its connection", "table", s.name, "err", err)
		wake := make(chan struct{})
		t := s.clk.AfterFunc(pause, func() { close(wake) })
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, listening func()) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // a LISTENing connection must not go back to the pool
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.name}.Sanitize()); err != nil {
		return err
	}
	listening()
	s.notify("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		s.notify(n.Payload, false)
	}
}

// Prune removes the records of messages (geo.PerMessage) done before
// cutoff, except each session's newest done one, and raises the session's
// floor (its position-0 record's Next) past what it removed, so that a late
// copy of a removed position is completed as done, not processed again.
// It returns how many records it removed. Records of geo.PerSession (one
// per session) are never removed: a table serves one granularity.
func (s *Store) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, s.prune, cutoff).Scan(&n)
	return n, err
}

// Close stops the listener. The pool stays the caller's.
func (s *Store) Close() {
	s.mu.Lock()
	started, cancel := s.started, s.cancel
	s.started = true // no listener after Close
	s.mu.Unlock()
	if started && cancel != nil {
		cancel()
		<-s.stopped
	}
}

var _ geo.Journal = (*Store)(nil)
