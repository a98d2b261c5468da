package benchcore

import (
	"os"
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
