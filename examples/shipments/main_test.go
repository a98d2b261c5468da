package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	busbarconfig "github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/internal/pgtest"
)

// TestExample runs the example on two brokers configured with the
// example's Config.json and the test PostgreSQL: every status of every
// parcel is recorded once and in order although the east consumer stops
// part-way, and the west records the rest.
func TestExample(t *testing.T) {
	for _, g := range []geo.Granularity{geo.PerSession, geo.PerMessage} {
		t.Run(g.String(), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			cfgFile, err := busbarconfig.Load("Config.json")
			if err != nil {
				t.Fatal(err)
			}
			east := busbartest.Start(t, busbartest.WithConfig(cfgFile))
			west := busbartest.Start(t, busbartest.WithConfig(cfgFile))
			pool := pgtest.Pool(t)
			table := pgtest.Table(t, pool, "shipments_journal_")
			pgtest.Table(t, pool, table+"_statuses")
			out := &bytes.Buffer{}
			err = run(context.Background(), config{east: east.ConnectionString(), west: west.ConnectionString(), journal: dsn,
				parcels: 3, delay: 500 * time.Millisecond, eastFailsAfter: 8, granularity: g, wait: time.Minute, table: table}, out)
			s := out.String()
			if err != nil {
				t.Fatalf("%v\n%s", err, s)
			}
			for _, want := range []string{"-- the east region is lost", "every status recorded once, in order", "] 1Z"} {
				if !strings.Contains(s, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if !strings.Contains(s, "[west]") {
				t.Errorf("the west recorded nothing after the east was lost")
			}
			t.Log(s)
		})
	}
}
