package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/busbar-io/busbar/sas"
)

// cookieName names the console's session cookie.
const cookieName = "busbar_console"

// csrfHeader carries a session's CSRF token on every request that changes
// something. A cross-site page can neither read the token nor set the header.
const csrfHeader = "X-Busbar-Csrf"

// maxSessions bounds the sign-in sessions kept; the oldest is dropped.
const maxSessions = 1000

// session is a signed-in browser.
type session struct {
	id, csrf string
	keyName  string
	entity   string // the entity an entity-level key was given for
	token    string // a SAS token signed with the key; the key is not kept
	expires  time.Time
}

// sessions are the console's sign-in sessions.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func (s *sessions) add(x *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		var oldest *session
		for _, y := range s.m {
			if oldest == nil || y.expires.Before(oldest.expires) {
				oldest = y
			}
		}
		delete(s.m, oldest.id)
	}
	s.m[x.id] = x
}

func (s *sessions) get(id string, now time.Time) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.m[id]
	if x != nil && !now.Before(x.expires) {
		delete(s.m, id)
		return nil
	}
	return x
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// randomID returns 32 random bytes, base64url-encoded.
func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// credentials are what a user signs in with.
type credentials struct {
	ConnectionString string `json:"connectionString"`
	KeyName          string `json:"keyName"`
	Key              string `json:"key"`
	EntityPath       string `json:"entityPath"`
}

// resolve fills KeyName, Key and EntityPath from the connection string.
func (c *credentials) resolve() error {
	if c.ConnectionString == "" {
		if c.KeyName == "" || c.Key == "" {
			return badRequest("sign in with a connection string, or with a key name and a key")
		}
		return nil
	}
	cs := sas.ParseConnectionString(c.ConnectionString)
	// A connection string is the whole credential: the key fields it lacks stay empty.
	c.KeyName, c.Key, c.EntityPath = cs.KeyName, cs.Key, cs.EntityPath
	if c.KeyName == "" || c.Key == "" {
		return badRequest("the connection string has no SharedAccessKeyName and SharedAccessKey")
	}
	return nil
}

// principal is who makes a request: a session's token, or a token sent
// in the Authorization header.
type principal struct {
	token   string
	keyName string
	entity  string
	sess    *session
}

// signIn checks the credentials against the namespace's rules and opens a
// session; it answers who signed in.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) error {
	var cr credentials
	if err := readJSON(r, &cr); err != nil {
		return err
	}
	if err := cr.resolve(); err != nil {
		return err
	}
	now := c.now()
	expires := now.Add(c.o.SessionLifetime)
	entity := sas.NormalizePath(cr.EntityPath)
	tok := sas.Sign("sb://busbar/"+entity, cr.KeyName, cr.Key, expires)
	p := &principal{token: tok, keyName: cr.KeyName, entity: entity}
	if c.rights(p, entity) == 0 {
		// Say why, without telling a wrong key from a wrong name.
		err := c.o.Authorizer.Authorize(tok, now, entity, sas.Listen)
		c.log.Info("console sign-in refused", "key", cr.KeyName, "err", err)
		if errors.Is(err, sas.ErrUnknownKey) || errors.Is(err, sas.ErrBadSignature) {
			return httpError(http.StatusUnauthorized, "the key name or the key is wrong")
		}
		return httpError(http.StatusUnauthorized, "this key grants no right here: %v", err)
	}
	s := &session{id: randomID(), csrf: randomID(), keyName: cr.KeyName, entity: entity, token: tok, expires: expires}
	c.sess.add(s)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.id, Path: Prefix, Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.log.Info("console sign-in", "key", cr.KeyName)
	p.sess = s
	return writeJSON(w, c.who(p))
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, p *principal) error {
	if p.sess != nil {
		c.sess.remove(p.sess.id)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return writeJSON(w, map[string]bool{"signedOut": true})
}

// whoAmI is what the UI learns of the signed-in key.
type whoAmI struct {
	KeyName string   `json:"keyName"`
	Entity  string   `json:"entity,omitempty"`
	Rights  []string `json:"rights"`
	CSRF    string   `json:"csrf,omitempty"`
	Expires string   `json:"expires,omitempty"`
}

func (c *Console) who(p *principal) whoAmI {
	wa := whoAmI{KeyName: p.keyName, Entity: p.entity, Rights: rightNames(c.rights(p, p.entity))}
	if p.sess != nil {
		wa.CSRF, wa.Expires = p.sess.csrf, p.sess.expires.Format(time.RFC3339)
	}
	return wa
}

func rightNames(r sas.Right) []string {
	out := []string{}
	for _, x := range []sas.Right{sas.Listen, sas.Send, sas.Manage} {
		if r&x != 0 || r&sas.Manage != 0 {
			out = append(out, x.String())
		}
	}
	return out
}

// authenticate finds the request's principal: the session cookie (with the
// CSRF header on every method but GET and HEAD), or an Authorization
// header.
func (c *Console) authenticate(r *http.Request) (*principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		t, err := sas.ParseToken(h)
		if err != nil {
			return nil, httpError(http.StatusUnauthorized, "%v", err)
		}
		return &principal{token: h, keyName: t.KeyName}, nil
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, httpError(http.StatusUnauthorized, "sign in first")
	}
	s := c.sess.get(ck.Value, c.now())
	if s == nil {
		return nil, httpError(http.StatusUnauthorized, "the session has ended: sign in again")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(s.csrf)) != 1 {
			return nil, httpError(http.StatusForbidden, "the request lacks the console's CSRF token")
		}
	}
	return &principal{token: s.token, keyName: s.keyName, entity: s.entity, sess: s}, nil
}

// rights returns the rights the principal holds on path.
func (c *Console) rights(p *principal, path string) sas.Right {
	var r sas.Right
	for _, x := range []sas.Right{sas.Manage, sas.Send, sas.Listen} {
		if c.o.Authorizer.Authorize(p.token, c.now(), path, x) == nil {
			r |= x
		}
	}
	return r
}

// need checks that the principal holds right on path.
func (c *Console) need(p *principal, path string, right sas.Right) error {
	if err := c.o.Authorizer.Authorize(p.token, c.now(), path, right); err != nil {
		return httpError(http.StatusForbidden, "the key %q may not do this on %q: it needs the %s right (%v)", p.keyName, displayPath(path), right, err)
	}
	return nil
}

func displayPath(p string) string {
	if p == "" {
		return "the namespace"
	}
	return p
}
