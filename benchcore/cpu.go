package benchcore

import (
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

// Stop returns the average number of cores used by the broker processes and
// by this process since StartCPU (CPU seconds / wall seconds). The broker's
// figure is -1 when no pids were given or /proc is unreadable.
func (c *CPUSample) Stop() (broker, harness float64) {
	wall := time.Since(c.start).Seconds()
	if wall <= 0 {
		return -1, 0
	}
	harness = (procCPU("self") - c.self) / wall
	broker = -1
	if len(c.pids) > 0 {
		if b := treeCPU(c.pids); b >= 0 && c.broker0 >= 0 {
			broker = (b - c.broker0) / wall
		}
	}
	return broker, harness
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
