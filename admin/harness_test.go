package admin

import (
	"context"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
	"github.com/busbar-io/busbar/store/memstore"
)

// The broker's entity API is the Backend the handler is written against.
var _ Backend = (*broker.Broker)(nil)

// Metrics is what the broker reports its events to.
var _ broker.Observer = (*Metrics)(nil)

const (
	rootKeyName = "RootManageSharedAccessKey"
	rootKey     = "root-key-for-tests"
	listenName  = "ListenOnly"
	listenKey   = "listen-key-for-tests"
)

// env is a broker over an in-memory store with a fake clock, served by the
// management handler on an httptest server.
type env struct {
	t       *testing.T
	b       *broker.Broker
	st      *memstore.Store
	clk     *clock.Fake
	metrics *Metrics
	srv     *httptest.Server
	host    string // 127.0.0.1:port
	ready   error
}

type envOption func(*Options)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, st: memstore.New(), clk: clock.NewFake(time.Now().UTC().Truncate(time.Second)), metrics: NewMetrics()}
	b, err := broker.Open(context.Background(), e.st, broker.Options{Clock: e.clk, Observer: e.metrics,
		Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	t.Cleanup(func() { _ = b.Close() })
	az, err := sas.NewAuthorizer([]sas.Rule{
		{KeyName: rootKeyName, PrimaryKey: rootKey, Rights: sas.Manage | sas.Send | sas.Listen},
		{KeyName: listenName, PrimaryKey: listenKey, Rights: sas.Listen},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Broker: b, Authorizer: az, Metrics: e.metrics, NamespaceName: "busbar-test",
		Logger: quietLogger(), Ready: func() error { return e.ready }}
	for _, f := range opts {
		f(&o)
	}
	e.metrics.CollectEntities(b)
	e.metrics.CollectStore(e.st.Stats)
	e.srv = httptest.NewServer(NewHandler(o))
	t.Cleanup(e.srv.Close)
	u, _ := url.Parse(e.srv.URL)
	e.host = u.Host
	return e
}

// connectionString is an emulator-style connection string for the server.
func (e *env) connectionString(keyName, key string) string {
	return "Endpoint=sb://" + e.host + ";SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key + ";UseDevelopmentEmulator=true"
}

// httpOnly is the transport the emulator's Go sample uses: the admin client
// always builds https URLs, and the server speaks plain HTTP.
type httpOnly struct{}

func (httpOnly) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return http.DefaultTransport.RoundTrip(r)
}

// client returns the official Go administration client, without retries so
// a failure is reported at once.
func (e *env) client(keyName, key string, apiVersion string) *sbadmin.Client {
	e.t.Helper()
	c, err := sbadmin.NewClientFromConnectionString(e.connectionString(keyName, key), &sbadmin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: httpOnly{}, APIVersion: apiVersion,
			Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) root() *sbadmin.Client { return e.client(rootKeyName, rootKey, "") }

// do sends a raw management request signed with the root key (unless the
// request already has an Authorization header).
func (e *env) do(method, path, body string, header map[string]string) (int, string) {
	e.t.Helper()
	u := e.srv.URL + path
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if _, ok := header["Authorization"]; !ok {
		req.Header.Set("Authorization", sas.Sign(u, rootKeyName, rootKey, time.Now().Add(time.Hour)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func ptr[T any](v T) *T { return &v }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func xmlUnmarshal(s string, v any) error { return xml.Unmarshal([]byte(s), v) }
