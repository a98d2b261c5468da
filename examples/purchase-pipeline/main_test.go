package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	busbarconfig "github.com/busbar-io/busbar/config"
)

// TestExample runs the example against a broker configured with the
// example's Config.json: Alice's order goes through, Bob's stops at the
// payment and is resubmitted once; the import sets aside every seventh row.
func TestExample(t *testing.T) {
	cfgFile, err := busbarconfig.Load("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := busbartest.Start(t, busbartest.WithConfig(cfgFile))
	out := &bytes.Buffer{} // run writes it through its console, one line at a time
	if err := run(context.Background(), config{connStr: srv.ConnectionString(), failPayment: true, rows: 15, wait: time.Minute}, out); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := out.String()
	for _, want := range []string{
		"3/5 payment of 28.20 on card 4111-xxxx: accepted",
		"5/5 e-mail with the receipt sent to alice@example.com",
		"3/5 payment of 49.90 on card 5500-xxxx: declined (attempt 1)",
		"3/5 payment of 49.90 on card 5500-xxxx: declined (attempt 2)",
		"task 2 payment  TaskFailed payment declined by the gateway",
		"task 3 receipt  JobFailed  task 2 of the job failed: payment declined by the gateway",
		"task 4 email    JobFailed",
		"~r1] 3/5 payment of 49.90 on card 5500-xxxx: accepted",
		"~r1] 5/5 e-mail with the receipt sent to bob@example.com",
		"already resubmitted",
		"imported 13 products; 2 rows set aside:",
		"task 6 import-product TaskFailed row 7: product SKU-0007 has no price",
		"task 13 import-product TaskFailed row 14: product SKU-0014 has no price",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Count(s, "bob@example.com") != 1 || strings.Count(s, "4/5 receipt") != 2 {
		t.Errorf("Bob's receipt or e-mail went out more than once, or before he paid")
	}
	if t.Failed() {
		t.Log(s)
	}
}
