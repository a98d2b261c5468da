package sas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testAuthorizer(t *testing.T) *Authorizer {
	t.Helper()
	a, err := NewAuthorizer([]Rule{
		{KeyName: "RootManageSharedAccessKey", PrimaryKey: "root-key", SecondaryKey: "root-key-2", Rights: Manage | Send | Listen},
		{KeyName: "SendOnly", PrimaryKey: "send-key", Rights: Send},
		{KeyName: "ListenOnly", PrimaryKey: "listen-key", Rights: Listen},
		{KeyName: "OrdersOnly", PrimaryKey: "orders-key", Rights: Send | Listen, Entity: "Orders"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthorize(t *testing.T) {
	a := testAuthorizer(t)
	exp := now.Add(time.Hour)
	cases := []struct {
		name     string
		token    string
		entity   string
		right    Right
		wantErr  error
		wantText string
	}{
		{"namespace token for a queue", Sign("amqp://localhost:5672/", "RootManageSharedAccessKey", "root-key", exp), "orders", Send, nil, ""},
		{"entity audience, emulator scheme", Sign("amqp://localhost:5672/orders", "RootManageSharedAccessKey", "root-key", exp), "orders", Listen, nil, ""},
		{"case-insensitive paths", Sign("amqp://localhost/Orders", "RootManageSharedAccessKey", "root-key", exp), "ORDERS/Subscriptions/S1", Listen, nil, ""},
		{"sb scheme is equivalent", Sign("sb://ns.servicebus.windows.net/orders", "RootManageSharedAccessKey", "root-key", exp), "orders/$management", Manage, nil, ""},
		{"secondary key", Sign("amqp://localhost/orders", "RootManageSharedAccessKey", "root-key-2", exp), "orders", Send, nil, ""},
		{"prefix on segment boundary only", Sign("amqp://localhost/orders", "RootManageSharedAccessKey", "root-key", exp), "orders2", Send, ErrAudience, "does not cover"},
		{"expired", Sign("amqp://localhost/orders", "RootManageSharedAccessKey", "root-key", now), "orders", Send, ErrExpired, "expired at 2026-11-21T12:00:00Z"},
		{"wrong key", Sign("amqp://localhost/orders", "RootManageSharedAccessKey", "nope", exp), "orders", Send, ErrBadSignature, "not signed"},
		{"unknown key name", Sign("amqp://localhost/orders", "Who", "root-key", exp), "orders", Send, ErrUnknownKey, `"Who"`},
		{"send-only cannot listen", Sign("amqp://localhost/orders", "SendOnly", "send-key", exp), "orders", Listen, ErrNoRight, "grants Send, the operation needs Listen"},
		{"send-only can send", Sign("amqp://localhost/orders", "SendOnly", "send-key", exp), "orders", Send, nil, ""},
		{"listen-only cannot manage", Sign("amqp://localhost/", "ListenOnly", "listen-key", exp), "", Manage, ErrNoRight, "needs Manage"},
		{"entity rule on its entity", Sign("amqp://localhost/orders", "OrdersOnly", "orders-key", exp), "orders/subscriptions/a", Listen, nil, ""},
		{"entity rule elsewhere", Sign("amqp://localhost/", "OrdersOnly", "orders-key", exp), "invoices", Send, ErrAudience, `belongs to entity "orders"`},
		{"malformed", "Bearer abc", "orders", Send, ErrMalformed, "prefix"},
		{"missing se", "SharedAccessSignature sr=a&sig=b&skn=c", "orders", Send, ErrMalformed, "missing se"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := a.Authorize(c.token, now, c.entity, c.right)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("Authorize: %v", err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Authorize error = %v, want %v", err, c.wantErr)
			}
			if !strings.Contains(err.Error(), c.wantText) {
				t.Fatalf("error %q does not mention %q", err, c.wantText)
			}
		})
	}
}

// TestSignMatchesSDKEncoding pins the exact encoding the Azure SDKs produce:
// sr is the lower-cased query-escaped audience, sig the query-escaped base64
// HMAC-SHA256 of "sr\nse" under the key's bytes. The expected signature was
// computed independently with `openssl dgst -sha256 -hmac SAS_KEY_VALUE`.
func TestSignMatchesSDKEncoding(t *testing.T) {
	got := Sign("amqp://localhost:5672/orders", "RootManageSharedAccessKey", "SAS_KEY_VALUE", time.Unix(1767225600, 0))
	want := "SharedAccessSignature sr=amqp%3a%2f%2flocalhost%3a5672%2forders&sig=" +
		"nHprnNuRmT7llLmWXFhjP9MfWHC1JLen0CxA9C27qSs%3D&se=1767225600&skn=RootManageSharedAccessKey"
	if got != want {
		t.Fatalf("Sign =\n%s\nwant\n%s", got, want)
	}
}

func TestRights(t *testing.T) {
	r, err := ParseRights([]string{"Send", " listen "})
	if err != nil || r != Send|Listen || r.String() != "Send,Listen" {
		t.Fatalf("ParseRights = %v (%s), %v", r, r, err)
	}
	if _, err := ParseRights([]string{"Admin"}); err == nil || !strings.Contains(err.Error(), `"Admin"`) {
		t.Fatalf("ParseRights(Admin) error = %v", err)
	}
	if !Manage.has(Send|Listen) || Send.has(Listen) {
		t.Fatal("Manage must imply Send and Listen; Send must not imply Listen")
	}
}

func TestResourcePath(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://localhost:5672/Orders/Subscriptions/S1": "orders/subscriptions/s1",
		"sb://ns.servicebus.windows.net/":               "",
		"https://localhost:5300/q1?api-version=2024-05": "q1",
		"amqps://host": "",
		"/q1/":         "q1",
	} {
		if got := ResourcePath(in); got != want {
			t.Errorf("ResourcePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add(Sign("amqp://localhost/orders", "k", "v", now))
	f.Add("SharedAccessSignature sr=&sig=&se=&skn=")
	f.Add("SharedAccessSignature se=-1&sr=a&sig=b&skn=c")
	a, _ := NewAuthorizer([]Rule{{KeyName: "k", PrimaryKey: "v", Rights: Manage}})
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parse error not ErrMalformed: %v", err)
			}
			return
		}
		_ = a.AuthorizeToken(tok, now, "orders", Send)
	})
}

func TestResourcePathOnHost(t *testing.T) {
	for _, c := range []struct{ sr, host, want string }{
		{"ns.servicebus.windows.net", "ns.servicebus.windows.net", ""},
		{"NS.servicebus.windows.net/Orders", "ns.servicebus.windows.net:5671", "orders"},
		{"127.0.0.1:5672", "127.0.0.1:5672", ""},
		{"127.0.0.1:5672", "127.0.0.1", ""},
		{"127.0.0.1:5672", "127.0.0.1:5673", "127.0.0.1:5672"},  // another port: not this host
		{"orders.v1", "ns.servicebus.windows.net", "orders.v1"}, // an entity name with a period
		{"orders.v1", "", "orders.v1"},
		{"amqp://other/q1", "ns.servicebus.windows.net", "q1"}, // with a scheme the host is not looked at
		{"[::1]:5672/q", "[::1]", "q"},
	} {
		if got := ResourcePathOnHost(c.sr, c.host); got != c.want {
			t.Errorf("ResourcePathOnHost(%q, %q) = %q, want %q", c.sr, c.host, got, c.want)
		}
	}
}

// A token whose sr is the bare namespace host, as the SDKs sign for a
// connection string's SharedAccessSignature, covers every entity on a
// request to that host, and nothing on a request to another.
func TestAuthorizeBareHost(t *testing.T) {
	a, err := NewAuthorizer([]Rule{{KeyName: "k", PrimaryKey: "v", Rights: Send}})
	if err != nil {
		t.Fatal(err)
	}
	tok := Sign("ns.example.net", "k", "v", now.Add(time.Hour))
	for _, path := range []string{"", "orders", "topic/subscriptions/s"} {
		if err := a.AuthorizeOnHost(tok, now, "ns.example.net:5671", path, Send); err != nil {
			t.Errorf("bare-host token on %q: %v", path, err)
		}
	}
	if err := a.AuthorizeOnHost(tok, now, "other.example.net", "orders", Send); !errors.Is(err, ErrAudience) {
		t.Errorf("bare-host token on another host: %v, want ErrAudience", err)
	}
	if err := a.Authorize(tok, now, "orders", Send); !errors.Is(err, ErrAudience) {
		t.Errorf("bare-host token without a host: %v, want ErrAudience", err)
	}
}

// Rules of an entity, looked up per request, authorize requests on that
// entity (and its subscriptions) only, with their own rights.
func TestEntityRules(t *testing.T) {
	base, err := NewAuthorizer([]Rule{{KeyName: "root", PrimaryKey: "r", Rights: Manage}})
	if err != nil {
		t.Fatal(err)
	}
	a := base.WithEntityRules(func(path string) []Rule {
		if path == "orders" || strings.HasPrefix(path, "orders/") {
			return []Rule{{KeyName: "writer", PrimaryKey: "w", Rights: Send, Entity: "Orders"}}
		}
		return nil
	})
	tok := Sign("sb://ns/orders", "writer", "w", now.Add(time.Hour))
	if err := a.Authorize(tok, now, "orders", Send); err != nil {
		t.Errorf("entity rule on its entity: %v", err)
	}
	if err := a.Authorize(tok, now, "orders", Listen); !errors.Is(err, ErrNoRight) {
		t.Errorf("entity rule without Listen: %v, want ErrNoRight", err)
	}
	other := Sign("sb://ns/", "writer", "w", now.Add(time.Hour))
	if err := a.Authorize(other, now, "payments", Send); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("entity rule on another entity: %v, want ErrUnknownKey", err)
	}
	if err := base.Authorize(tok, now, "orders", Send); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the authorizer without entity rules accepted an entity key: %v", err)
	}
}

// GrantsOnHost runs Authorize's checks but the right's and returns what the
// signing rule grants, Manage expanded; every failure is Authorize's.
func TestGrantsOnHost(t *testing.T) {
	a := testAuthorizer(t)
	exp := now.Add(time.Hour)
	for _, c := range []struct {
		name    string
		token   string
		entity  string
		want    Right
		wantErr error
	}{
		{"manage grants all", Sign("amqp://localhost/", "RootManageSharedAccessKey", "root-key-2", exp), "orders", Manage | Send | Listen, nil},
		{"send only", Sign("amqp://localhost/orders", "SendOnly", "send-key", exp), "orders", Send, nil},
		{"entity rule on its entity", Sign("amqp://localhost/orders", "OrdersOnly", "orders-key", exp), "orders", Send | Listen, nil},
		{"entity rule elsewhere", Sign("amqp://localhost/", "OrdersOnly", "orders-key", exp), "invoices", 0, ErrAudience},
		{"expired", Sign("amqp://localhost/", "SendOnly", "send-key", now), "orders", 0, ErrExpired},
		{"wrong key", Sign("amqp://localhost/", "SendOnly", "nope", exp), "orders", 0, ErrBadSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := ParseToken(c.token)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.GrantsOnHost(tok, now, "", c.entity)
			if !errors.Is(err, c.wantErr) || got != c.want {
				t.Fatalf("GrantsOnHost = %v, %v; want %v, %v", got, err, c.want, c.wantErr)
			}
		})
	}
}

func TestImplied(t *testing.T) {
	for _, c := range []struct{ in, want Right }{
		{Manage, Manage | Send | Listen},
		{Send, Send},
		{Listen | Send, Listen | Send},
		{0, 0},
	} {
		if got := c.in.Implied(); got != c.want {
			t.Errorf("%s.Implied() = %s, want %s", c.in, got, c.want)
		}
	}
}
