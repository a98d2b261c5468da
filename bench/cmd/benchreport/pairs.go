package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/busbar-io/busbar/benchcore"
)

// A pair is two runs of one workload, on two brokers, seconds apart (who
// goes first alternating): bench/run.sh writes them to <results>/pairs as
// <n>__<series>.json. Brokers run in their own sections minutes apart, and
// the machine's speed drifts between them; the ratios of a pair's two runs
// do not see that drift.
type pair struct {
	n    int
	a, b *benchcore.Result
}

// loadPairs reads the pairs of dir/pairs: the two series found there, in
// seriesOrder (ours first), and every pair that has both. No directory:
// no pairs.
func loadPairs(dir string) (sa, sb string, ps []pair, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "pairs", "*__*.json"))
	if err != nil || len(files) == 0 {
		return "", "", nil, err
	}
	byN := map[int]map[string]*benchcore.Result{}
	var series []string
	for _, f := range files {
		num, s, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".json"), "__")
		n, err := strconv.Atoi(num)
		if err != nil {
			return "", "", nil, fmt.Errorf("%s: not <pair number>__<series>.json", f)
		}
		r, err := readResult(f)
		if err != nil {
			return "", "", nil, err
		}
		if byN[n] == nil {
			byN[n] = map[string]*benchcore.Result{}
		}
		byN[n][s] = r
		if !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	if len(series) != 2 {
		return "", "", nil, fmt.Errorf("%s: pairs of %d series (%s), want 2", filepath.Join(dir, "pairs"), len(series), strings.Join(series, ", "))
	}
	slices.SortStableFunc(series, func(a, b string) int { return rank(seriesOrder, a) - rank(seriesOrder, b) })
	sa, sb = series[0], series[1]
	for n, rs := range byN {
		if rs[sa] != nil && rs[sb] != nil {
			ps = append(ps, pair{n: n, a: rs[sa], b: rs[sb]})
		}
	}
	slices.SortFunc(ps, func(x, y pair) int { return x.n - y.n })
	return sa, sb, ps, nil
}

// writePairs prints the pairs' table and the medians of their ratios.
func writePairs(w io.Writer, sa, sb string, ps []pair) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### %s in alternation: %s and %s, pair by pair\n\n", strings.ToUpper(ps[0].a.Workload.Name), sa, sb)
	fmt.Fprintf(w, "| pair | %s msg/s | µs/msg | %s msg/s | µs/msg | msg/s ratio | CPU ratio |\n", sa, sb)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	var rates, cpus []float64
	for _, p := range ps {
		rate := p.a.MsgPerSec / p.b.MsgPerSec
		cpu := -1.0
		if p.a.BrokerCPUPerMsg > 0 && p.b.BrokerCPUPerMsg > 0 {
			cpu = p.a.BrokerCPUPerMsg / p.b.BrokerCPUPerMsg
			cpus = append(cpus, cpu)
		}
		rates = append(rates, rate)
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", p.n, msgPerSec(p.a), brokerUS(p.a), msgPerSec(p.b), brokerUS(p.b), ratio(rate), ratio(cpu))
	}
	fmt.Fprintf(w, "| median of %d pairs | | | | | %s | %s |\n", len(ps), ratio(median(rates)), ratio(median(cpus)))
}

// median returns the middle value (the lower middle one of an even count),
// or -1 for none: a value that was measured, not an average of two.
func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func ratio(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}
