// Package postgres is a store.Store backend on PostgreSQL: the shared store
// that lets several Busbar nodes run over one database (the cluster), with
// PostgreSQL's own durability, replication and failover.
//
// It owns one table (Options.Table) of bytea keys and values and one
// LISTEN/NOTIFY channel, and the group committer that turns many concurrent
// Commits into one transaction. It knows nothing of the broker's key layout,
// and it must not touch other tables.
//
// The contract of package store maps onto PostgreSQL as follows:
//
//   - Durability: Commit returns once its transaction has committed; with
//     PostgreSQL's default synchronous_commit=on, that is after the WAL
//     flush (and, with synchronous standbys, after their confirmation).
//   - Atomicity: a group of batches is applied in one transaction; a batch
//     whose conditions fail is left out of it (its conditions are decided
//     before any of its operations is sent), and the rest of the group
//     commits.
//   - Order: keys compare as bytea, which PostgreSQL orders bytewise.
//   - Conditions: each condition key is locked for the transaction — its
//     row with SELECT … FOR UPDATE, and, so that "absent" can be asserted
//     too, a transaction-scoped advisory lock on the key's hash — then
//     compared. Conditional writers on one key, in any number of processes,
//     are thereby serialized; a writer that changes an existing condition key
//     without a condition still waits for the row lock. Batches that write a
//     key which other writers check for absence must check it themselves.
//   - Watch: within this process every committed key is reported; keys under
//     Options.Announce prefixes are also published on the channel in the
//     committing transaction, so every other process's watches receive them
//     after the commit. When the listening connection is lost and back,
//     whatever was announced meanwhile is lost with it: the watches are told
//     so (a nil key) and re-read.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/busbar-io/busbar/internal/pgurl"
	"github.com/busbar-io/busbar/store"
)

// Options configure a Store. The zero value works with DefaultTable.
type Options struct {
	// Table is the table of keys and values, created if missing. Default
	// DefaultTable. Letters, digits and underscores only.
	Table string
	// Announce lists the key prefixes whose changes are published to other
	// processes (NOTIFY) for their watches: the shared metadata. Keys
	// outside them are reported only to this process's watches.
	Announce [][]byte
	// MaxGroup caps the batches merged into one transaction (default 256).
	MaxGroup int
	// Logger receives errors of the notification listener; nil discards.
	Logger *slog.Logger
	// Exclusive makes Open fail when another Store with Exclusive set has
	// the table open, and holds that claim (a session advisory lock on a
	// connection of its own) until Close: for a program that must be the
	// table's only writer. `busbar serve` does not set it: its nodes share
	// a table through leases (package cluster).
	Exclusive bool
	// IdleInTransaction is how long PostgreSQL lets a session sit idle
	// inside a transaction before it ends the session (its
	// idle_in_transaction_session_timeout; default 1 s; negative: the
	// server's setting). A group commit holds locks on its condition keys
	// between its round trips: a node paused in that moment (SIGSTOP, a
	// stalled VM) would otherwise block every other node's commit on those
	// keys — a lease takeover included — until it resumed. Its own commit
	// then fails, unacknowledged.
	IdleInTransaction time.Duration
}

// ParseURL splits a store URL (postgres://… or postgresql://…) into the
// connection string and Options: the query parameter busbar_table names the
// table; every other parameter is PostgreSQL's. A query that cannot be read
// whole, or names busbar_table twice, is refused rather than cut.
func ParseURL(raw string) (dsn string, opts Options, err error) {
	dsn, v, err := pgurl.Split(raw, "busbar_table")
	if err != nil {
		return "", opts, fmt.Errorf("store/postgres: %w", err)
	}
	opts.Table = v[0]
	return dsn, opts, nil
}

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "busbar_kv"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// scanPage is how many rows Scan reads per query. Rows are read in pages so
// that fn runs with no connection held and may use the store itself.
const scanPage = 1000

// Store is a store.Store on a PostgreSQL table. It is safe for concurrent
// use, also by several processes on the same table.
type Store struct {
	pool    *pgxpool.Pool
	opts    Options
	q       queries
	channel string
	origin  string // tells this Store's announcements from other writers'
	watches store.Watchers

	mu      sync.Mutex
	pending []*request
	wake    chan struct{}
	closed  bool
	stop    chan struct{}
	done    chan struct{}

	listenCancel context.CancelFunc
	listenDone   chan struct{}
	claim        *pgxpool.Conn // holds the Exclusive advisory lock

	commits, txs, ops, bytes atomic.Uint64
}

type queries struct {
	get, getMany, scanBounded, scanOpen, set, del, delRange, lockCond, readCond string
}

type request struct {
	b    *store.Batch
	err  error
	done chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a PostgreSQL connection
// string or URL), creates the table if it does not exist, and starts the
// committer and the notification listener.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if !tableName.MatchString(opts.Table) {
		return nil, fmt.Errorf("store/postgres: table name %q: use letters, digits and underscores", opts.Table)
	}
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = 256
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.IdleInTransaction == 0 {
		opts.IdleInTransaction = time.Second
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set && opts.IdleInTransaction > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(opts.IdleInTransaction.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	t := pgx.Identifier{opts.Table}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+t+" (k bytea PRIMARY KEY, v bytea NOT NULL)"); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: create table %s: %w", opts.Table, err)
	}
	var o [8]byte
	_, _ = rand.Read(o[:])
	s := &Store{pool: pool, opts: opts, channel: strings.ToLower(opts.Table) + "_changes", origin: hex.EncodeToString(o[:]),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.q = queries{
		get:         "SELECT v FROM " + t + " WHERE k = $1",
		getMany:     "SELECT k, v FROM " + t + " WHERE k = ANY($1)",
		scanBounded: "SELECT k, v FROM " + t + " WHERE k >= $1 AND k < $2 AND ($3 OR k > $1) ORDER BY k LIMIT $4",
		scanOpen:    "SELECT k, v FROM " + t + " WHERE k >= $1 AND ($2 OR k > $1) ORDER BY k LIMIT $3",
		set:         "INSERT INTO " + t + " (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
		del:         "DELETE FROM " + t + " WHERE k = $1",
		delRange:    "DELETE FROM " + t + " WHERE k >= $1 AND k < $2",
		lockCond:    "SELECT pg_advisory_xact_lock(hashtextextended(encode($1::bytea, 'hex'), 0))",
		readCond:    "SELECT v FROM " + t + " WHERE k = $1 FOR UPDATE",
	}
	if opts.Exclusive {
		if s.claim, err = pool.Acquire(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("store/postgres: %w", err)
		}
		var ok bool
		if err := s.claim.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 1))", "busbar:"+opts.Table).Scan(&ok); err != nil || !ok {
			s.claim.Release()
			pool.Close()
			if err == nil {
				err = fmt.Errorf("another Busbar node has table %s open", opts.Table)
			}
			return nil, fmt.Errorf("store/postgres: %w", err)
		}
	}
	go s.commitLoop()
	lctx, cancel := context.WithCancel(context.Background())
	s.listenCancel, s.listenDone = cancel, make(chan struct{})
	ready := make(chan error, 1)
	go s.listen(lctx, ready)
	if err := <-ready; err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Commit applies b atomically if its conditions hold, and returns once its
// transaction has committed. Concurrent Commits share one transaction.
func (s *Store) Commit(ctx context.Context, b *store.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if b == nil || len(b.Ops)+len(b.Conds) == 0 {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return store.ErrClosed
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{b: b, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.pending = append(s.pending, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-r.done
	return r.err
}

func (s *Store) commitLoop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		n := min(len(s.pending), s.opts.MaxGroup)
		reqs := append([]*request(nil), s.pending[:n]...)
		s.pending = append(s.pending[:0], s.pending[n:]...)
		closed := s.closed
		s.mu.Unlock()
		if len(reqs) == 0 {
			if closed {
				return
			}
			select {
			case <-s.wake:
			case <-s.stop:
			}
			continue
		}
		s.commitGroup(reqs)
	}
}

// commitGroup runs reqs in one transaction and answers them. The
// condition keys of the whole group are locked and read first, in one
// round trip; each batch's conditions are then decided in order against
// those values as the batches before it in the group change them
// (store.ValueAfter), so a batch whose conditions fail sends nothing; the
// operations of the others go in one pipelined round trip.
func (s *Store) commitGroup(reqs []*request) {
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		vals, err := s.lockConds(ctx, tx, reqs)
		if err != nil {
			return err
		}
		var pb pgx.Batch
		for _, r := range reqs {
			if err := store.CheckConds(r.b.Conds, func(k []byte) ([]byte, bool, error) {
				c := vals[string(k)]
				return c.v, c.found, nil
			}); err != nil {
				r.err = err
				continue
			}
			for k, c := range vals {
				c.v, c.found = store.ValueAfter(r.b.Ops, []byte(k), c.v, c.found)
				vals[k] = c
			}
			s.queueOps(&pb, r.b)
		}
		if pb.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, &pb).Close()
	})
	if err != nil {
		err = fmt.Errorf("store/postgres: commit of %d batches: %w", len(reqs), err)
	} else {
		s.txs.Add(1)
	}
	for _, r := range reqs {
		if r.err == nil {
			r.err = err
		}
		if r.err == nil {
			s.commits.Add(1)
			s.ops.Add(uint64(len(r.b.Ops)))
			s.bytes.Add(uint64(r.b.Bytes()))
			if s.watches.Active() {
				s.watches.Notify(r.b.Ops)
			}
		}
		close(r.done)
	}
}

// condValue is a condition key's value as the group goes.
type condValue struct {
	v     []byte
	found bool
}

// lockConds locks every condition key of reqs for the transaction (an
// advisory lock on its hash, so that absence holds too, and its row) and
// reads its value, in one round trip, keys in order so that two nodes'
// groups lock them in the same order.
func (s *Store) lockConds(ctx context.Context, tx pgx.Tx, reqs []*request) (map[string]condValue, error) {
	vals := map[string]condValue{}
	var keys []string
	for _, r := range reqs {
		for _, c := range r.b.Conds {
			if _, ok := vals[string(c.Key)]; !ok {
				vals[string(c.Key)] = condValue{}
				keys = append(keys, string(c.Key))
			}
		}
	}
	if len(keys) == 0 {
		return vals, nil
	}
	sort.Strings(keys)
	var pb pgx.Batch
	for _, k := range keys {
		pb.Queue(s.q.lockCond, []byte(k))
	}
	for _, k := range keys {
		pb.Queue(s.q.readCond, []byte(k))
	}
	br := tx.SendBatch(ctx, &pb)
	for range keys {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, err
		}
	}
	for _, k := range keys {
		var v []byte
		err := br.QueryRow().Scan(&v)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			br.Close()
			return nil, err
		default:
			if v == nil {
				v = []byte{}
			}
			vals[k] = condValue{v: v, found: true}
		}
	}
	return vals, br.Close()
}

// queueOps queues b's operations, and the announcements of its keys.
func (s *Store) queueOps(pb *pgx.Batch, b *store.Batch) {
	for _, op := range b.Ops {
		switch op.Kind {
		case store.OpSet:
			v := op.Joined()
			if v == nil {
				v = []byte{}
			}
			pb.Queue(s.q.set, op.Key, v)
		case store.OpDelete:
			pb.Queue(s.q.del, op.Key)
		case store.OpDeleteRange:
			if !store.EmptyRange(op.Key, op.End) {
				pb.Queue(s.q.delRange, op.Key, op.End)
			}
		}
		if k, ok := s.announced(op); ok {
			pb.Queue("SELECT pg_notify($1, $2)", s.channel, s.origin+":"+hex.EncodeToString(k))
		}
	}
}

// announced returns the key to publish for op, if op touches an Announce
// prefix (a delete-range: the start of its overlap with the prefix).
func (s *Store) announced(op store.Op) ([]byte, bool) {
	for _, p := range s.opts.Announce {
		if op.Kind != store.OpDeleteRange {
			if strings.HasPrefix(string(op.Key), string(p)) {
				return op.Key, true
			}
			continue
		}
		start := op.Key
		if string(start) < string(p) {
			start = p
		}
		if !store.EmptyRange(start, op.End) && strings.HasPrefix(string(start), string(p)) {
			return start, true
		}
	}
	return nil, false
}

// listen receives other processes' announcements and reports them to this
// process's watches. It reconnects after errors until Close; once it
// listens again, it tells the watches they may have missed changes
// (Watchers.Gap), since what was announced meanwhile is lost.
func (s *Store) listen(ctx context.Context, ready chan<- error) {
	defer close(s.listenDone)
	first := true
	backoff := listenBackoff
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() {
			backoff = listenBackoff
			if first {
				ready <- nil
				first = false
				return
			}
			s.opts.Logger.Info("store/postgres: notification listener reconnected")
			s.watches.Gap()
		})
		if first {
			ready <- fmt.Errorf("store/postgres: listen: %w", err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.opts.Logger.Error("store/postgres: notification listener failed; reconnecting", "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenBackoff is the first wait before the listener reconnects; it
// doubles while reconnecting fails, up to 5 s.
const listenBackoff = 50 * time.Millisecond

func (s *Store) listenOnce(ctx context.Context, listening func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		origin, key, ok := strings.Cut(n.Payload, ":")
		if !ok || origin == s.origin || !s.watches.Active() {
			continue // this Store's own commits reached its watches already
		}
		k, err := hex.DecodeString(key)
		if err != nil {
			continue
		}
		s.watches.Notify([]store.Op{{Kind: store.OpSet, Key: k}})
	}
}

// Get returns a copy of the value stored under key, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	var v []byte
	err := s.pool.QueryRow(ctx, s.q.get, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("store/postgres: get: %w", err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// GetMany returns copies of the values stored under keys (nil for a missing
// key), read with one query.
func (s *Store) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	fail := func(err error) ([][]byte, error) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("store/postgres: get: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.q.getMany, keys)
	if err != nil {
		return fail(err)
	}
	found := make(map[string][]byte, len(keys))
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fail(err)
		}
		if v == nil {
			v = []byte{}
		}
		found[string(k)] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	handed := make(map[string]bool, len(found))
	for i, k := range keys {
		v, ok := found[string(k)]
		if !ok {
			continue
		}
		if handed[string(k)] {
			v = slices.Clone(v) // a repeated key gets a copy of its own
		}
		handed[string(k)] = true
		out[i] = v
	}
	return out, nil
}

// Scan calls fn for each key in [start, end) in ascending order, reading
// pages of rows; fn runs with no connection held and may use the store.
// Commits made during the scan to keys not yet reached are seen.
func (s *Store) Scan(ctx context.Context, start, end []byte, fn func(key, value []byte) error) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if store.EmptyRange(start, end) {
		return nil
	}
	cursor, inclusive := start, true
	if cursor == nil {
		cursor = []byte{}
	}
	for {
		var rows pgx.Rows
		var err error
		if end == nil {
			rows, err = s.pool.Query(ctx, s.q.scanOpen, cursor, inclusive, scanPage)
		} else {
			rows, err = s.pool.Query(ctx, s.q.scanBounded, cursor, end, inclusive, scanPage)
		}
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return fmt.Errorf("store/postgres: scan: %w", err)
		}
		type kv struct{ k, v []byte }
		var page []kv
		for rows.Next() {
			var r kv
			if err := rows.Scan(&r.k, &r.v); err != nil {
				rows.Close()
				return fmt.Errorf("store/postgres: scan: %w", err)
			}
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store/postgres: scan: %w", err)
		}
		for _, r := range page {
			if r.v == nil {
				r.v = []byte{}
			}
			if err := fn(r.k, r.v); err != nil {
				return err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		cursor, inclusive = page[len(page)-1].k, false
	}
}

// Watch calls fn with the keys under prefix changed by this process's
// commits and, under Options.Announce, by other processes'; see
// store.Store.
func (s *Store) Watch(prefix []byte, fn func(key []byte)) (stop func()) {
	return s.watches.Watch(prefix, fn)
}

// Stats reports counters since Open; Syncs counts transactions.
func (s *Store) Stats() store.Stats {
	return store.Stats{Commits: s.commits.Load(), Syncs: s.txs.Load(), Ops: s.ops.Load(), BytesWritten: s.bytes.Load()}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close commits what is queued, stops the listener and closes the pool.
// Every later call returns store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.listenCancel()
	<-s.listenDone
	if s.claim != nil {
		s.claim.Release() // the session lock ends with the pool's connections
	}
	s.pool.Close()
	return nil
}
