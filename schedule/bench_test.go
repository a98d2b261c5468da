//go:build linux

package schedule_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/schedule"
)

// BenchmarkHost100k measures one scheduler host with many active
// schedules against a `busbar serve` child: the host's memory, the
// lateness of firings under a steady load, the latency of reprogramming a
// schedule under that load, and CPU per firing (host and broker). Each
// schedule fires once every ten minutes at its own second, so N schedules
// make N/600 firings a second. Run it with
//
//	go test -run '^$' -bench BenchmarkHost100k -benchtime 1x -timeout 2h ./schedule/
//
// BUSBAR_SCHEDULE_BENCH_N (default 100000) sets the number of schedules,
// BUSBAR_SCHEDULE_BENCH_WINDOW (default 3m) how long firings are measured.
func BenchmarkHost100k(b *testing.B) {
	n := envInt("BUSBAR_SCHEDULE_BENCH_N", 100_000)
	window := 3 * time.Minute
	if v := os.Getenv("BUSBAR_SCHEDULE_BENCH_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		runHostBench(b, n, window)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func runHostBench(b *testing.B, n int, window time.Duration) {
	dir := b.TempDir()
	bin := os.Getenv(envCrashBinary)
	if bin == "" {
		root, _ := filepath.Abs("..")
		bin = filepath.Join(dir, "busbar")
		if err := serveproc.Build(context.Background(), root, bin); err != nil {
			b.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(`{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
  {"Name": "schedules", "Properties": {"RequiresSession": true, "LockDuration": "PT30S", "MaxDeliveryCount": 100000}},
  {"Name": "jobs", "Properties": {"RequiresDuplicateDetection": true, "DuplicateDetectionHistoryTimeWindow": "PT10M", "DefaultMessageTimeToLive": "PT1M"}}
]}]}}`), 0o600); err != nil {
		b.Fatal(err)
	}
	brk, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"), Config: cfg, LogLimit: 64 << 10})
	if err != nil {
		b.Fatal(err)
	}
	defer brk.Close()
	brokerPid := findPid(bin)
	client := busbartest.NewClient(b, brk.ConnectionString())

	var (
		mu       sync.Mutex
		late     []time.Duration
		measure  atomic.Bool
		firedAll atomic.Int64
	)
	host, err := schedule.New(client, controlQueue, &schedule.Options{MaxConcurrentSessions: envInt("BUSBAR_SCHEDULE_BENCH_SESSIONS", 64),
		OnEvent: func(e schedule.Event) {
			if e.Kind != schedule.EventFired {
				return
			}
			firedAll.Add(1)
			if measure.Load() {
				mu.Lock()
				late = append(late, e.Lateness)
				mu.Unlock()
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer host.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = host.Run(ctx) }()

	// Create the schedules: the admin operations in parallel, as many
	// programs starting at once would.
	admin, _ := schedule.New(client, controlQueue, nil)
	defer admin.Close(context.Background())
	def := func(i, shift int) schedule.Definition {
		slot := (i + shift) % 600
		return schedule.Definition{Name: fmt.Sprintf("bench-%06d", i), Target: jobsQueue,
			Spec: schedule.Spec{Cron: fmt.Sprintf("%d %d/10 * * * *", slot%60, slot/60)}}
	}
	created := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, _, err := admin.Put(ctx, def(i, 0)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	createTook := time.Since(created)

	// Steady state: measure firings for the window, reprogramming 200
	// schedules along the way.
	var cpu0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu0)
	brokerCPU0 := procCPU(brokerPid)
	fired0 := firedAll.Load()
	measure.Store(true)
	start := time.Now()
	var reprogram []time.Duration
	for i := 0; i < 200 && time.Since(start) < window; i++ {
		t0 := time.Now()
		if _, _, err := admin.Put(ctx, def((i*7919)%n, 1+i%599)); err != nil {
			b.Fatal(err)
		}
		reprogram = append(reprogram, time.Since(t0))
	}
	time.Sleep(time.Until(start.Add(window))) // the measured window is real time: firings happen on the broker's clock
	measure.Store(false)
	elapsed := time.Since(start)
	fired := firedAll.Load() - fired0
	var cpu1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &cpu1)
	hostCPU := time.Duration(cpu1.Utime.Nano() + cpu1.Stime.Nano() - cpu0.Utime.Nano() - cpu0.Stime.Nano())
	brokerCPU := procCPU(brokerPid) - brokerCPU0
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	mu.Lock()
	slices.Sort(late)
	l := slices.Clone(late)
	mu.Unlock()
	slices.Sort(reprogram)
	pct := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	b.ReportMetric(float64(n), "schedules")
	b.ReportMetric(float64(n)/createTook.Seconds(), "creates/s")
	b.ReportMetric(float64(fired)/elapsed.Seconds(), "firings/s")
	b.ReportMetric(float64(pct(l, 0.5).Milliseconds()), "late-p50-ms")
	b.ReportMetric(float64(pct(l, 0.99).Milliseconds()), "late-p99-ms")
	b.ReportMetric(float64(pct(reprogram, 0.5).Microseconds())/1000, "reprogram-p50-ms")
	b.ReportMetric(float64(pct(reprogram, 0.99).Microseconds())/1000, "reprogram-p99-ms")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "host-heap-MB")
	b.ReportMetric(float64(rssKB("self"))/1024, "host-rss-MB")
	b.ReportMetric(float64(rssKB(strconv.Itoa(brokerPid)))/1024, "broker-rss-MB")
	if fired > 0 {
		b.ReportMetric(float64(hostCPU.Microseconds())/float64(fired), "host-cpu-us/firing")
		b.ReportMetric(float64(brokerCPU.Microseconds())/float64(fired), "broker-cpu-us/firing")
	}
	b.Logf("%d schedules created in %v; %d firings in %v (want %.0f); lateness p50 %v p99 %v max %v; reprogramming p50 %v p99 %v",
		n, createTook.Round(time.Second), fired, elapsed.Round(time.Second), float64(n)/600*elapsed.Seconds(),
		pct(l, 0.5), pct(l, 0.99), pct(l, 1), pct(reprogram, 0.5), pct(reprogram, 0.99))
}

// findPid returns the pid of the process running bin, or 0.
func findPid(bin string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.HasPrefix(string(cmd), bin+"\x00serve") {
			return pid
		}
	}
	return 0
}

// procCPU returns the user+system CPU time of pid.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // clock ticks (USER_HZ = 100)
}

// rssKB returns VmRSS of /proc/<pid>/status in kB.
func rssKB(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
