package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	csA = "Endpoint=sb://alpha.example:5672;SharedAccessKeyName=k;SharedAccessKey=a;UseDevelopmentEmulator=true"
	csB = "Endpoint=sb://beta.example;SharedAccessKeyName=k;SharedAccessKey=b;UseDevelopmentEmulator=true"
	csC = "Endpoint=sb://[::1]:5673;SharedAccessKeyName=k;SharedAccessKey=c;UseDevelopmentEmulator=true"
)

// writeProfiles points XDG_CONFIG_HOME at a directory holding content as
// busbar/profiles.json, and clears the connection variables.
func writeProfiles(t *testing.T, content string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv(envConnectionString, "")
	t.Setenv(envAdminEndpoint, "")
	t.Setenv(envProfile, "")
	if content == "" {
		return
	}
	if err := os.MkdirAll(filepath.Join(dir, "busbar"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busbar", "profiles.json"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolveConnection(t *testing.T) {
	const profiles = `{"default": "a", "profiles": {
		"a": {"connectionString": "` + csA + `"},
		"b": {"connectionString": "` + csB + `", "adminEndpoint": "https://beta-admin.example:8443"}}}`
	tests := []struct {
		name           string
		flags          connFlags
		env            map[string]string
		wantCS, wantEP string
		wantCode       int
	}{
		{name: "flag wins over everything", flags: connFlags{connectionString: csC}, env: map[string]string{envConnectionString: csB},
			wantCS: csC, wantEP: "http://[::1]:5300"},
		{name: "environment wins over the default profile", env: map[string]string{envConnectionString: csB},
			wantCS: csB, wantEP: "http://beta.example:5300"},
		{name: "default profile", wantCS: csA, wantEP: "http://alpha.example:5300"},
		{name: "named profile with its admin endpoint", flags: connFlags{profile: "b"}, wantCS: csB, wantEP: "https://beta-admin.example:8443"},
		{name: "profile from the environment", env: map[string]string{envProfile: "b"}, wantCS: csB, wantEP: "https://beta-admin.example:8443"},
		{name: "admin endpoint flag over the profile's", flags: connFlags{profile: "b", adminEndpoint: "127.0.0.1:9000"},
			wantCS: csB, wantEP: "http://127.0.0.1:9000"},
		{name: "admin endpoint from the environment", env: map[string]string{envAdminEndpoint: "http://admin.example:1234"},
			wantCS: csA, wantEP: "http://admin.example:1234"},
		{name: "unknown profile", flags: connFlags{profile: "zzz"}, wantCode: exitUsage},
		{name: "bad admin endpoint", flags: connFlags{adminEndpoint: "ftp://x"}, wantCode: exitUsage},
		{name: "connection string without endpoint", flags: connFlags{connectionString: "SharedAccessKey=x"}, wantCode: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeProfiles(t, profiles)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			ep, err := tt.flags.resolve()
			if tt.wantCode != 0 {
				if err == nil || exitCodeOf(err) != tt.wantCode {
					t.Fatalf("resolve() = %v (exit %d), want exit %d", err, exitCodeOf(err), tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ep.connectionString != tt.wantCS || ep.admin.String() != tt.wantEP {
				t.Fatalf("resolve() = %q, %q; want %q, %q", ep.connectionString, ep.admin, tt.wantCS, tt.wantEP)
			}
		})
	}
}

func TestNoConnectionStringIsAUsageError(t *testing.T) {
	writeProfiles(t, "")
	var out, errb bytes.Buffer
	if code := runWithInput([]string{"queue", "list"}, strings.NewReader(""), &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(errb.String(), "no connection string") || !strings.Contains(errb.String(), envConnectionString) {
		t.Fatalf("stderr %q", errb.String())
	}
}

func TestWithEndpoint(t *testing.T) {
	got := withEndpoint("Endpoint=sb://h:5672/;SharedAccessKeyName=k;SharedAccessKey=v=;UseDevelopmentEmulator=true", "h:5300")
	if want := "Endpoint=sb://h:5300;SharedAccessKeyName=k;SharedAccessKey=v=;UseDevelopmentEmulator=true"; got != want {
		t.Fatalf("withEndpoint = %q, want %q", got, want)
	}
}

// TestSchemeTransport checks that the admin client's https requests reach a
// plain http server unchanged but for the scheme.
func TestSchemeTransport(t *testing.T) {
	var gotPath, gotHost string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotHost = r.URL.RequestURI(), r.Host
	}))
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/orders?api-version=2024-05", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := schemeTransport{scheme: "http", client: ts.Client()}.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotPath != "/orders?api-version=2024-05" || gotHost != host || req.URL.Scheme != "https" {
		t.Fatalf("server saw %q on %q; caller's URL now %q", gotPath, gotHost, req.URL)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "1h30m": 90 * time.Minute, "14d": 14 * 24 * time.Hour,
		"PT1M": time.Minute, "p1d": 24 * time.Hour, "0.5d": 12 * time.Hour} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "abc", "-1d", "P1Y"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) succeeded", bad)
		}
	}
}

func TestParseProperty(t *testing.T) {
	when := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		key  string
		want any
	}{
		{"tenant=acme", "tenant", "acme"},
		{"eq=a=b", "eq", "a=b"},
		{"n:int=5", "n", int64(5)},
		{"n:int32=-5", "n", int32(-5)},
		{"n:long=9000000000", "n", int64(9000000000)},
		{"x:double=1.5", "x", 1.5},
		{"ok:bool=true", "ok", true},
		{"at:time=2026-12-01T09:00:00Z", "at", when},
		{"s:string=5", "s", "5"},
		{"ns:key:int=1", "ns:key", int64(1)},
	}
	for _, tt := range tests {
		k, v, err := parseProperty(tt.in)
		if err != nil || k != tt.key || !reflect.DeepEqual(v, tt.want) {
			t.Errorf("parseProperty(%q) = %q, %#v, %v; want %q, %#v", tt.in, k, v, err, tt.key, tt.want)
		}
	}
	for _, bad := range []string{"novalue", "=v", "n:int=x", "n:int32=9000000000", "b:bool=maybe", "x:blob=1", ":int=1"} {
		if _, _, err := parseProperty(bad); err == nil {
			t.Errorf("parseProperty(%q) succeeded", bad)
		}
	}
}

func TestParseEntity(t *testing.T) {
	for _, tt := range []struct {
		arg, sub string
		want     entityRef
	}{
		{"orders", "", entityRef{name: "orders"}},
		{"site1/orders", "", entityRef{name: "site1/orders"}},
		{"events", "audit", entityRef{name: "events", sub: "audit"}},
		{"events/Subscriptions/audit", "", entityRef{name: "events", sub: "audit"}},
		{"a/b/subscriptions/s", "", entityRef{name: "a/b", sub: "s"}},
	} {
		got, err := parseEntity(tt.arg, tt.sub)
		if err != nil || got != tt.want {
			t.Errorf("parseEntity(%q, %q) = %+v, %v; want %+v", tt.arg, tt.sub, got, err, tt.want)
		}
	}
	if _, err := parseEntity("events/Subscriptions/audit/extra", ""); err == nil {
		t.Error("parseEntity accepted a path with extra segments")
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestProfileEndToEnd runs a command whose broker comes from the default
// profile alone.
func TestProfileEndToEnd(t *testing.T) {
	c := newCLI(t)
	writeProfiles(t, `{"default": "test", "profiles": {"test": {"connectionString": "`+c.srv.ConnectionString()+`", "adminEndpoint": "`+c.srv.HTTPAddr().String()+`"}}}`)
	if r := runArgs("queue", "create", "via-profile"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if r := runArgs("queue", "list"); r.code != 0 || !strings.Contains(r.stdout, "via-profile") {
		t.Fatalf("queue list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Setenv(envAdminEndpoint, c.srv.HTTPAddr().String())
	t.Setenv(envConnectionString, c.srv.ConnectionString())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if r := runArgs("queue", "show", "via-profile"); r.code != 0 {
		t.Fatalf("from the environment: exit %d: %s", r.code, r.stderr)
	}
}
