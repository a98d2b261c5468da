package conformance

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/sas"
)

var namespaceSASQueue = declareQueue("nssas", admin.QueueProperties{})

// TestNamespaceSAS: a connection string carrying a shared access signature
// whose sr is the bare namespace host (what the SDKs' own helper produces
// from a key, and what Microsoft's live tests use) sends and receives on any
// entity of the namespace.
func TestNamespaceSAS(t *testing.T) {
	t.Parallel()
	q := namespaceSASQueue.create(t)
	cs := namespaceSASConnectionString(t, suite.connStr, time.Now().Add(time.Hour))
	c := newClientFor(t, cs)
	send(t, newSender(t, c, q), textMessage("signed for the namespace"))
	m := receiveOne(t, newQueueReceiver(t, c, q, nil))
	if string(m.Body) != "signed for the namespace" {
		t.Fatalf("received %q", m.Body)
	}
}

// namespaceSASConnectionString turns a key connection string into one with
// a SharedAccessSignature for sr = the namespace host, signed as the SDKs
// sign (HMAC-SHA256 of the URL-escaped sr, a newline and the expiry).
func namespaceSASConnectionString(t *testing.T, cs string, expiry time.Time) string {
	t.Helper()
	p := sas.ParseConnectionString(cs)
	host := strings.TrimSuffix(strings.TrimPrefix(p.Endpoint, "sb://"), "/")
	keyName, key := p.KeyName, p.Key
	if host == "" || keyName == "" || key == "" {
		t.Fatalf("connection string has no endpoint, key name or key")
	}
	sr := strings.ToLower(url.QueryEscape(host))
	se := fmt.Sprint(expiry.Unix())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	token := "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + url.QueryEscape(keyName)
	out := "Endpoint=sb://" + host + "/;SharedAccessSignature=" + token
	if p.Emulator {
		out += ";UseDevelopmentEmulator=true"
	}
	return out
}
