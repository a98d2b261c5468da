package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/busbar-io/busbar/benchcore"
)

func TestNiceLinearAxis(t *testing.T) {
	a := niceAxis(3, 8700, false)
	// 8700/5 = 1740 → step 2000 (1, 2, 2.5, 5, 10 × 1000), top 10000.
	if a.lo != 0 || a.hi != 10000 || !reflect.DeepEqual(a.ticks, []float64{0, 2000, 4000, 6000, 8000, 10000}) {
		t.Fatalf("axis = %+v", a)
	}
	if f := a.frac(2500); f != 0.25 {
		t.Fatalf("frac(2500) = %v, want 0.25", f)
	}
	if f := a.frac(-5); f != 0 {
		t.Fatalf("frac(-5) = %v, want 0 (clamped)", f)
	}
}

func TestNiceLogAxis(t *testing.T) {
	a := niceAxis(0.35, 1234, true)
	if a.lo != 0.1 || a.hi != 10000 || len(a.ticks) != 6 {
		t.Fatalf("axis = %+v, want decades 0.1 … 10000", a)
	}
	if f := a.frac(10); math.Abs(f-0.4) > 1e-12 {
		t.Fatalf("frac(10) = %v, want 0.4 (2 of 5 decades)", f)
	}
}

func TestTickLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.1: "0.1", 2000: "2000", 10000: "10k", 250000: "250k"} {
		if got := tickLabel(v); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestShort(t *testing.T) {
	for v, want := range map[float64]string{1234567: "1.23M", 45678: "45.7k", 1234: "1234", 12.34: "12.3", 0.256: "0.26"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
}

func result(msgs, p50, p99, p999 float64) benchcore.Result {
	return benchcore.Result{Info: benchcore.Info{Broker: "b", Client: "c", Durability: "d"},
		Workload: benchcore.Workload{Producers: 1, Consumers: 1, Size: 1024, Count: 10},
		Verdict:  benchcore.Verdict{OK: true}, MsgPerSec: msgs,
		Latency: benchcore.Latency{P50: p50, P99: p99, P999: p999}}
}

func writeResults(t *testing.T, dir string, rs map[string]benchcore.Result) {
	for name, r := range rs {
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReportFromResults(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir, map[string]benchcore.Result{
		"rabbitmq__4p4c":       result(2000, 1, 2, 3),
		"busbar-sdk__4p4c":     result(8000, 1, 2, 3),
		"busbar-sdk__1p1c":     result(1300, 1, 2, 3),
		"postgres__rate1000":   result(1000, 4, 200, 500),
		"busbar-sdk__rate1000": result(1000, 1.5, 7, 15),
	})
	es, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range es {
		order = append(order, e.Series+"/"+e.Workload)
	}
	want := []string{"busbar-sdk/1p1c", "busbar-sdk/4p4c", "rabbitmq/4p4c", "busbar-sdk/rate1000", "postgres/rate1000"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}

	tp := throughputChart(es)
	if !reflect.DeepEqual(tp.groups, []string{"1p1c", "4p4c"}) || !reflect.DeepEqual(tp.series, []string{"busbar-sdk", "rabbitmq"}) {
		t.Fatalf("throughput chart groups %v series %v", tp.groups, tp.series)
	}
	if tp.values[1][0] != 8000 || tp.values[1][1] != 2000 || !math.IsNaN(tp.values[0][1]) {
		t.Fatalf("throughput values %v, want rabbitmq missing from 1p1c", tp.values)
	}
	lat := latencyChart(es)
	if !reflect.DeepEqual(lat.groups, []string{"rate1000 p50", "rate1000 p99", "rate1000 p99.9"}) || lat.values[1][1] != 200 {
		t.Fatalf("latency chart groups %v values %v", lat.groups, lat.values)
	}

	var out bytes.Buffer
	if code := run([]string{"--results", dir, "--charts", dir}, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("run exit %d", code)
	}
	md := out.String()
	if strings.Count(md, "#### ") != 3 || !strings.Contains(md, "| busbar-sdk | b | c | ") {
		t.Fatalf("markdown:\n%s", md)
	}
	for _, name := range []string{"throughput.png", "latency.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() != chartW || img.Bounds().Dy() != chartH {
			t.Fatalf("%s: %v, bounds %v", name, err, img.Bounds())
		}
	}
}

// TestSummarySideBySide checks the side-by-side table of the issue's
// workloads: one column per series in the fixed order, CPU per message
// next to msg/s, a dash where a series did not run a workload.
func TestSummarySideBySide(t *testing.T) {
	r := func(msgs, broker, harness float64) benchcore.Result {
		x := result(msgs, 1, 2, 3)
		x.BrokerCPUPerMsg, x.HarnessCPUPerMsg = broker, harness
		return x
	}
	es := []entry{
		{"postgres", "w2", r(50000, 23, 9.5)},
		{"busbar-raw", "w2", r(60000, 20.25, 5)},
		{"busbar-sdk", "lat5k", r(5000, 30, 40)},
		{"rabbitmq", "1p1c", r(100, 1, 1)}, // not a summary workload
	}
	var out bytes.Buffer
	writeSummary(&out, es)
	want := "#### Side by side\n\n| | busbar-raw | busbar-sdk | postgres |\n|---|---:|---:|---:|\n" +
		"| W2 msg/s | 60,000 | – | 50,000 |\n" +
		"| W2 broker CPU µs/msg | 20.2 | – | 23.0 |\n" +
		"| W2 harness CPU µs/msg | 5.0 | – | 9.5 |\n" +
		"| p99 ms at 5,000 msg/s | – | 2.00 | – |\n" +
		"| broker CPU µs/msg at 5,000 msg/s | – | 30.0 | – |\n\n"
	if out.String() != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	writeSummary(&out, es[3:])
	if out.Len() != 0 {
		t.Fatalf("no summary workloads: printed %q", out.String())
	}
}
