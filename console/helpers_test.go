package console_test

import (
	"testing"

	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/config"
	"github.com/busbar-io/busbar/server"
)

// Keys of the test namespace: the root key (Manage), a Listen-only key, a
// Send-only key, and a Manage key of the queue "own" only.
const (
	rootKey   = "cm9vdC1rZXktZm9yLXRoZS1jb25zb2xlLXRlc3Rz"
	listenKey = "bGlzdGVuLWtleS1mb3ItdGhlLWNvbnNvbGUtdGVzdHM="
	sendKey   = "c2VuZC1rZXktZm9yLXRoZS1jb25zb2xlLXRlc3Rz"
	ownKey    = "b3duLWtleS1mb3ItdGhlLWNvbnNvbGUtdGVzdHM="
)

// start runs a broker with the console and the test keys.
func start(t *testing.T, opts ...busbartest.Option) *busbartest.Server {
	t.Helper()
	return busbartest.Start(t, append([]busbartest.Option{busbartest.WithConfig(testConfig())}, opts...)...)
}

// testConfig declares the test keys.
func testConfig() *config.File {
	return &config.File{Busbar: &config.Busbar{SharedAccessPolicies: []config.Policy{
		{KeyName: server.RootKeyName, PrimaryKey: rootKey, Rights: []string{"Manage", "Send", "Listen"}},
		{KeyName: "watcher", PrimaryKey: listenKey, Rights: []string{"Listen"}},
		{KeyName: "producer", PrimaryKey: sendKey, Rights: []string{"Send"}},
		{KeyName: "owner", PrimaryKey: ownKey, Rights: []string{"Manage", "Send", "Listen"}, Entity: "own"},
	}}}
}
