package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/busbar-io/busbar/benchcore"
	"github.com/busbar-io/busbar/busbartest"
)

// TestBenchRawClientReportsCPUPerMessage runs `busbar bench --client raw`
// against an in-process broker, naming this process as the broker, and
// checks the JSON result: every message verified, and CPU per message
// reported for the broker and the load generator.
func TestBenchRawClientReportsCPUPerMessage(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	srv := busbartest.Start(t)
	var out, errb bytes.Buffer
	code := benchCommand([]string{"--connection-string", srv.ConnectionString(), "--create", "--admin", srv.HTTPAddr().String(),
		"--client", "raw", "--producers", "2", "--consumers", "2", "--inflight", "8", "--count", "3000",
		"--json", "--quiet", "--broker-pid", strconv.Itoa(os.Getpid())}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	var r benchcore.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if !r.Verdict.OK || r.Verdict.Received != 3000 {
		t.Fatalf("verdict %+v, want 3000 messages verified", r.Verdict)
	}
	// The broker is this process, so its figure includes the harness's.
	if r.HarnessCPUPerMsg <= 0 || r.BrokerCPUPerMsg < r.HarnessCPUPerMsg {
		t.Fatalf("CPU per message: broker %v µs, harness %v µs; want harness > 0 and broker ≥ harness", r.BrokerCPUPerMsg, r.HarnessCPUPerMsg)
	}
	if r.Client == "" || !bytes.Contains(out.Bytes(), []byte(`"broker_cpu_us_per_msg"`)) {
		t.Fatalf("result lacks the client or the CPU field: %s", out.String())
	}
}

func TestBenchRefusesUnknownClient(t *testing.T) {
	var out, errb bytes.Buffer
	if code := benchCommand([]string{"--connection-string", "Endpoint=sb://x;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", "--client", "fast"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want usage (%d); stderr %s", code, exitUsage, errb.String())
	}
	if !bytes.Contains(errb.Bytes(), []byte("want sdk, amqp or raw")) {
		t.Fatalf("stderr %q does not name the clients", errb.String())
	}
}

// A bad pid is a usage error, found before the bench connects (the
// endpoint here has nobody listening).
func TestBenchRefusesBadPIDs(t *testing.T) {
	for _, flag := range []string{"--broker-pid", "--wait-idle"} {
		var out, errb bytes.Buffer
		code := benchCommand([]string{"--connection-string", "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", flag, "12,x"}, &out, &errb)
		if code != exitUsage || !bytes.Contains(errb.Bytes(), []byte(flag)) {
			t.Errorf("%s 12,x: exit %d, stderr %q; want usage (%d) naming the flag", flag, code, errb.String(), exitUsage)
		}
	}
}
