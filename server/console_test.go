package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConsoleRoutes checks that the console answers under /ui/ beside the
// management API, and that DisableConsole turns it off.
func TestConsoleRoutes(t *testing.T) {
	get := func(s *Server, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.HTTPAddr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	s := start(t, t.TempDir(), nil)
	defer stop(t, s)
	if st, body := get(s, "/ui/"); st != http.StatusOK || !strings.Contains(body, "<title>Busbar console</title>") {
		t.Fatalf("/ui/: %d %.80s", st, body)
	}
	if st, body := get(s, "/ui/api/tree"); st != http.StatusUnauthorized || !strings.Contains(body, "sign in first") {
		t.Fatalf("/ui/api/tree: %d %s", st, body)
	}
	// With an api-version, /ui is an entity path of the management API.
	if st, body := get(s, "/ui?api-version=2021-05"); st != http.StatusUnauthorized || !strings.Contains(body, "Authorization header is missing") {
		t.Fatalf("/ui?api-version: %d %s", st, body)
	}
	if st, _ := get(s, "/healthz"); st != http.StatusOK {
		t.Fatalf("/healthz: %d", st)
	}

	off, err := Start(context.Background(), Options{DataDir: t.TempDir(), AMQPAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DisableConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, off)
	if st, body := get(off, "/ui/"); strings.Contains(body, "Busbar console") || st == http.StatusOK {
		t.Fatalf("a disabled console answered /ui/: %d %.80s", st, body)
	}
}
