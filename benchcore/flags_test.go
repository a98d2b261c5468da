package benchcore

import (
	"context"
	"flag"
	"io"
	"reflect"
	"strings"
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
	f, _ := parse(t, "--broker-pid", "12, 34")
	if pids, err := f.PIDs(); err != nil || !reflect.DeepEqual(pids, []int{12, 34}) {
		t.Errorf("PIDs = %v, %v; want [12 34]", pids, err)
	}
	f, _ = parse(t, "--broker-pid", "x")
	if _, err := f.PIDs(); err == nil {
		t.Error("a non-numeric pid must be refused")
	}
	f, _ = parse(t, "--wait-idle", "12,y")
	if _, err := f.RunAndReport(context.Background(), Workload{}, nil, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--wait-idle") {
		t.Errorf("a non-numeric --wait-idle pid: error %v, want one naming the flag", err)
	}
}
