package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/benchcore"
)

func TestPairsTableAndMedians(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pairs"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(name string, rate, us float64) {
		r := benchcore.Result{Workload: benchcore.Workload{Name: "w4"}, MsgPerSec: rate, BrokerCPUPerMsg: us, Verdict: benchcore.Verdict{OK: true}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pairs", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Ratios: rate 2.0, 1.5, 3.0 (median 2.0); CPU 0.5, 0.6, 0.4 (median 0.5).
	put("1__busbar-raw.json", 100000, 12)
	put("1__postgres.json", 50000, 24)
	put("2__postgres.json", 60000, 20)
	put("2__busbar-raw.json", 90000, 12)
	put("3__busbar-raw.json", 120000, 10)
	put("3__postgres.json", 40000, 25)
	put("4__busbar-raw.json", 1, 1) // its partner's run failed: left out
	var out, errb bytes.Buffer
	if code := run([]string{"--results", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := out.String()
	for _, want := range []string{
		"#### W4 in alternation: busbar-raw and postgres, pair by pair",
		"| 1 | 100,000 | 12.0 | 50,000 | 24.0 | 2.00× | 0.50× |",
		"| 2 | 90,000 | 12.0 | 60,000 | 20.0 | 1.50× | 0.60× |",
		"| median of 3 pairs | | | | | 2.00× | 0.50× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 4 |") {
		t.Errorf("a pair with one run was reported:\n%s", got)
	}
}

func TestMedianIsAMeasuredValue(t *testing.T) {
	if m := median([]float64{4, 1, 3, 2}); m != 2 {
		t.Errorf("median of 1..4 = %v, want 2 (the lower middle)", m)
	}
	if m := median(nil); m != -1 {
		t.Errorf("median of nothing = %v, want -1", m)
	}
}
