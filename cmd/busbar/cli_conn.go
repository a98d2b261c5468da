package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/isoduration"
	"github.com/busbar-io/busbar/sas"
)

// Environment variables the connection flags fall back to.
const (
	envConnectionString = "BUSBAR_CONNECTION_STRING"
	envAdminEndpoint    = "BUSBAR_ADMIN_ENDPOINT"
	envProfile          = "BUSBAR_PROFILE"
)

// defaultAdminPort is the management port of `busbar serve` (and of the
// Service Bus emulator).
const defaultAdminPort = "5300"

// connFlags are the flags every command that talks to a broker takes.
type connFlags struct {
	connectionString string
	profile          string
	adminEndpoint    string
	json             bool
	timeout          time.Duration
}

// register adds the connection flags to fs; defTimeout is the command's
// default --timeout (0: none).
func (c *connFlags) register(fs *flag.FlagSet, defTimeout time.Duration) {
	fs.StringVar(&c.connectionString, "connection-string", "", "connection string of the broker ["+envConnectionString+"]")
	fs.StringVar(&c.profile, "profile", "", "named profile from ~/.config/busbar/profiles.json ["+envProfile+"]")
	fs.StringVar(&c.adminEndpoint, "admin-endpoint", "", "management endpoint, e.g. http://localhost:5300 (default: the AMQP host, port 5300) ["+envAdminEndpoint+"]")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	fs.DurationVar(&c.timeout, "timeout", defTimeout, "give up after this long (0: never)")
}

// profileFile is the layout of ~/.config/busbar/profiles.json.
type profileFile struct {
	// Default names the profile used when neither --profile nor
	// BUSBAR_PROFILE is given.
	Default  string             `json:"default,omitempty"`
	Profiles map[string]profile `json:"profiles"`
}

// profile is one named broker.
type profile struct {
	ConnectionString string `json:"connectionString"`
	AdminEndpoint    string `json:"adminEndpoint,omitempty"`
}

// profilesPath returns the profile file's path: $XDG_CONFIG_HOME/busbar/
// profiles.json, or ~/.config/busbar/profiles.json.
func profilesPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "busbar", "profiles.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "busbar", "profiles.json"), nil
}

// endpoints are the resolved addresses of a broker.
type endpoints struct {
	connectionString string   // AMQP, for azservicebus
	admin            *url.URL // http(s)://host:port of the management API
}

// resolve finds the connection string (flag, then environment, then
// profile) and the management endpoint (flag, environment, profile, then
// the AMQP host with port 5300).
func (c *connFlags) resolve() (endpoints, error) {
	var ep endpoints
	cs := firstNonEmpty(c.connectionString, os.Getenv(envConnectionString))
	adminEP := firstNonEmpty(c.adminEndpoint, os.Getenv(envAdminEndpoint))
	name := firstNonEmpty(c.profile, os.Getenv(envProfile))
	if cs == "" || name != "" {
		p, err := loadProfile(name)
		if err != nil {
			return ep, err
		}
		if cs == "" {
			cs = p.ConnectionString
		}
		adminEP = firstNonEmpty(adminEP, p.AdminEndpoint)
	}
	if cs == "" {
		return ep, usageErrorf("no connection string: pass --connection-string, set %s, or add a profile to ~/.config/busbar/profiles.json", envConnectionString)
	}
	host, err := endpointHost(cs)
	if err != nil {
		return ep, err
	}
	ep.connectionString = cs
	if adminEP == "" {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		adminEP = net.JoinHostPort(strings.Trim(h, "[]"), defaultAdminPort)
	}
	ep.admin, err = parseAdminEndpoint(adminEP)
	return ep, err
}

// loadProfile returns the named profile (or the file's default when name is
// empty). A missing file is an error only when a profile was named.
func loadProfile(name string) (profile, error) {
	path, err := profilesPath()
	if err != nil {
		return profile{}, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && name == "" {
		return profile{}, nil
	}
	if err != nil {
		return profile{}, usageErrorf("profile %q: %v", name, err)
	}
	var pf profileFile
	if err := json.Unmarshal(data, &pf); err != nil {
		return profile{}, usageErrorf("%s: %v", path, err)
	}
	if name == "" {
		name = pf.Default
		if name == "" {
			return profile{}, nil
		}
	}
	p, ok := pf.Profiles[name]
	if !ok {
		return profile{}, usageErrorf("%s has no profile %q", path, name)
	}
	return p, nil
}

// endpointHost returns the host[:port] of a connection string's Endpoint.
func endpointHost(cs string) (string, error) {
	ep := sas.ParseConnectionString(cs).Endpoint
	if ep == "" {
		return "", usageErrorf("connection string has no Endpoint")
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return "", usageErrorf("connection string: Endpoint %q is not a URL like sb://localhost", ep)
	}
	return u.Host, nil
}

// withEndpoint returns cs with its Endpoint replaced by sb://host.
func withEndpoint(cs, host string) string { return sas.ReplaceField(cs, "Endpoint", "sb://"+host) }

// parseAdminEndpoint accepts host:port, http://host:port or
// https://host:port; a bare host:port means plain http.
func parseAdminEndpoint(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, usageErrorf("admin endpoint %q: want host:port, http://host:port or https://host:port", s)
	}
	return u, nil
}

// schemeTransport is the policy.Transporter of the admin client. The
// official client always builds https:// URLs; this transport sends each
// request with the scheme of the management endpoint instead (plain http
// for `busbar serve` and the emulator).
type schemeTransport struct {
	scheme string
	client *http.Client
}

// Do sends a copy of req with the endpoint's scheme.
func (t schemeTransport) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = t.scheme
	return t.client.Do(r)
}

// retries keeps an unreachable broker from stalling a command for long.
var retries = policy.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}

// adminClient returns the official admin client for the endpoints.
func (ep endpoints) adminClient() (*admin.Client, error) {
	opts := &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: schemeTransport{scheme: ep.admin.Scheme, client: &http.Client{}},
		Retry:     retries,
	}}
	c, err := admin.NewClientFromConnectionString(withEndpoint(ep.connectionString, ep.admin.Host), opts)
	if err != nil {
		return nil, usageErrorf("connection string: %v", err)
	}
	return c, nil
}

// client returns the official data-plane client for the endpoints.
func (ep endpoints) client() (*azservicebus.Client, error) {
	c, err := azservicebus.NewClientFromConnectionString(ep.connectionString, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second},
	})
	if err != nil {
		return nil, usageErrorf("connection string: %v", err)
	}
	return c, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// parseDuration reads a Go duration ("90s", "1h30m"), a number of days
// ("14d"), or an ISO 8601 duration ("PT1M", "P14D").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0, errors.New("empty duration")
	case s[0] == 'P' || s[0] == 'p':
		return isoduration.Parse(strings.ToUpper(s))
	case strings.HasSuffix(s, "d"):
		n, err := strconv.ParseFloat(strings.TrimSuffix(s, "d"), 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (use 30s, 5m, 2h, 14d or PT1M)", s)
	}
	return d, nil
}
