package amqp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp"
)

// TestRheaInterop runs test/node/rhea_interop.js (rhea 3.0.5 as the client)
// against the test broker: send unsettled and pre-settled, receive with
// manual credit, accept, drain. It is skipped when node or rhea are not
// installed, unless BUSBAR_REQUIRE_INTEROP=1.
func TestRheaInterop(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "test", "node", "rhea_interop.js")
	required := os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1"
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(root, "test", "node", "node_modules", "rhea")); err != nil || serr != nil {
		if required {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but node or rhea is missing (node: %v, rhea: %v)", err, serr)
		}
		t.Skip("node or test/node/node_modules/rhea is missing; run npm install in test/node")
	}
	b := startBroker(t, amqp.Config{})
	port := b.Addr[strings.LastIndexByte(b.Addr, ':')+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, script, port).CombinedOutput()
	if err != nil {
		t.Fatalf("rhea interop failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK: 12 messages") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	if n := b.Len("rhea-q"); n != 0 {
		t.Fatalf("%d messages left on the queue", n)
	}
	waitFor(t, func() bool { return b.Conns() == 0 }, "the rhea connection closed")
}
