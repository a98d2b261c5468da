package admin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
)

// TestNodeAdministrationClient runs test/node/admin_interop.js: the official
// JS ServiceBusAdministrationClient against the handler. It is skipped when
// node or the npm packages are missing, unless BUSBAR_REQUIRE_INTEROP=1.
func TestNodeAdministrationClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "test", "node"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@azure", "service-bus", "package.json"))
	if err != nil || modErr != nil {
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("node (%v) or @azure/service-bus in %s (%v) is missing", err, dir, modErr)
		}
		t.Skipf("node (%v) or @azure/service-bus in %s (%v) is missing; run npm ci in test/node", err, dir, modErr)
	}

	e := newEnv(t)
	ctx := context.Background()
	if err := e.b.CreateQueue(ctx, "js-runtime", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	e.send("js-runtime", 4, 20)
	m := e.receive("js-runtime", 1)
	e.deadLetter("js-runtime", m[0], "Rejected")

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "admin_interop.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"BUSBAR_CONNECTION_STRING="+e.connectionString(rootKeyName, rootKey),
		"BUSBAR_RUNTIME_QUEUE=js-runtime")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("admin_interop.js: %v\n%s", err, out)
	}

	// What the JS client did is what the broker holds.
	q, err := e.b.GetQueue(context.Background(), "js-q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Properties.MaxDeliveryCount != 9 || q.Properties.ForwardDeadLetteredMessagesTo != "js-target" ||
		q.Properties.LockDuration != 30*time.Second || q.Properties.UserMetadata != "js <meta>" {
		t.Fatalf("js-q in the broker: %+v", q.Properties)
	}
	if _, err := e.b.GetTopic(context.Background(), "js-t"); err == nil {
		t.Fatal("js-t was not deleted")
	}
}
