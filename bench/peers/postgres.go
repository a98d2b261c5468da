package peers

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/busbar-io/busbar/benchcore"
)

// Postgres drives a queue table in PostgreSQL: producers INSERT (one
// statement per send, committed with synchronous_commit on), consumers
// DELETE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) … RETURNING in a
// transaction that commits after the messages were handed over, so a
// consumer that dies mid-batch leaves them for another (an ack after
// processing). Idle consumers poll every PollInterval; there is no
// LISTEN/NOTIFY.
type Postgres struct {
	// DSN is a pgx connection string.
	DSN string
	// Prefetch is the most rows a consumer takes per transaction.
	Prefetch int
	// Inflight sizes each producer's connection pool.
	Inflight int
	// PollInterval is how long an idle consumer waits before asking again.
	PollInterval time.Duration

	version string
	keyed   bool
}

// Info implements benchcore.Driver.
func (p *Postgres) Info() benchcore.Info {
	return benchcore.Info{Broker: "postgresql " + p.version, Client: "pgx v5.12.0",
		Durability: "fsync at commit (synchronous_commit on)",
		Ordering:   "a partition column, one consumer per partition reading in id order"}
}

// Prepare implements benchcore.Driver: it recreates the queue table.
func (p *Postgres) Prepare(ctx context.Context, w benchcore.Workload) error {
	p.keyed = w.Keyed()
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		return err
	}
	for _, q := range []string{
		"DROP TABLE IF EXISTS bench_queue",
		"CREATE TABLE bench_queue (id bigserial PRIMARY KEY, part int NOT NULL, body bytea NOT NULL)",
		"CREATE INDEX bench_queue_part_id ON bench_queue (part, id)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// Close implements benchcore.Driver.
func (p *Postgres) Close() error { return nil }

// NewProducer implements benchcore.Driver.
func (p *Postgres) NewProducer(ctx context.Context, _ int) (benchcore.Producer, error) {
	cfg, err := pgxpool.ParseConfig(p.DSN)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(max(1, p.Inflight))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &pgProducer{pool: pool}, nil
}

type pgProducer struct{ pool *pgxpool.Pool }

// Send implements benchcore.Producer: one INSERT (one commit) per call.
func (p *pgProducer) Send(ctx context.Context, msgs []benchcore.Outgoing) error {
	if len(msgs) == 1 {
		_, err := p.pool.Exec(ctx, "INSERT INTO bench_queue (part, body) VALUES ($1, $2)", msgs[0].Partition, msgs[0].Body)
		return err
	}
	parts := make([]int32, len(msgs))
	bodies := make([][]byte, len(msgs))
	for i, m := range msgs {
		parts[i], bodies[i] = int32(m.Partition), m.Body
	}
	// unnest keeps the arrays' order, and bigserial ids follow it.
	_, err := p.pool.Exec(ctx, "INSERT INTO bench_queue (part, body) SELECT * FROM unnest($1::int[], $2::bytea[])", parts, bodies)
	return err
}

func (p *pgProducer) Close() error { p.pool.Close(); return nil }

// NewConsumer implements benchcore.Driver. Unkeyed runs share partition 0.
func (p *Postgres) NewConsumer(ctx context.Context, index int) (benchcore.Consumer, error) {
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		return nil, err
	}
	return &pgConsumer{p: p, conn: conn, index: index}, nil
}

type pgConsumer struct {
	p     *Postgres
	conn  *pgx.Conn
	index int
}

const pgTake = `DELETE FROM bench_queue WHERE id IN (
  SELECT id FROM bench_queue WHERE part = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING id, body`

type pgRow struct {
	id   int64
	body []byte
}

// Run implements benchcore.Consumer.
func (c *pgConsumer) Run(ctx context.Context, deliver benchcore.DeliverFunc) error {
	part := 0 // unkeyed runs share partition 0
	if c.p.keyed {
		part = c.index
	}
	poll := c.p.PollInterval
	for ctx.Err() == nil {
		n, err := c.takeBatch(ctx, part, deliver)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(poll):
			}
		}
	}
	return nil
}

// takeBatch deletes up to Prefetch rows of part, delivers them in id order
// and commits.
func (c *pgConsumer) takeBatch(ctx context.Context, part int, deliver benchcore.DeliverFunc) (int, error) {
	tx, err := c.conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctx, pgTake, part, c.p.Prefetch)
	if err != nil {
		return 0, err
	}
	var got []pgRow
	for rows.Next() {
		var r pgRow
		if err := rows.Scan(&r.id, &r.body); err != nil {
			rows.Close()
			return 0, err
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	// RETURNING does not promise an order.
	slices.SortFunc(got, func(a, b pgRow) int { return cmp.Compare(a.id, b.id) })
	for _, r := range got {
		deliver(r.body)
	}
	return len(got), tx.Commit(ctx)
}

func (c *pgConsumer) Close() error { return c.conn.Close(context.Background()) }
