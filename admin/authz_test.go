package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// routeSamples address every kind of management route.
var routeSamples = []string{
	"/$namespaceinfo", "/$Resources/Queues", "/$Resources/Topics", "/q", "/t",
	"/t/Subscriptions", "/t/Subscriptions/s", "/t/Subscriptions/s/Rules", "/t/Subscriptions/s/Rules/r",
}

// TestEveryRouteNeedsManage enumerates every management route and method
// with every kind of bad credential: none may read or change anything. A
// missing or invalid token is 401; a valid token without Manage is the
// service's 401 (or, for a method the route does not have, 403). Only a
// Manage token gets through. The observability endpoints, which serve no
// entity data, are the only paths without a token.
func TestEveryRouteNeedsManage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.b.CreateQueue(ctx, "q", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "t", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.AddRule(ctx, "t", "s", broker.RuleProperties{Name: "r"}); err != nil {
		t.Fatal(err)
	}

	covered := map[routeKind]bool{}
	for _, p := range routeSamples {
		rt, err := parseRoute(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		covered[rt.kind] = true
	}
	for k := routeUnknown + 1; int(k) < len(routeNames); k++ {
		if !covered[k] {
			t.Fatalf("route kind %s has no sample: add one to routeSamples", k)
		}
	}

	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Minute)
	methods := []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPost, http.MethodPatch, http.MethodHead}
	for _, p := range routeSamples {
		u := e.srv.URL + p
		tokens := []struct {
			name, token string
			status      []int
		}{
			{"none", "", []int{401}},
			{"not a SAS token", "Bearer abc", []int{401}},
			{"malformed", "SharedAccessSignature sr=x", []int{401}},
			{"unknown key name", sas.Sign(u, "nobody", rootKey, later), []int{401}},
			{"wrong key", sas.Sign(u, rootKeyName, "not-the-key", later), []int{401}},
			{"expired", sas.Sign(u, rootKeyName, rootKey, earlier), []int{401}},
			{"another entity", sas.Sign(e.srv.URL+"/other", rootKeyName, rootKey, later), []int{401}},
			{"listen only", sas.Sign(u, listenName, listenKey, later), []int{401, 403}},
		}
		if p == "/q" { // huge tokens on one route: they cost time, not coverage
			tokens = append(tokens, []struct {
				name, token string
				status      []int
			}{
				{"huge, for a longer path", sas.Sign(u+"/"+strings.Repeat("a", 256<<10), rootKeyName, rootKey, later), []int{401}},
				{"huge signature", "SharedAccessSignature sr=" + u + "&sig=" + strings.Repeat("A", 256<<10) + "&se=9999999999&skn=" + rootKeyName, []int{401}},
				{"beyond the header limit", sas.Sign(u, rootKeyName, rootKey, later) + "&x=" + strings.Repeat("a", 2<<20), []int{431}},
			}...)
		}
		for _, m := range methods {
			for _, tok := range tokens {
				h := map[string]string{"Authorization": tok.token}
				status, body := e.do(m, p+"?api-version=2021-05", "", h)
				if !contains(tok.status, status) {
					t.Errorf("%s %s with %s token: %d %.200s, want %v", m, p, tok.name, status, body, tok.status)
				}
				if m != http.MethodHead && strings.Contains(body, "<entry") {
					t.Errorf("%s %s with %s token returned an entry", m, p, tok.name)
				}
			}
		}
		// A Manage token reads every route.
		if status, body := e.do(http.MethodGet, p+"?api-version=2021-05", "", nil); status != http.StatusOK {
			t.Errorf("GET %s with the root key: %d %.200s", p, status, body)
		}
	}
	// Nothing changed.
	if rules, err := e.b.ListRules(ctx, "t", "s", 0, 100); err != nil || len(rules) != 2 {
		t.Fatalf("rules %v, %v: want $Default and r", rules, err)
	}
	if _, err := e.b.GetQueue(ctx, "q"); err != nil {
		t.Fatalf("the queue is gone: %v", err)
	}

	// The observability endpoints answer without a token and show no key.
	for _, p := range []string{"/healthz", "/readyz", "/health", "/metrics"} {
		status, body := e.do(http.MethodGet, p, "", map[string]string{"Authorization": ""})
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", p, status)
		}
		for _, secret := range []string{rootKey, listenKey} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s shows a key", p)
			}
		}
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
