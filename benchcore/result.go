package benchcore

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the outcome of one run.
type Result struct {
	Info
	Workload Workload `json:"workload"`
	Verdict  Verdict  `json:"verification"`
	// SendSeconds is how long sending took; Seconds runs from the first
	// send to the last first delivery.
	SendSeconds float64 `json:"send_seconds"`
	Seconds     float64 `json:"seconds"`
	// SendRate is acknowledged messages per second while sending;
	// MsgPerSec and MBPerSec count distinct deliveries over Seconds.
	SendRate  float64 `json:"send_msgs_per_sec"`
	MsgPerSec float64 `json:"msgs_per_sec"`
	MBPerSec  float64 `json:"mb_per_sec"`
	// Latency is send→receive latency of first deliveries, from the
	// intended send time.
	Latency Latency `json:"latency_ms"`
	// BrokerCores and HarnessCores are average cores used (CPU seconds /
	// wall seconds); BrokerCores is -1 when not measured.
	BrokerCores  float64 `json:"broker_cores"`
	HarnessCores float64 `json:"harness_cores"`
	// BrokerCPUPerMsg and HarnessCPUPerMsg are CPU microseconds (utime +
	// stime from /proc) per distinct message delivered, over the whole run
	// (sending, delivering and settling); BrokerCPUPerMsg is -1 when not
	// measured.
	BrokerCPUPerMsg  float64 `json:"broker_cpu_us_per_msg"`
	HarnessCPUPerMsg float64 `json:"harness_cpu_us_per_msg"`
	// Time is when the run ended.
	Time time.Time `json:"time"`
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func summarize(h *Histogram) Latency {
	return Latency{Count: h.Count(), Mean: ms(h.Mean()), P50: ms(h.Quantile(0.50)),
		P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

func (e *engine) result(h *Histogram, cpu CPUUsage) *Result {
	v := e.ver.Verdict()
	brokerCPU, harnessCPU := cpu.Cores()
	brokerUS, harnessUS := cpu.PerMessage(v.Received)
	sendEnd := time.Duration(e.sendEnd.Load())
	last := time.Duration(e.lastRecv.Load())
	r := &Result{Info: e.d.Info(), Workload: e.w, Verdict: v,
		SendSeconds: sendEnd.Seconds(), Seconds: last.Seconds(),
		Latency: summarize(h), BrokerCores: round2(brokerCPU), HarnessCores: round2(harnessCPU),
		BrokerCPUPerMsg: round2(brokerUS), HarnessCPUPerMsg: round2(harnessUS),
		Time: time.Now().UTC()}
	if r.SendSeconds > 0 {
		r.SendRate = math.Round(float64(v.Sent) / r.SendSeconds)
	}
	if r.Seconds > 0 {
		r.MsgPerSec = math.Round(float64(v.Received) / r.Seconds)
		r.MBPerSec = round2(float64(v.Received) * float64(e.w.Size) / r.Seconds / 1e6)
	}
	return r
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// WriteText writes r as a human-readable table.
func (r *Result) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("broker", r.Broker)
	row("client", r.Client)
	row("durability", r.Durability)
	row("workload", r.WorkloadLabel())
	row("verification", r.VerdictText())
	row("sent (acked)", fmt.Sprintf("%s in %.2fs (%s msg/s)", group(r.Verdict.Sent), r.SendSeconds, group(int64(r.SendRate))))
	row("received", fmt.Sprintf("%s in %.2fs", group(r.Verdict.Received), r.Seconds))
	row("throughput", fmt.Sprintf("%s msg/s, %.2f MB/s", group(int64(r.MsgPerSec)), r.MBPerSec))
	l := r.Latency
	row("latency ms", fmt.Sprintf("p50 %s  p99 %s  p99.9 %s  max %s  mean %s",
		fmtMS(l.P50), fmtMS(l.P99), fmtMS(l.P999), fmtMS(l.Max), fmtMS(l.Mean)))
	cpu := fmt.Sprintf("harness %.2f", r.HarnessCores)
	if r.BrokerCores >= 0 {
		cpu = fmt.Sprintf("broker %.2f, ", r.BrokerCores) + cpu
	}
	row("cpu cores", cpu)
	row("cpu µs/msg", fmt.Sprintf("broker %s, harness %s", fmtUS(r.BrokerCPUPerMsg), fmtUS(r.HarnessCPUPerMsg)))
	_ = tw.Flush()
}

// WorkloadLabel describes the workload in one line.
func (r *Result) WorkloadLabel() string {
	w := r.Workload
	var b strings.Builder
	if w.Name != "" {
		b.WriteString(w.Name + ": ")
	}
	fmt.Fprintf(&b, "%dP/%dC", w.Producers, w.Consumers)
	if w.Inflight > 1 {
		fmt.Fprintf(&b, " ×%d in flight", w.Inflight)
	}
	if w.Batch > 1 {
		fmt.Fprintf(&b, ", batch %d", w.Batch)
	}
	fmt.Fprintf(&b, ", %d B", w.Size)
	if w.Keyed() {
		fmt.Fprintf(&b, ", %s keys × %d", group(int64(w.Keys)), w.PerKey)
	} else if w.Count > 0 {
		fmt.Fprintf(&b, ", %s msgs", group(w.Count))
	}
	if w.Duration > 0 {
		fmt.Fprintf(&b, ", ≤%v", w.Duration)
	}
	if w.Rate > 0 {
		fmt.Fprintf(&b, ", fixed %s msg/s", group(int64(w.Rate)))
	} else {
		b.WriteString(", open throttle")
	}
	return b.String()
}

// VerdictText summarises the verification in one line.
func (r *Result) VerdictText() string {
	v := r.Verdict
	if v.OK {
		s := "OK: every acknowledged message delivered exactly once"
		if r.Workload.Keyed() {
			s += ", in order per key"
		}
		return s
	}
	parts := []string{"FAILED"}
	if v.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d missing (first id %d)", v.Missing, v.FirstMissing))
	}
	if v.Duplicates > 0 {
		parts = append(parts, fmt.Sprintf("%d duplicates", v.Duplicates))
	}
	if v.OutOfOrder > 0 {
		e := v.FirstOrderError
		parts = append(parts, fmt.Sprintf("%d out of order (first: key %d expected seq %d, got %d)", v.OutOfOrder, e.Key, e.Want, e.Got))
	}
	return strings.Join(parts, ", ")
}

// CellNames names the columns of Cells.
var CellNames = []string{"msg/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "broker cores", "harness cores", "broker µs/msg", "harness µs/msg", "verified"}

// Cells returns r's figures formatted for a table, in CellNames order.
func (r *Result) Cells() []string {
	l := r.Latency
	ok := "yes"
	if !r.Verdict.OK {
		ok = "**no**: " + r.VerdictText()
	}
	bc := "–"
	if r.BrokerCores >= 0 {
		bc = fmt.Sprintf("%.2f", r.BrokerCores)
	}
	return []string{group(int64(r.MsgPerSec)), fmt.Sprintf("%.2f", r.MBPerSec),
		fmtMS(l.P50), fmtMS(l.P99), fmtMS(l.P999), bc, fmt.Sprintf("%.2f", r.HarnessCores),
		fmtUS(r.BrokerCPUPerMsg), fmtUS(r.HarnessCPUPerMsg), ok}
}

// fmtUS prints CPU microseconds per message, "–" when not measured.
func fmtUS(v float64) string {
	if v < 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// fmtMS prints milliseconds with three significant-ish digits.
func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// group formats n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
