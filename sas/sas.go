// Package sas implements Service Bus shared access signatures: the
// authorization rules of a namespace and its entities (key name, key,
// rights), signing tokens, and validating a presented token for an audience
// and a right.
//
// It is used by the AMQP claims-based-security node ($cbs) and by the HTTP
// management API. It knows nothing of AMQP, HTTP or the broker; entity paths
// are plain strings.
package sas

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Right is one access right of an authorization rule.
type Right uint8

// The rights Service Bus defines. Manage implies Send and Listen.
const (
	Send Right = 1 << iota
	Listen
	Manage
)

// String returns the right's Service Bus name, or a comma-separated list for a set.
func (r Right) String() string {
	var names []string
	for _, x := range []struct {
		r Right
		n string
	}{{Manage, "Manage"}, {Send, "Send"}, {Listen, "Listen"}} {
		if r&x.r != 0 {
			names = append(names, x.n)
		}
	}
	if len(names) == 0 {
		return "None"
	}
	return strings.Join(names, ",")
}

// ParseRights parses Service Bus right names ("Manage", "Send", "Listen"),
// case-insensitively.
func ParseRights(names []string) (Right, error) {
	var r Right
	for _, n := range names {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "manage":
			r |= Manage
		case "send":
			r |= Send
		case "listen":
			r |= Listen
		default:
			return 0, fmt.Errorf("sas: unknown right %q (want Manage, Send or Listen)", n)
		}
	}
	return r, nil
}

// Implied returns r with what it implies: Manage grants Send and Listen.
func (r Right) Implied() Right {
	if r&Manage != 0 {
		r |= Send | Listen
	}
	return r
}

// has reports whether rights grant want (Manage grants everything).
func (r Right) has(want Right) bool { return r.Implied()&want == want }

// Rule is a shared access authorization rule.
type Rule struct {
	// KeyName is the rule's name (the token's skn).
	KeyName string
	// PrimaryKey and SecondaryKey are the keys; a token signed with either is valid.
	PrimaryKey, SecondaryKey string
	// Rights granted by tokens signed with the rule's keys.
	Rights Right
	// Entity is the path of the entity the rule belongs to; empty for a
	// namespace-level rule.
	Entity string
}

// Token is a parsed shared access signature.
type Token struct {
	Resource  string    // sr, as received (URL-escaped)
	Signature string    // sig, as received (URL-escaped base64)
	Expiry    time.Time // se
	KeyName   string    // skn
	expiryRaw string
}

// Errors returned by validation. Each wraps a description a person can act on.
var (
	ErrMalformed    = errors.New("malformed shared access signature")
	ErrUnknownKey   = errors.New("unknown shared access key name")
	ErrBadSignature = errors.New("invalid signature")
	ErrExpired      = errors.New("token expired")
	ErrAudience     = errors.New("token is not valid for this resource")
	ErrNoRight      = errors.New("missing right")
)

const prefix = "SharedAccessSignature "

// ParseToken parses "SharedAccessSignature sr=…&sig=…&se=…&skn=…" (fields in any order).
func ParseToken(s string) (*Token, error) {
	if !strings.HasPrefix(s, prefix) {
		return nil, fmt.Errorf("%w: want prefix %q", ErrMalformed, strings.TrimSpace(prefix))
	}
	t := &Token{}
	for _, part := range strings.Split(s[len(prefix):], "&") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%w: field %q has no value", ErrMalformed, part)
		}
		switch k {
		case "sr":
			t.Resource = v
		case "sig":
			t.Signature = v
		case "se":
			t.expiryRaw = v
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: se=%q is not Unix seconds", ErrMalformed, v)
			}
			t.Expiry = time.Unix(n, 0).UTC()
		case "skn":
			t.KeyName = v
		}
	}
	switch {
	case t.Resource == "":
		return nil, fmt.Errorf("%w: missing sr", ErrMalformed)
	case t.Signature == "":
		return nil, fmt.Errorf("%w: missing sig", ErrMalformed)
	case t.expiryRaw == "":
		return nil, fmt.Errorf("%w: missing se", ErrMalformed)
	case t.KeyName == "":
		return nil, fmt.Errorf("%w: missing skn", ErrMalformed)
	}
	return t, nil
}

// Sign returns a token for resource (an audience URI) signed with keyName/key,
// valid until expiry, encoded exactly as the Azure SDKs do.
func Sign(resource, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := strconv.FormatInt(expiry.Unix(), 10)
	sig := url.QueryEscape(signature(key, sr, se))
	return prefix + "sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + url.QueryEscape(keyName)
}

func signature(key, sr, se string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sr + "\n" + se))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Authorizer validates tokens against a set of rules. It is immutable; build
// a new one to change the rules.
type Authorizer struct {
	rules map[string][]Rule // by key name
	// entityRules, when set, returns the rules that belong to the entity
	// a path is in (Rule.Entity set), looked up on every authorization.
	entityRules func(path string) []Rule
}

// WithEntityRules returns a copy of a that also accepts the rules of the
// entity a request is for, as f returns them for its path (normalized);
// each must have Entity set to the entity it belongs to. Service Bus's
// queues and topics carry such rules of their own.
func (a *Authorizer) WithEntityRules(f func(path string) []Rule) *Authorizer {
	c := *a
	c.entityRules = f
	return &c
}

// NewAuthorizer returns an Authorizer over rules. Key names must be non-empty
// and every rule needs a primary key.
func NewAuthorizer(rules []Rule) (*Authorizer, error) {
	a := &Authorizer{rules: map[string][]Rule{}}
	for _, r := range rules {
		if r.KeyName == "" || r.PrimaryKey == "" {
			return nil, fmt.Errorf("sas: rule %q needs a key name and a primary key", r.KeyName)
		}
		r.Entity = NormalizePath(r.Entity)
		a.rules[r.KeyName] = append(a.rules[r.KeyName], r)
	}
	return a, nil
}

// Rules returns the authorizer's rules.
func (a *Authorizer) Rules() []Rule {
	var out []Rule
	for _, rs := range a.rules {
		out = append(out, rs...)
	}
	return out
}

// Authorize validates token (the full "SharedAccessSignature …" string) at
// time now for a request on entityPath ("" for the namespace) that needs
// right. It checks, in order: syntax, key name, signature (over sr exactly as
// received), expiry, that the token's resource covers entityPath, and that
// the rule grants the right and belongs to the namespace or to that entity.
func (a *Authorizer) Authorize(token string, now time.Time, entityPath string, right Right) error {
	t, err := ParseToken(token)
	if err != nil {
		return err
	}
	return a.AuthorizeToken(t, now, entityPath, right)
}

// AuthorizeToken is Authorize for a parsed token.
func (a *Authorizer) AuthorizeToken(t *Token, now time.Time, entityPath string, right Right) error {
	return a.AuthorizeTokenOnHost(t, now, "", entityPath, right)
}

// AuthorizeOnHost is Authorize for a request that reached the broker as
// host (the AMQP open's hostname, the HTTP Host): a token whose sr is that
// bare host name, without a scheme, covers the whole namespace, as the SDKs
// sign a shared access signature for a connection string
// (SharedAccessSignature=…, sr = the fully qualified namespace).
func (a *Authorizer) AuthorizeOnHost(token string, now time.Time, host, entityPath string, right Right) error {
	t, err := ParseToken(token)
	if err != nil {
		return err
	}
	return a.AuthorizeTokenOnHost(t, now, host, entityPath, right)
}

// AuthorizeTokenOnHost is AuthorizeOnHost for a parsed token.
func (a *Authorizer) AuthorizeTokenOnHost(t *Token, now time.Time, host, entityPath string, right Right) error {
	rule, err := a.verify(t, now, host, entityPath)
	if err != nil {
		return err
	}
	if !rule.Rights.has(right) {
		return fmt.Errorf("%w: rule %q grants %s, the operation needs %s", ErrNoRight, rule.KeyName, rule.Rights, right)
	}
	return nil
}

// GrantsOnHost is AuthorizeTokenOnHost for a request whose right is not
// known yet (a $cbs put-token): it runs every other check once, one
// signature per key of the candidate rules, and returns the rights the
// token's rule grants, Manage expanded to Send and Listen.
func (a *Authorizer) GrantsOnHost(t *Token, now time.Time, host, entityPath string) (Right, error) {
	rule, err := a.verify(t, now, host, entityPath)
	if err != nil {
		return 0, err
	}
	return rule.Rights.Implied(), nil
}

// verify runs every check of AuthorizeTokenOnHost but the right's and
// returns the rule that signed t.
func (a *Authorizer) verify(t *Token, now time.Time, host, entityPath string) (*Rule, error) {
	keyName, err := url.QueryUnescape(t.KeyName)
	if err != nil {
		return nil, fmt.Errorf("%w: skn %q", ErrMalformed, t.KeyName)
	}
	path := NormalizePath(entityPath)
	candidates := a.rules[keyName]
	if a.entityRules != nil && path != "" {
		for _, r := range a.entityRules(path) {
			if r.KeyName == keyName && r.Entity != "" {
				r.Entity = NormalizePath(r.Entity)
				candidates = append(candidates[:len(candidates):len(candidates)], r)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKey, keyName)
	}
	sig, err := url.QueryUnescape(t.Signature)
	if err != nil {
		return nil, fmt.Errorf("%w: sig is not URL-encoded", ErrMalformed)
	}
	var rule *Rule
	for i := range candidates {
		r := &candidates[i]
		for _, k := range []string{r.PrimaryKey, r.SecondaryKey} {
			if k != "" && hmac.Equal([]byte(signature(k, t.Resource, t.expiryRaw)), []byte(sig)) {
				rule = r
			}
		}
	}
	if rule == nil {
		return nil, fmt.Errorf("%w for key %q: the token was not signed with this rule's key", ErrBadSignature, keyName)
	}
	if !now.Before(t.Expiry) {
		return nil, fmt.Errorf("%w: expired at %s (now %s)", ErrExpired, t.Expiry.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	res, err := url.QueryUnescape(t.Resource)
	if err != nil {
		return nil, fmt.Errorf("%w: sr is not URL-encoded", ErrMalformed)
	}
	if !covers(ResourcePathOnHost(res, host), path) {
		return nil, fmt.Errorf("%w: token resource %q does not cover %q", ErrAudience, res, entityPath)
	}
	if rule.Entity != "" && !covers(rule.Entity, path) {
		return nil, fmt.Errorf("%w: rule %q belongs to entity %q, not %q", ErrAudience, keyName, rule.Entity, entityPath)
	}
	return rule, nil
}

// covers reports whether the resource path prefix covers path, on whole
// segments: "orders" covers "orders" and "orders/subscriptions/s" but not "orders2".
func covers(prefix, path string) bool {
	if prefix == "" {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// ResourcePath returns the entity path of an audience URI: the scheme and
// host are dropped (sb, amqp, amqps, http and https are equivalent, and the
// host is not checked, so a broker is reachable under any name), then the
// path is normalized. A bare path is accepted too.
func ResourcePath(audience string) string {
	s := audience
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexByte(s, '/'); j >= 0 {
			s = s[j:]
		} else {
			s = ""
		}
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	return NormalizePath(s)
}

// ResourcePathOnHost is ResourcePath for a token's resource on a request
// that reached the broker as host: a resource without a scheme whose first
// segment is host (compared case-insensitively, with or without the port on
// either side) names the namespace, and what follows it the entity path.
// With host empty it is ResourcePath.
func ResourcePathOnHost(resource, host string) string {
	if host != "" && !strings.Contains(resource, "://") {
		first, rest, _ := strings.Cut(resource, "/")
		if sameHost(first, host) {
			return ResourcePath(rest)
		}
	}
	return ResourcePath(resource)
}

// sameHost compares host names, ignoring a port one of them lacks.
func sameHost(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if strings.EqualFold(a, b) {
		return true
	}
	ha, pa := splitPort(a)
	hb, pb := splitPort(b)
	return strings.EqualFold(ha, hb) && (pa == "" || pb == "" || pa == pb)
}

// splitPort splits "host:port" (or "[v6]:port"); the port is "" when absent.
func splitPort(h string) (string, string) {
	i := strings.LastIndexByte(h, ':')
	if i < 0 || strings.HasSuffix(h, "]") {
		return strings.Trim(h, "[]"), ""
	}
	if strings.Count(h, ":") > 1 && !strings.HasPrefix(h, "[") {
		return h, "" // a bare IPv6 address
	}
	return strings.Trim(h[:i], "[]"), h[i+1:]
}

// NormalizePath lower-cases an entity path and trims slashes, so paths compare
// as Service Bus compares them (case-insensitively).
func NormalizePath(p string) string {
	return strings.ToLower(strings.Trim(p, "/"))
}
