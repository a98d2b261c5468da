//go:build linux

package schedule_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/schedule"
)

// envCrashBinary names a prebuilt busbar binary for TestCrashHosts;
// unset, ./cmd/busbar is built.
const envCrashBinary = "BUSBAR_CRASHTEST_BINARY"

const crashConfig = `{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
  {"Name": "schedules", "Properties": {"RequiresSession": true, "LockDuration": "PT5S", "MaxDeliveryCount": 100000}},
  {"Name": "jobs", "Properties": {"RequiresDuplicateDetection": true, "DuplicateDetectionHistoryTimeWindow": "PT1H"}}
]}]}}`

// TestCrashHosts runs `busbar schedule run` hosts against a real `busbar
// serve`, kills them with SIGKILL again and again (always keeping at most
// two running, sometimes none), and proves that every nominal firing of
// every schedule reached the target exactly once: no gap, no repeat.
// BUSBAR_LONG=1 runs the long campaign.
func TestCrashHosts(t *testing.T) {
	kills, schedules := 6, 4
	if os.Getenv("BUSBAR_LONG") != "" {
		kills, schedules = 150, 8
	}
	dir := t.TempDir()
	bin := os.Getenv(envCrashBinary)
	if bin == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "busbar")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := serveproc.Build(ctx, root, bin); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "Config.json")
	if err := os.WriteFile(cfg, []byte(crashConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	broker, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"), Config: cfg, LogLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	client := busbartest.NewClient(t, broker.ConnectionString())

	got := &inbox{byID: map[string]int{}}
	got.collect(t, client, jobsQueue)
	admin, err := schedule.New(client, controlQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second).Round(0)
	for i := range schedules {
		d := schedule.Definition{Name: fmt.Sprintf("crash-%d", i), Spec: schedule.Spec{Every: schedule.Duration(time.Second), Start: start},
			Target: jobsQueue, Misfire: schedule.MisfireAll, MisfireLimit: 100000}
		if _, _, err := admin.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}

	hosts := &hostSet{t: t, bin: bin, connStr: broker.ConnectionString()}
	defer hosts.stopAll()
	hosts.start()
	hosts.start()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for k := 0; k < kills; k++ {
		// Kill after a random amount of progress, not after a fixed time.
		target := got.count() + 1 + rng.IntN(3*schedules)
		poll.Until(t, 2*time.Minute, "firings between kills", func() bool { return got.count() >= target })
		hosts.killOne(rng)
		if k%3 == 2 {
			hosts.killOne(rng) // now and then no host runs at all
		}
		for hosts.len() < 2 {
			hosts.start()
		}
	}
	target := got.count() + 2*schedules
	poll.Until(t, 2*time.Minute, "firings after the last kill", func() bool { return got.count() >= target })
	hosts.stopAll()

	total := 0
	for i := range schedules {
		name := fmt.Sprintf("crash-%d", i)
		if err := admin.Pause(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		info, err := admin.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		// Every firing up to the last one recorded must arrive; one more may
		// have been sent by a host killed before it recorded it.
		last := int(info.LastFired.Sub(start) / time.Second)
		poll.Until(t, 30*time.Second, name+"'s firings", func() bool { return len(got.firings(name)) >= last+1 })
		seen := map[int64]int{} // by Unix second
		for _, f := range got.firings(name) {
			seen[f.Nominal.Unix()]++
		}
		for k := 0; k <= last; k++ {
			at := start.Add(time.Duration(k) * time.Second)
			if seen[at.Unix()] != 1 {
				t.Errorf("%s: the firing at %s arrived %d times", name, at.UTC().Format(time.RFC3339), seen[at.Unix()])
			}
			delete(seen, at.Unix())
		}
		for at, n := range seen {
			if at != start.Add(time.Duration(last+1)*time.Second).Unix() || n != 1 {
				t.Errorf("%s: unexpected firing at %s (%d times); last recorded %s", name, time.Unix(at, 0).UTC().Format(time.RFC3339), n, info.LastFired.UTC().Format(time.RFC3339))
			}
		}
		total += last + 1
	}
	for id, n := range got.byID {
		if n != 1 {
			t.Errorf("message %s received %d times", id, n)
		}
	}
	// Evidence that kills hit hosts in the middle of a firing: firings sent
	// twice (the target's duplicate detection dropped the second).
	t.Logf("%d hosts killed; %d firings of %d schedules, each received exactly once; %d of them sent twice by hosts killed half-way",
		hosts.killed, total, schedules, hosts.resent())
}

// hostSet runs `busbar schedule run` processes.
type hostSet struct {
	t       *testing.T
	bin     string
	connStr string
	mu      sync.Mutex
	procs   []*hostProc
	ended   []*hostProc
	killed  int
}

type hostProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

func (h *hostSet) start() {
	h.t.Helper()
	p := &hostProc{done: make(chan struct{})}
	p.cmd = exec.Command(h.bin, "schedule", "run", "--queue", controlQueue, "--concurrency", "4", "--verbose", "--connection-string", h.connStr)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
}

func (h *hostSet) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.procs)
}

func (h *hostSet) killOne(rng *rand.Rand) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.procs) == 0 {
		return
	}
	i := rng.IntN(len(h.procs))
	p := h.procs[i]
	h.procs = append(h.procs[:i], h.procs[i+1:]...)
	_ = p.cmd.Process.Kill()
	<-p.done
	h.killed++
	h.ended = append(h.ended, p)
}

// stopAll stops the hosts gracefully (SIGTERM) and waits for them.
func (h *hostSet) stopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			h.t.Errorf("a host did not stop on SIGTERM:\n%s", p.out.String())
		}
	}
	h.ended = append(h.ended, h.procs...)
	h.procs = nil
}

// resent counts the firings the hosts sent more than once (a host died
// after sending one and before recording it; another sent it again), from
// their debug logs.
func (h *hostSet) resent() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	sends := map[string]int{}
	for _, p := range h.ended {
		for _, line := range strings.Split(p.out.String(), "\n") {
			if !strings.Contains(line, "sending a firing") {
				continue
			}
			_, rest, _ := strings.Cut(line, "schedule=")
			sched, rest, _ := strings.Cut(rest, " ")
			_, rest, _ = strings.Cut(rest, "nominal=")
			nominal, _, _ := strings.Cut(rest, " ")
			sends[sched+"@"+nominal]++
		}
	}
	n := 0
	for _, c := range sends {
		if c > 1 {
			n++
		}
	}
	return n
}
