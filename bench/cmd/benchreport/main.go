// Command benchreport turns the JSON results of a benchmark run (one file
// per broker and workload, named <series>__<workload>.json, as bench/run.sh
// writes them, and the pairs of runs in alternation under pairs/) into
// markdown tables ready to paste into docs/benchmarks.md and PNG charts of
// throughput and latency.
//
//	benchreport --results bench/results --charts docs/benchmarks
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/busbar-io/busbar/benchcore"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// entry is one result with the names run.sh gave it.
type entry struct {
	Series, Workload string
	R                benchcore.Result
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	results := fs.String("results", "bench/results", "directory of <series>__<workload>.json files")
	charts := fs.String("charts", "", "directory to write throughput.png and latency.png to (none if empty)")
	note := fs.String("note", "", "a second line under each chart's title, e.g. the machine and date")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	es, err := load(*results)
	if err != nil {
		fmt.Fprintln(stderr, "benchreport:", err)
		return 1
	}
	sa, sb, ps, err := loadPairs(*results)
	if err != nil {
		fmt.Fprintln(stderr, "benchreport:", err)
		return 1
	}
	if len(es) == 0 && len(ps) == 0 {
		fmt.Fprintf(stderr, "benchreport: no results in %s\n", *results)
		return 1
	}
	writeSummary(stdout, es)
	writeTables(stdout, es)
	writePairs(stdout, sa, sb, ps)
	if *charts != "" {
		if err := os.MkdirAll(*charts, 0o755); err != nil {
			fmt.Fprintln(stderr, "benchreport:", err)
			return 1
		}
		for name, c := range map[string]*chart{
			"throughput.png": throughputChart(es),
			"latency.png":    latencyChart(es),
		} {
			if c == nil {
				continue
			}
			c.note = *note
			p := filepath.Join(*charts, name)
			if err := c.writePNG(p); err != nil {
				fmt.Fprintln(stderr, "benchreport:", err)
				return 1
			}
			fmt.Fprintln(stderr, "wrote", p)
		}
	}
	return 0
}

// load reads every result file of dir, in a stable order: workloads in
// the order of workloadOrder, then series in seriesOrder.
func load(dir string) ([]entry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*__*.json"))
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		series, workload, _ := strings.Cut(base, "__")
		r, err := readResult(f)
		if err != nil {
			return nil, err
		}
		es = append(es, entry{Series: series, Workload: workload, R: *r})
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		if c := rank(workloadOrder, a.Workload) - rank(workloadOrder, b.Workload); c != 0 {
			return c
		}
		if c := rank(seriesOrder, a.Series) - rank(seriesOrder, b.Series); c != 0 {
			return c
		}
		return strings.Compare(a.Series, b.Series)
	})
	return es, nil
}

// readResult reads one run's JSON result.
func readResult(path string) (*benchcore.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := new(benchcore.Result)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// The order run.sh uses; names not listed sort after these.
var (
	workloadOrder = []string{"w2", "w4", "lat5k", "1p1c", "4p4c", "keyed", "rate1000", "rate5000"}
	seriesOrder   = []string{"busbar-raw", "busbar-sdk", "busbar-amqp", "rabbitmq", "nats", "nats-sync-always", "postgres"}
)

func rank(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// workloadTitle describes a workload name for headings.
var workloadTitle = map[string]string{
	"w2":       "W2: 4 producers / 4 consumers, open throttle",
	"w4":       "W4: sessions × 10 messages, 4 consumers (per-session FIFO verified)",
	"lat5k":    "latency: fixed 5,000 msg/s, 1 producer / 1 consumer (latency from the intended send time)",
	"1p1c":     "1 producer / 1 consumer, open throttle",
	"4p4c":     "4 producers / 4 consumers, open throttle",
	"keyed":    "ordered keys × 10 messages, 4 producers / 4 consumers (per-key FIFO verified)",
	"rate1000": "fixed 1,000 msg/s (latency from the intended send time)",
	"rate5000": "fixed 5,000 msg/s (latency from the intended send time)",
}

func title(w string) string {
	if t, ok := workloadTitle[w]; ok {
		return t
	}
	return w
}

// writeTables prints one markdown table per workload.
func writeTables(w io.Writer, es []entry) {
	cols := append([]string{"series", "broker", "client", "durability"}, benchcore.CellNames...)
	header := "| " + strings.Join(cols, " | ") + " |\n|---|---|---|---|" + strings.Repeat("---:|", len(cols)-5) + "---|\n"
	last := ""
	for _, e := range es {
		if e.Workload != last {
			if last != "" {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "#### %s\n\n`%s`\n\n%s", title(e.Workload), e.R.WorkloadLabel(), header)
			last = e.Workload
		}
		cells := append([]string{e.Series, e.R.Broker, e.R.Client, e.R.Durability}, e.R.Cells()...)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// summaryRows are the lines of the side-by-side table: a workload, a
// label and the figure of a result.
type summaryRow struct {
	workload, label string
	value           func(*benchcore.Result) string
}

var summaryRows = []summaryRow{
	{"w2", "W2 msg/s", msgPerSec},
	{"w2", "W2 broker CPU µs/msg", brokerUS},
	{"w2", "W2 harness CPU µs/msg", harnessUS},
	{"w4", "W4 msg/s", msgPerSec},
	{"w4", "W4 broker CPU µs/msg", brokerUS},
	{"w4", "W4 harness CPU µs/msg", harnessUS},
	{"lat5k", "p99 ms at 5,000 msg/s", func(r *benchcore.Result) string { return cell(r, r.Cells()[3]) }},
	{"lat5k", "broker CPU µs/msg at 5,000 msg/s", brokerUS},
}

func cell(r *benchcore.Result, v string) string {
	if !r.Verdict.OK {
		return v + " (**failed verification**)"
	}
	return v
}

func msgPerSec(r *benchcore.Result) string { return cell(r, r.Cells()[0]) }
func brokerUS(r *benchcore.Result) string  { return r.Cells()[7] }
func harnessUS(r *benchcore.Result) string { return r.Cells()[8] }

// writeSummary prints the workloads side by side: one column per
// series, msg/s and CPU per message (broker and load generator) for W2 and
// W4, p99 for the latency workload. It prints nothing when the results
// hold none of those workloads.
func writeSummary(w io.Writer, es []entry) {
	var series []string
	at := map[string]*benchcore.Result{}
	for i := range es {
		e := &es[i]
		if !slices.ContainsFunc(summaryRows, func(r summaryRow) bool { return r.workload == e.Workload }) {
			continue
		}
		if !slices.Contains(series, e.Series) {
			series = append(series, e.Series)
		}
		at[e.Series+"/"+e.Workload] = &e.R
	}
	if len(series) == 0 {
		return
	}
	slices.SortStableFunc(series, func(a, b string) int { return rank(seriesOrder, a) - rank(seriesOrder, b) })
	fmt.Fprintf(w, "#### Side by side\n\n| | %s |\n|---|%s\n", strings.Join(series, " | "), strings.Repeat("---:|", len(series)))
	for _, row := range summaryRows {
		cells := make([]string, len(series))
		found := false
		for i, s := range series {
			cells[i] = "–"
			if r := at[s+"/"+row.workload]; r != nil {
				cells[i] = row.value(r)
				found = true
			}
		}
		if found {
			fmt.Fprintf(w, "| %s | %s |\n", row.label, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(w)
}
