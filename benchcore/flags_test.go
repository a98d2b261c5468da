package benchcore

import (
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
