package pipelinepg_test

import (
	"context"
	"testing"

	"github.com/busbar-io/busbar/internal/pgtest"
	"github.com/busbar-io/busbar/pipeline"
	"github.com/busbar-io/busbar/pipeline/pipelinepg"
	"github.com/busbar-io/busbar/pipeline/pipelinetest"
)

// newStore connects to the test PostgreSQL and returns a Store on a fresh
// table, dropped when the test ends.
func newStore(t *testing.T) *pipelinepg.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	st := pipelinepg.New(pool, pgtest.Table(t, pool, "failed_tasks_test_"))
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSuite runs the shared store suite on PostgreSQL.
func TestSuite(t *testing.T) {
	pipelinetest.Run(t, func(t *testing.T) pipeline.Store { return newStore(t) })
}
