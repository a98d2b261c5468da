package benchcore

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) (*CommonFlags, error) {
	t.Helper()
	var f CommonFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	_, err := f.Workload()
	return &f, err
}

func TestCommonFlagDefaults(t *testing.T) {
	f, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Workload()
	want := Workload{Producers: 1, Consumers: 1, Inflight: 1, Batch: 1, Size: 1024, Count: 10000,
		PerKey: 10, DrainTimeout: 30 * time.Second}
	if w != want {
		t.Fatalf("workload %+v\nwant     %+v", w, want)
	}
}

func TestKeyedFlagsSetTheCount(t *testing.T) {
	f, err := parse(t, "--keys", "10000", "--per-key", "10", "--consumers", "4", "--size", "8")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Workload()
	if w.Count != 100000 || !w.Keyed() || w.Size != HeaderSize {
		t.Fatalf("workload %+v: want 100,000 messages, keyed, size raised to %d", w, HeaderSize)
	}
}

func TestBadFlags(t *testing.T) {
	if _, err := parse(t, "--producers", "0"); err == nil {
		t.Error("zero producers must be refused")
	}
	if _, err := parse(t, "--rate", "-1"); err == nil {
		t.Error("a negative rate must be refused")
	}
	if _, err := parse(t, "--keys", "5", "--per-key", "0"); err == nil {
		t.Error("keys without messages per key must be refused")
	}
	f, _ := parse(t, "--broker-pid", "12, 34", "--wait-idle", "56")
	if p, err := f.Processes(); err != nil || !reflect.DeepEqual(p, Processes{Broker: []int{12, 34}, Idle: []int{56}}) {
		t.Errorf("Processes = %+v, %v; want broker [12 34], idle [56]", p, err)
	}
	for _, bad := range [][]string{{"--broker-pid", "x"}, {"--wait-idle", "12,y"}} {
		f, _ = parse(t, bad...)
		if _, err := f.Processes(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: error %v, want one naming the flag", bad, err)
		}
	}
}

// gcPercentDriver records the GC percentage in force while its producer
// sends.
type gcPercentDriver struct {
	*memDriver
	seen atomic.Int64
}

func (d *gcPercentDriver) NewProducer(ctx context.Context, i int) (Producer, error) {
	p, err := d.memDriver.NewProducer(ctx, i)
	return gcPercentProducer{p, d}, err
}

type gcPercentProducer struct {
	Producer
	d *gcPercentDriver
}

func (p gcPercentProducer) Send(ctx context.Context, msgs []Outgoing) error {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	p.d.seen.Store(int64(s[0].Value.Uint64()))
	return p.Producer.Send(ctx, msgs)
}

// TestLoadGeneratorTunesItsGC checks that a run collects the load
// generator's garbage as busbar serve does (a heap headroom, so a GC
// percentage above Go's 100 while the heap is small), that -1 keeps Go's
// default, and that the setting is restored after the run.
func TestLoadGeneratorTunesItsGC(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: the tuning defers to it")
	}
	for _, tc := range []struct {
		headroom string
		tuned    bool
	}{{"", true}, {"-1", false}} {
		args := []string{"--count", "50", "--quiet"}
		if tc.headroom != "" {
			args = append(args, "--gc-headroom-mb", tc.headroom)
		}
		f, err := parse(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := f.Workload()
		d := &gcPercentDriver{memDriver: newMem()}
		before := debug.SetGCPercent(100)
		if _, err := f.RunAndReport(context.Background(), w, d, Processes{}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		if seen := d.seen.Load(); (seen > 100) != tc.tuned {
			t.Errorf("--gc-headroom-mb %q: GC percentage %d during the run, want tuned=%v", tc.headroom, seen, tc.tuned)
		}
		if after := debug.SetGCPercent(before); after != 100 {
			t.Errorf("--gc-headroom-mb %q: GC percentage %d after the run, want 100 restored", tc.headroom, after)
		}
	}
}

// TestLatencyLogFlag: --latency-log writes a line per delivery to the file
// it names, and a file that cannot be created fails the run before it
// starts.
func TestLatencyLogFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latency.log")
	f, err := parse(t, "--count", "50", "--quiet", "--latency-log", path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Workload()
	if _, err := f.RunAndReport(context.Background(), w, newMem(), Processes{}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 50 {
		t.Errorf("%d lines for 50 messages", n)
	}

	f, err = parse(t, "--count", "50", "--quiet", "--latency-log", filepath.Join(t.TempDir(), "no", "such", "dir"))
	if err != nil {
		t.Fatal(err)
	}
	d := newMem()
	if _, err := f.RunAndReport(context.Background(), w, d, Processes{}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--latency-log") {
		t.Errorf("an uncreatable --latency-log: %v, want its error", err)
	}
}
