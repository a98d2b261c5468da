package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/sas"
)

// Environment variables the suite reads. docs/conformance.md describes them.
const (
	// envConnectionString points the suite at a running broker instead of
	// a child `busbar serve`.
	envConnectionString = "BUSBAR_CONFORMANCE_CONNECTION_STRING"
	// envAdminEndpoint is the base URL of the ATOM management API of that
	// broker (for example http://localhost:5300). Without it, an emulator
	// connection string's host on port 5300 over plain HTTP is assumed,
	// and any other connection string uses HTTPS on its own host.
	envAdminEndpoint = "BUSBAR_CONFORMANCE_ADMIN_ENDPOINT"
	// envEntities chooses how entities are created: "admin" (through the
	// management API), "config" (declared in a --config file given to the
	// child at start) or "auto" (the default: admin when it works).
	envEntities = "BUSBAR_CONFORMANCE_ENTITIES"
	// envVerbose copies the child's log to the test's stderr when set.
	envVerbose = "BUSBAR_CONFORMANCE_VERBOSE"
	// envRace builds the child broker with -race when set.
	envRace = "BUSBAR_CONFORMANCE_RACE"
	// envLogLevel is the child's --log-level (default info).
	envLogLevel = "BUSBAR_CONFORMANCE_LOG_LEVEL"
)

// Deadlines of the harness.
const (
	buildTimeout    = 5 * time.Minute
	startTimeout    = 30 * time.Second
	stopTimeout     = 20 * time.Second
	adminProbeLimit = 10 * time.Second
)

// suite is what TestMain set up for the tests. When err is set, every test
// fails with it (it names the step that failed and the child's stderr).
var suite struct {
	err      error
	connStr  string             // the data-plane connection string
	adminCS  string             // the connection string the admin client uses
	adminTLS bool               // false: the admin client's requests are rewritten to plain HTTP
	mode     string             // "admin" or "config"
	runID    string             // makes entity names unique to this run
	child    *serveproc.Process // nil when testing an external broker
	external bool
	tmp      string // the harness's temporary directory
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// suiteOnce starts the broker when the first test needs it, so that a run
// selecting no test of this package (go test ./... -run X) builds nothing.
var suiteOnce sync.Once

func runSuite(m *testing.M) int {
	suite.runID = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffffff)
	tmp, err := os.MkdirTemp("", "busbar-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	suite.tmp = tmp

	code := m.Run()
	if suite.child != nil {
		if err := suite.child.Stop(stopTimeout); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: stopping busbar: %v\n%s", err, stderrTail(suite.child))
			code = 1
		}
	}
	return code
}

// setUp starts (or finds) the broker under test and decides how entities
// are created.
func setUp(tmp string) error {
	mode := strings.ToLower(os.Getenv(envEntities))
	switch mode {
	case "":
		mode = "auto"
	case "auto", "admin", "config":
	default:
		return fmt.Errorf("%s=%q: want auto, admin or config", envEntities, mode)
	}
	if cs := os.Getenv(envConnectionString); cs != "" {
		suite.external = true
		suite.connStr = cs
		suite.mode = "admin"
		if mode == "config" {
			return fmt.Errorf("%s=config needs the child broker; unset %s", envEntities, envConnectionString)
		}
		return configureExternalAdmin(cs)
	}

	bin := filepath.Join(tmp, "busbar")
	if err := buildBusbar(bin); err != nil {
		return err
	}
	if mode != "config" {
		c, err := startChild(bin, filepath.Join(tmp, "data-admin"), "")
		if err != nil {
			return err
		}
		suite.child = c
		suite.connStr = c.ConnectionString()
		suite.adminCS = replaceEndpoint(c.ConnectionString(), "sb://"+c.HTTPAddr())
		suite.mode = "admin"
		perr := probeAdmin()
		if perr == nil {
			return nil
		}
		if mode == "admin" {
			return fmt.Errorf("the management API at http://%s does not work: %w\n%s", c.HTTPAddr(), perr, stderrTail(c))
		}
		fmt.Fprintf(os.Stderr, "conformance: the management API does not work (%v); restarting busbar with a --config file declaring the entities\n", perr)
		if err := c.Stop(stopTimeout); err != nil {
			return fmt.Errorf("stopping the first busbar: %w\n%s", err, stderrTail(c))
		}
		suite.child = nil
	}
	cfg := filepath.Join(tmp, "Config.json")
	if err := writeConfigFile(cfg); err != nil {
		return err
	}
	c, err := startChild(bin, filepath.Join(tmp, "data-config"), cfg)
	if err != nil {
		return err
	}
	suite.child = c
	suite.connStr = c.ConnectionString()
	suite.adminCS = replaceEndpoint(c.ConnectionString(), "sb://"+c.HTTPAddr())
	suite.mode = "config"
	return nil
}

// buildBusbar builds ./cmd/busbar of this module into bin (with -race when
// envRace is set).
func buildBusbar(bin string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	var flags []string
	if os.Getenv(envRace) != "" {
		flags = append(flags, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	return serveproc.Build(ctx, root, bin, flags...)
}

// startChild starts `busbar serve` on free loopback ports (AMQP and HTTP)
// over dataDir, with the config file cfg unless it is empty, and returns
// once it accepts connections.
func startChild(bin, dataDir, cfg string) (*serveproc.Process, error) {
	args := []string{"--shutdown-timeout", "10s"}
	if lv := os.Getenv(envLogLevel); lv != "" {
		args = append(args, "--log-level", lv)
	}
	opts := serveproc.Options{
		Binary:       bin,
		DataDir:      dataDir,
		Config:       cfg,
		HTTP:         true,
		Args:         args,
		StartTimeout: startTimeout,
	}
	if os.Getenv(envVerbose) != "" {
		opts.Verbose = os.Stderr
	}
	return serveproc.Start(opts)
}

// stderrTail returns the end of the child's log, for failure messages.
func stderrTail(c *serveproc.Process) string {
	return "busbar output:\n" + c.LogTail(8<<10)
}

// replaceEndpoint returns cs with its Endpoint replaced.
func replaceEndpoint(cs, endpoint string) string { return sas.ReplaceField(cs, "Endpoint", endpoint) }

// replaceKey returns cs with its SharedAccessKey replaced.
func replaceKey(cs, key string) string { return sas.ReplaceField(cs, "SharedAccessKey", key) }

// configureExternalAdmin decides how the admin client reaches an external
// broker's management API.
func configureExternalAdmin(cs string) error {
	if ep := os.Getenv(envAdminEndpoint); ep != "" {
		scheme, host, ok := strings.Cut(ep, "://")
		if !ok {
			return fmt.Errorf("%s=%q: want a URL such as http://localhost:5300", envAdminEndpoint, ep)
		}
		suite.adminCS = replaceEndpoint(cs, "sb://"+strings.TrimSuffix(host, "/"))
		suite.adminTLS = strings.EqualFold(scheme, "https")
		return nil
	}
	if p := sas.ParseConnectionString(cs); p.Emulator {
		ep := p.Endpoint
		host := strings.TrimSuffix(strings.TrimPrefix(ep, "sb://"), "/")
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		suite.adminCS = replaceEndpoint(cs, "sb://"+net.JoinHostPort(host, "5300"))
		return nil
	}
	suite.adminCS = cs
	suite.adminTLS = true
	return nil
}

// harnessReported makes only the first failing test print the harness
// error in full.
var harnessReported sync.Once

// harness starts the broker under test on first use, and fails t when the
// suite could not set it up.
func harness(t *testing.T) {
	t.Helper()
	suiteOnce.Do(func() { suite.err = setUp(suite.tmp) })
	if suite.err == nil {
		return
	}
	full := false
	harnessReported.Do(func() { full = true })
	if full {
		t.Fatalf("conformance harness: %v", suite.err)
	}
	first, _, _ := strings.Cut(suite.err.Error(), "\n")
	t.Fatalf("conformance harness: %s (in full in the first failing test's output)", first)
}
