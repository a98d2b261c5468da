package benchcore

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

// CPUSample measures the CPU time of a set of processes (and their
// descendants) and of this process between StartCPU and Stop.
type CPUSample struct {
	pids          []int
	start         time.Time
	broker0, self float64
}

// StartCPU begins a measurement; pids may be empty.
func StartCPU(pids []int) *CPUSample {
	return &CPUSample{pids: pids, start: time.Now(), broker0: treeCPU(pids), self: procCPU("self")}
}

// CPUUsage is what a CPUSample measured: CPU seconds (utime + stime) of
// the broker processes and of this process, and the wall time between.
type CPUUsage struct {
	// Broker is -1 when no pids were given or /proc is unreadable.
	Broker, Harness float64
	Wall            float64
}

// Stop returns the average number of cores used by the broker processes and
// by this process since StartCPU (CPU seconds / wall seconds). The broker's
// figure is -1 when no pids were given or /proc is unreadable.
func (c *CPUSample) Stop() (broker, harness float64) {
	u := c.Usage()
	return u.Cores()
}

// Usage returns the CPU seconds used since StartCPU.
func (c *CPUSample) Usage() CPUUsage {
	u := CPUUsage{Broker: -1, Harness: procCPU("self") - c.self, Wall: time.Since(c.start).Seconds()}
	if len(c.pids) > 0 {
		if b := treeCPU(c.pids); b >= 0 && c.broker0 >= 0 {
			u.Broker = b - c.broker0
		}
	}
	return u
}

// Cores returns the average cores used (CPU seconds / wall seconds); the
// broker's is -1 when it was not measured.
func (u CPUUsage) Cores() (broker, harness float64) {
	if u.Wall <= 0 {
		return -1, 0
	}
	broker = -1
	if u.Broker >= 0 {
		broker = u.Broker / u.Wall
	}
	return broker, u.Harness / u.Wall
}

// PerMessage returns the CPU microseconds per message of the broker and of
// this process for n messages; the broker's is -1 when not measured, both
// are -1 when n is 0.
func (u CPUUsage) PerMessage(n int64) (broker, harness float64) {
	if n <= 0 {
		return -1, -1
	}
	broker = -1
	if u.Broker >= 0 {
		broker = u.Broker * 1e6 / float64(n)
	}
	return broker, u.Harness * 1e6 / float64(n)
}

// procCPU returns the user+system CPU seconds of /proc/<pid>, including
// children it has waited for, or -1.
func procCPU(pid string) float64 {
	f, _, ok := statFields(pid)
	if !ok {
		return -1
	}
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / clockTicks
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (field 3, the state, is index 0) and the parent pid.
func statFields(pid string) ([]string, int, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, 0, false
	}
	return parseStat(string(b))
}

// parseStat splits a /proc/<pid>/stat line. The command name is in
// parentheses and may itself contain spaces and parentheses, so fields are
// taken after the last ')'.
func parseStat(s string) ([]string, int, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return f, ppid, true
}

// treeCPU sums procCPU over pids and all their live descendants, or -1 if
// none of pids exists.
func treeCPU(pids []int) float64 {
	if len(pids) == 0 {
		return -1
	}
	in := map[int]bool{}
	for _, p := range pids {
		in[p] = true
	}
	// Parent links of every process, to find descendants.
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if _, ppid, ok := statFields(e.Name()); ok {
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	total, found := 0.0, false
	seen := map[int]bool{}
	queue := append([]int(nil), pids...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if v := procCPU(strconv.Itoa(p)); v >= 0 {
			total += v
			found = true
		}
		queue = append(queue, children[p]...)
	}
	if !found {
		return -1
	}
	return total
}

// Idle thresholds of WaitIdle: at most idleBusy CPU seconds over each
// idleWindow of wall time (2% of a core).
const (
	idleWindow = 500 * time.Millisecond
	idleBusy   = 0.01
)

// WaitIdle waits until the processes pids and their descendants use at
// most 2% of a core over half a second, so that a broker's background work
// after one run (an LSM store's flushes and compactions, PostgreSQL's
// autovacuum and checkpoints) is not charged to the next run, of either
// broker. It reports false when they are still busy after limit, or ctx
// is done first; true at once when none of pids exists.
func WaitIdle(ctx context.Context, pids []int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(idleWindow)
	defer t.Stop()
	before := treeCPU(pids)
	for {
		if before < 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		now := treeCPU(pids)
		// A total that fell lost a process (and its ticks) meanwhile:
		// not a measurement of the window.
		if d := now - before; now >= 0 && d >= 0 && d <= idleBusy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		before = now
	}
}
