package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/sas"
)

const queueBody = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">%s</QueueDescription></content></entry>`

func queueXML(props string) string { return strings.Replace(queueBody, "%s", props, 1) }

// errorBody asserts an <Error> body with the status as its code and the
// detail containing want.
func errorBody(t *testing.T, status int, body string, wantStatus int, want string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d; body %s", status, wantStatus, body)
	}
	var e struct {
		Code   int
		Detail string
	}
	if err := xmlUnmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Code != wantStatus || !strings.Contains(e.Detail, want) {
		t.Fatalf("error body %+v, want code %d and detail containing %q", e, wantStatus, want)
	}
}

func TestBadRequestsChangeNothing(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"malformed XML", "/q1", `<entry><content><QueueDescription>`, 400, "malformed XML"},
		{"unknown property", "/q1", queueXML(`<LockDuration>PT1M</LockDuration><Colour>red</Colour>`), 400, "unknown property Colour in QueueDescription"},
		{"out-of-range duration", "/q1", queueXML(`<LockDuration>PT6M</LockDuration>`), 400, "LockDuration 6m0s is outside [5s, 5m0s]"},
		{"invalid name", "/bad~name", queueXML(``), 400, `contains '~'`},
		{"empty body", "/q1", ``, 400, "the request body is empty"},
		{"wrong description", "/q1", strings.ReplaceAll(queueXML(``), "QueueDescription", "SubscriptionDescription"), 400,
			"PUT /q1 needs a QueueDescription or a TopicDescription, not SubscriptionDescription"},
		{"too large", "/q1", queueXML(`<UserMetadata>` + strings.Repeat("x", DefaultMaxBodyBytes) + `</UserMetadata>`), 413, "larger than 1048576 bytes"},
		{"missing forward destination", "/q1", queueXML(`<ForwardTo>nowhere</ForwardTo>`), 404, `forwarding destination "nowhere" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := e.do(http.MethodPut, tc.path+"?api-version=2021-05", tc.body, nil)
			errorBody(t, status, body, tc.status, tc.want)
			if qs, _ := e.b.ListQueues(context.Background(), 0, 0); len(qs) != 0 {
				t.Fatalf("a refused request created %s", qs[0].Name)
			}
		})
	}
}

func TestStatusesAndConventions(t *testing.T) {
	e := newEnv(t)
	v := "?api-version=2024-05"
	status, body := e.do(http.MethodPut, "/q1"+v, queueXML(`<MaxDeliveryCount>4</MaxDeliveryCount>`), nil)
	if status != http.StatusCreated || !strings.Contains(body, "<MaxDeliveryCount>4</MaxDeliveryCount>") ||
		!strings.Contains(body, `<title type="text">q1</title>`) || !strings.Contains(body, "<id>http://"+e.host+"/q1?api-version=2024-05</id>") {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body = e.do(http.MethodPut, "/q1"+v, queueXML(``), nil)
	errorBody(t, status, body, 409, "SubCode=40900")
	status, body = e.do(http.MethodPut, "/q2"+v, queueXML(``), map[string]string{"If-Match": "*"})
	errorBody(t, status, body, 404, `the queue "q2" does not exist, so it cannot be updated`)
	// An update sends only what changes; the rest stays.
	status, body = e.do(http.MethodPut, "/q1"+v, queueXML(`<UserMetadata>m</UserMetadata>`), map[string]string{"If-Match": "*"})
	if status != http.StatusOK || !strings.Contains(body, "<MaxDeliveryCount>4</MaxDeliveryCount>") || !strings.Contains(body, "<UserMetadata>m</UserMetadata>") {
		t.Fatalf("update: %d %s", status, body)
	}
	status, body = e.do(http.MethodGet, "/nope"+v, "", nil)
	errorBody(t, status, body, 404, `the messaging entity "nope" could not be found`)
	status, body = e.do(http.MethodPost, "/q1"+v, "", nil)
	errorBody(t, status, body, 405, "method POST is not allowed")
	status, body = e.do(http.MethodGet, "/q1"+v, "", map[string]string{"Authorization": ""})
	errorBody(t, status, body, 401, "the Authorization header is missing")
	expired := sas.Sign(e.srv.URL+"/q1"+v, rootKeyName, rootKey, time.Now().Add(-time.Minute))
	status, body = e.do(http.MethodGet, "/q1"+v, "", map[string]string{"Authorization": expired})
	errorBody(t, status, body, 401, "token expired")
	other := sas.Sign(e.srv.URL+"/other", rootKeyName, rootKey, time.Now().Add(time.Minute))
	status, body = e.do(http.MethodGet, "/q1"+v, "", map[string]string{"Authorization": other})
	errorBody(t, status, body, 401, `token resource "http://`+e.host+`/other" does not cover "q1"`)
	status, body = e.do(http.MethodGet, "/$Resources/Queues?$top=x", "", nil)
	errorBody(t, status, body, 400, `$top="x" is not a non-negative integer`)

	// Rule names: from the URL, or from the body when the URL has none.
	e.do(http.MethodPut, "/t"+v, strings.ReplaceAll(queueXML(``), "QueueDescription", "TopicDescription"), nil)
	e.do(http.MethodPut, "/t/Subscriptions/s"+v, strings.ReplaceAll(queueXML(``), "QueueDescription", "SubscriptionDescription"), nil)
	rule := func(name string) string {
		return strings.ReplaceAll(queueXML(`<Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="SqlFilter"><SqlExpression>a=1</SqlExpression></Filter><Name>`+name+`</Name>`),
			"QueueDescription", "RuleDescription")
	}
	status, body = e.do(http.MethodPut, "/t/Subscriptions/s/Rules/r1"+v, rule("other"), nil)
	errorBody(t, status, body, 400, `property Name "other" does not match the rule name "r1" in the URL`)
	status, body = e.do(http.MethodPut, "/t/Subscriptions/s/Rules/"+v, rule("fromBody"), nil)
	if status != http.StatusCreated || !strings.Contains(body, "<Name>fromBody</Name>") ||
		!strings.Contains(body, "/t/Subscriptions/s/Rules/fromBody?api-version=2024-05</id>") {
		t.Fatalf("rule from body: %d %s", status, body)
	}
	if _, err := getRule(context.Background(), e.b, "t", "s", "FROMBODY"); err != nil {
		t.Fatal(err)
	}
}

func TestObservabilityEndpoints(t *testing.T) {
	e := newEnv(t)
	get := func(path string) (int, string, string) {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/health"} {
		status, ctype, body := get(path)
		var h struct{ Status, Message string }
		if err := json.Unmarshal([]byte(body), &h); err != nil || status != 200 || ctype != "application/json; charset=utf-8" ||
			h.Status != "healthy" || h.Message != "Service is healthy." {
			t.Fatalf("%s: %d %s %q (%v)", path, status, ctype, body, err)
		}
	}
	e.ready = errors.New("the broker is closed")
	for _, path := range []string{"/readyz", "/health"} {
		status, _, body := get(path)
		if status != 503 || body != `{"status":"unhealthy","message":"Service is unhealthy: the broker is closed"}`+"\n" {
			t.Fatalf("%s when not ready: %d %q", path, status, body)
		}
	}
	if status, _, _ := get("/healthz"); status != 200 {
		t.Fatalf("/healthz when not ready: %d", status)
	}
	// pprof is off: the path is an (unauthorized) entity path.
	if status, _, _ := get("/debug/pprof/"); status != 401 {
		t.Fatalf("/debug/pprof/ without the option: %d", status)
	}
	// With api-version the observability paths are entities: a queue may be called "health".
	status, body := e.do(http.MethodPut, "/health?api-version=2021-05", queueXML(``), nil)
	if status != 201 || !strings.Contains(body, "<title type=\"text\">health</title>") {
		t.Fatalf("queue named health: %d %s", status, body)
	}

	p := newEnv(t, func(o *Options) { o.EnablePprof = true })
	resp, err := http.Get(p.srv.URL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/debug/pprof/cmdline with the option: %d", resp.StatusCode)
	}
}

func TestReadinessFollowsTheBroker(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Ready = nil })
	readyz := func() (int, string) {
		resp, err := http.Get(e.srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := readyz(); status != 200 {
		t.Fatalf("open broker: %d %s", status, body)
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	if status, body := readyz(); status != 503 || !strings.Contains(body, "the broker is closed") {
		t.Fatalf("closed broker: %d %s", status, body)
	}
	status, body := e.do(http.MethodGet, "/q?api-version=2021-05", "", nil)
	errorBody(t, status, body, 503, "closed")
}

func TestNoBrokerAndNoAuthorizer(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Broker = nil })
	status, body := e.do(http.MethodGet, "/$Resources/Queues?api-version=2021-05", "", nil)
	errorBody(t, status, body, 503, "the broker is not open")
	resp, err := http.Get(e.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz without a broker: %d", resp.StatusCode)
	}
	n := newEnv(t, func(o *Options) { o.Authorizer = nil })
	status, body = n.do(http.MethodGet, "/$Resources/Queues?api-version=2021-05", "", nil)
	errorBody(t, status, body, 401, "no shared access rules are configured")
}
