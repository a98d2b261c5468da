package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{0, 128 * mib, maxPercent},
		{1 * mib, 128 * mib, maxPercent}, // would be 12,800
		{6 * mib, 128 * mib, maxPercent}, // 2,133
		{7 * mib, 128 * mib, 1828},
		{32 * mib, 128 * mib, 400},
		{64 * mib, 128 * mib, 200},
		{100 * mib, 128 * mib, 128},
		{128 * mib, 128 * mib, 100},
		{1024 * mib, 128 * mib, 100},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

// TestTunerFollowsTheLiveHeap starts a tuner with a small live heap and
// checks that collections raise the percentage, that a live heap larger
// than the headroom brings it back to 100, and that Stop restores the
// setting found at Start.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	debug.SetGCPercent(73)

	tu := Start(Options{Headroom: 256 << 20, Force: true})
	runtime.GC()
	runtime.GC()
	waitPercent(t, func(p int) bool { return p > 100 }, "above 100 with a small live heap")

	big := make([][]byte, 0, 320)
	for range 320 {
		big = append(big, make([]byte, 1<<20)) // 320 MiB live, above the headroom
	}
	waitPercent(t, func(p int) bool { runtime.GC(); return p == 100 }, "100 with a live heap above the headroom")
	runtime.KeepAlive(big)

	tu.Stop()
	if p := currentPercent(); p != 73 {
		t.Errorf("after Stop the GC percentage is %d, want the 73 found at Start", p)
	}
	if tu.Updates() < 2 {
		t.Errorf("%d updates, want at least 2", tu.Updates())
	}
}

func TestOperatorSettingWins(t *testing.T) {
	t.Setenv("GOGC", "150")
	before := debug.SetGCPercent(91)
	defer debug.SetGCPercent(before)
	tu := Start(Options{})
	defer tu.Stop()
	runtime.GC()
	if p := currentPercent(); p != 91 {
		t.Errorf("with GOGC set the tuner changed the percentage to %d", p)
	}
	tu2 := Start(Options{Headroom: -1, Force: true})
	defer tu2.Stop()
	runtime.GC()
	if p := currentPercent(); p != 91 {
		t.Errorf("with a negative headroom the tuner changed the percentage to %d", p)
	}
}

// currentPercent reads the GC percentage without changing it.
func currentPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func waitPercent(t *testing.T, ok func(int) bool, what string) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, func() bool { return ok(currentPercent()) })
}

func TestHeadroomMiB(t *testing.T) {
	for mb, want := range map[int64]int64{-1: -1, -7: -1, 0: 0, 1: 1 << 20, 128: DefaultHeadroom} {
		if got := HeadroomMiB(mb); got != want {
			t.Errorf("HeadroomMiB(%d) = %d, want %d", mb, got, want)
		}
	}
}
