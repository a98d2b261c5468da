package benchcore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStatWithAwkwardCommandName(t *testing.T) {
	line := "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 2 20 0 4 0 123 456 789\n"
	f, ppid, ok := parseStat(line)
	if !ok || ppid != 17 {
		t.Fatalf("parseStat: ok=%v ppid=%d, want true 17", ok, ppid)
	}
	if f[11] != "250" || f[12] != "75" || f[13] != "3" || f[14] != "2" {
		t.Fatalf("utime..cstime = %v, want 250 75 3 2", f[11:15])
	}
	if _, _, ok := parseStat("garbage"); ok {
		t.Fatal("a line without a command name must not parse")
	}
}

func TestCPUSampleSeesOwnWork(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	c := StartCPU([]int{os.Getpid()})
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	broker, harness := c.Stop()
	// Spinning for 0.3 s uses some CPU; on a busy 2-core box not necessarily a whole core.
	if harness <= 0 || broker <= 0 {
		t.Fatalf("cores: broker %v harness %v after spinning (%d loops), want both > 0", broker, harness, x)
	}
	if b, _ := StartCPU(nil).Stop(); b != -1 {
		t.Fatalf("no broker pids: broker cores = %v, want -1", b)
	}
}

func TestCPUUsagePerMessage(t *testing.T) {
	u := CPUUsage{Broker: 0.5, Harness: 0.25, Wall: 2}
	if b, h := u.Cores(); b != 0.25 || h != 0.125 {
		t.Fatalf("cores = %v, %v; want 0.25, 0.125", b, h)
	}
	// 0.5 s of broker CPU over 10,000 messages is 50 µs each.
	if b, h := u.PerMessage(10000); b != 50 || h != 25 {
		t.Fatalf("per message = %v, %v µs; want 50, 25", b, h)
	}
	if b, h := u.PerMessage(0); b != -1 || h != -1 {
		t.Fatalf("no messages: per message = %v, %v; want -1, -1", b, h)
	}
	u.Broker = -1 // not measured
	if b, h := u.PerMessage(1000); b != -1 || h != 250 {
		t.Fatalf("unmeasured broker: per message = %v, %v; want -1, 250", b, h)
	}
	if b, _ := u.Cores(); b != -1 {
		t.Fatalf("unmeasured broker: cores = %v, want -1", b)
	}
}

func TestProcCPUReadsTicks(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// procCPU of this process agrees with the sum of fields 14..17 read
	// independently (in clock ticks).
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	f, _, ok := parseStat(string(b))
	if !ok {
		t.Fatalf("cannot parse %q", b)
	}
	var ticks float64
	for _, s := range f[11:15] {
		var v float64
		if _, err := fmt.Sscan(s, &v); err != nil {
			t.Fatalf("field %q: %v", s, err)
		}
		ticks += v
	}
	if got := procCPU("self"); got < ticks/clockTicks || got > ticks/clockTicks+1 {
		t.Fatalf("procCPU(self) = %v s, want about %v s", got, ticks/clockTicks)
	}
	if got := procCPU("0"); got != -1 {
		t.Fatalf("procCPU of a missing pid = %v, want -1", got)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 3 2 20 0 4 0 123 456 789\n")
	f.Add("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 9 10 11\n")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) {
		fields, _, ok := parseStat(s)
		if ok && len(fields) < 15 {
			t.Fatalf("parseStat(%q) ok with %d fields", s, len(fields))
		}
	})
}

// WaitIdle returns at once for a sleeping process, gives up on a spinning
// one after its limit, and does not wait for a process that is gone.
// startShell runs script in a shell of its own process group, killed with
// its children when the test ends, and returns the shell's pid.
func startShell(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children die with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd.Process.Pid
}

func TestWaitIdle(t *testing.T) {
	ctx := context.Background()
	sleeper := startShell(t, "sleep 60")
	if !WaitIdle(ctx, []int{sleeper}, 10*time.Second) {
		t.Error("a sleeping process was not found idle")
	}
	// The spinning child of a sleeping parent counts with it.
	parent := startShell(t, "while :; do :; done & wait")
	began := time.Now()
	if WaitIdle(ctx, []int{sleeper, parent}, time.Second) {
		t.Error("a process whose child spins was found idle")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("WaitIdle took %v past a limit of 1 s", d)
	}
	if !WaitIdle(ctx, []int{1 << 30}, time.Hour) {
		t.Error("a process that does not exist must not be waited for")
	}
}
