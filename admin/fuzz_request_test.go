package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/store/memstore"
)

// FuzzRequest sends arbitrary management requests (method, path, query,
// Authorization header, body) to the handler over a live broker. No
// request may fail the server (a 5xx), and none may succeed (a 2xx on a
// management route) unless its token grants Manage on its path.
func FuzzRequest(f *testing.F) {
	b, err := broker.Open(context.Background(), memstore.New(), broker.Options{Clock: clock.NewFake(time.Unix(1e9, 0)), Logger: quietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = b.Close() })
	if err := b.CreateTopic(context.Background(), "t", broker.TopicProperties{}); err != nil {
		f.Fatal(err)
	}
	az, err := sas.NewAuthorizer([]sas.Rule{
		{KeyName: rootKeyName, PrimaryKey: rootKey, Rights: sas.Manage | sas.Send | sas.Listen},
		{KeyName: listenName, PrimaryKey: listenKey, Rights: sas.Listen},
	})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	h := NewHandler(Options{Broker: b, Authorizer: az, Now: func() time.Time { return now }, Logger: quietLogger()})
	sign := func(path, name, key string) string {
		return sas.Sign("http://busbar"+path, name, key, now.Add(time.Hour))
	}
	f.Add("GET", "/t", "api-version=2021-05", sign("/t", rootKeyName, rootKey), "")
	f.Add("PUT", "/q", "api-version=2021-05", sign("/q", rootKeyName, rootKey), queueXML(`<LockDuration>PT30S</LockDuration>`))
	f.Add("DELETE", "/t/Subscriptions/s", "", sign("/t/Subscriptions/s", listenName, listenKey), "")
	f.Add("GET", "/$Resources/Queues", "$skip=0&$top=10", sign("/$Resources/Queues", rootKeyName, "wrong"), "")
	f.Add("POST", "/t/Subscriptions/s/Rules/r", "", "SharedAccessSignature sr=x&sig=y&se=1&skn=z", "<entry/>")
	f.Fuzz(func(t *testing.T, method, path, query, token, body string) {
		u := &url.URL{Scheme: "http", Host: "busbar", Path: path, RawQuery: query}
		r := &http.Request{Method: method, URL: u, Host: "busbar", Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Body: http.NoBody}
		if body != "" {
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		r = r.WithContext(context.Background())
		if token != "" {
			r.Header.Set("Authorization", token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
		}
		ops := !r.URL.Query().Has("api-version") && (path == "/healthz" || path == "/readyz" || path == "/health")
		if w.Code < 300 && !ops && az.AuthorizeOnHost(token, now, "busbar", strings.Trim(path, "/"), sas.Manage) != nil {
			t.Fatalf("%s %s succeeded (%d) without a Manage token", method, path, w.Code)
		}
	})
}
