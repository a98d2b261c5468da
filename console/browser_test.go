package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/server"
)

// TestBrowser runs test/node/console_e2e.js: headless Chromium (Debian's
// chromium, driven by playwright-core) through the console of a real
// broker. It is skipped when node, playwright-core or chromium is missing,
// unless BUSBAR_REQUIRE_INTEROP=1. With BUSBAR_CONSOLE_SCREENSHOTS=1 it
// writes its screenshots to docs/console/ (committed, shown in the README).
func TestBrowser(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "test", "node"))
	if err != nil {
		t.Fatal(err)
	}
	chromium := os.Getenv("BUSBAR_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	node, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	_, chrErr := os.Stat(chromium)
	if nodeErr != nil || modErr != nil || chrErr != nil {
		why := "node, playwright-core (npm ci in test/node) or chromium is missing"
		if os.Getenv("BUSBAR_REQUIRE_INTEROP") == "1" {
			t.Fatalf("BUSBAR_REQUIRE_INTEROP=1 but %s: %v %v %v", why, nodeErr, modErr, chrErr)
		}
		t.Skipf("%s: %v %v %v", why, nodeErr, modErr, chrErr)
	}
	shots := t.TempDir()
	if os.Getenv("BUSBAR_CONSOLE_SCREENSHOTS") == "1" {
		if shots, err = filepath.Abs(filepath.Join("..", "docs", "console")); err != nil {
			t.Fatal(err)
		}
	}
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console_e2e.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"BUSBAR_CONSOLE_URL=http://"+s.HTTPAddr().String()+"/ui/",
		"BUSBAR_CONNECTION_STRING="+server.ConnectionString(s.AMQPAddr().String(), server.RootKeyName, rootKey),
		"BUSBAR_LISTEN_KEY=watcher:"+listenKey,
		"BUSBAR_SCREENSHOTS="+shots,
		"BUSBAR_CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("console_e2e.js: %v\n%s", err, out)
	}
	for _, name := range []string{"signin", "namespace", "overview", "messages", "deadletters", "sessions", "rules", "toolkit", "phone-dark"} {
		if fi, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s.png: %v", name, err)
		}
	}
}
