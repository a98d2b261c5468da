package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// Prefix is where the console is served.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// Counters reads the running totals of messages in and out of every
// entity (by entity path), for the console's rates; admin.Metrics does.
type Counters func() (in, out map[string]float64)

// Options configure the console.
type Options struct {
	// Broker is the broker the console manages (required).
	Broker *broker.Broker
	// Authorizer checks sign-ins and every request (required).
	Authorizer *sas.Authorizer
	// Counters feeds the in/out rates; nil shows backlog only.
	Counters Counters
	// AMQPAddr is the broker's plain AMQP listener ("host:port"), which the
	// Toolkit's operations connect to.
	AMQPAddr string
	// Toolkit carries out the toolkit's own operations (pause, resume and
	// trigger a schedule; resubmit a failed pipeline job). Nil shows the
	// toolkit's state without them.
	Toolkit Toolkit
	// Now reads the time for tokens and samples (default time.Now).
	Now func() time.Time
	// SampleEvery is the interval of the per-entity samples (default 10 s);
	// the console keeps the last hour of them.
	SampleEvery time.Duration
	// SessionLifetime bounds a sign-in session (default 12 h).
	SessionLifetime time.Duration
	// MaxBodyBytes bounds request bodies (default 4 MiB).
	MaxBodyBytes int64
	// Logger receives sign-ins and failures, never a key or token
	// (default slog.Default()).
	Logger *slog.Logger
}

// Console is the web console's handler. Close stops its sampler and jobs.
type Console struct {
	o      Options
	b      *broker.Broker
	log    *slog.Logger
	static http.Handler
	api    *http.ServeMux
	sess   sessions
	stats  *sampler
	jobs   *jobs
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the console and starts its sampler.
func New(o Options) (*Console, error) {
	if o.Broker == nil || o.Authorizer == nil {
		return nil, errors.New("console: Options.Broker and Options.Authorizer are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 10 * time.Second
	}
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = 12 * time.Hour
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	c := &Console{o: o, b: o.Broker, log: o.Logger, static: http.FileServerFS(sub), api: http.NewServeMux()}
	c.sess.m = map[string]*session{}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.stats = newSampler(int(time.Hour / o.SampleEvery))
	c.jobs = newJobs()
	c.routes()
	c.wg.Add(1)
	go c.sample()
	return c, nil
}

// Close stops the sampler and the running jobs and waits for them.
func (c *Console) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Console) now() time.Time { return c.o.Now() }

// handlerFunc is an API handler: it writes its answer or returns an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *principal) error

func (c *Console) routes() {
	c.api.HandleFunc("POST /ui/api/signin", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, c.o.MaxBodyBytes)
		err := sameOrigin(r)
		if err == nil {
			err = c.signIn(w, r)
		}
		c.fail(w, r, err)
	})
	h := func(pattern string, f handlerFunc) {
		c.api.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, c.o.MaxBodyBytes)
			err := sameOrigin(r)
			var p *principal
			if err == nil {
				p, err = c.authenticate(r)
			}
			if err == nil {
				err = f(w, r, p)
			}
			c.fail(w, r, err)
		})
	}
	h("POST /ui/api/signout", c.signOut)
	h("GET /ui/api/me", func(w http.ResponseWriter, r *http.Request, p *principal) error {
		return writeJSON(w, c.who(p))
	})
	h("GET /ui/api/tree", c.tree)
	h("GET /ui/api/entity", c.getEntity)
	h("GET /ui/api/defaults", c.getDefaults)
	h("POST /ui/api/entity", c.putEntity)
	h("DELETE /ui/api/entity", c.deleteEntity)
	h("GET /ui/api/stats", c.entityStats)
	h("POST /ui/api/rule", c.putRule)
	h("DELETE /ui/api/rule", c.deleteRule)
	h("POST /ui/api/validate", c.validate)
	h("GET /ui/api/messages", c.messages)
	h("POST /ui/api/send", c.send)
	h("POST /ui/api/receive", c.receive)
	h("POST /ui/api/cancel", c.cancelScheduled)
	h("GET /ui/api/deadletters", c.deadLetterReasons)
	h("POST /ui/api/jobs", c.startJob)
	h("GET /ui/api/jobs", c.getJob)
	h("GET /ui/api/sessions", c.listSessions)
	h("GET /ui/api/session", c.getSession)
	h("POST /ui/api/session", c.setSession)
	h("GET /ui/api/toolkit", c.toolkit)
	h("POST /ui/api/toolkit", c.toolkitAction)
}

// ServeHTTP serves the assets under Prefix and the API under Prefix+"api/".
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// Nothing but the broker: no script, style, font or image from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	switch {
	case r.URL.Path == "/ui":
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	case strings.HasPrefix(r.URL.Path, Prefix+"api/"):
		h.Set("Cache-Control", "no-store")
		c.api.ServeHTTP(w, r)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		http.StripPrefix(strings.TrimSuffix(Prefix, "/"), c.static).ServeHTTP(w, r)
	}
}

// sameOrigin refuses a request another site's page may have sent: one
// whose Origin is not this host, and a POST that is not JSON (an HTML form
// cannot send JSON, and a script of another origin cannot without the CORS
// preflight the console never grants).
func sameOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return httpError(http.StatusForbidden, "the request comes from another origin (%s)", o)
		}
	}
	if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return httpError(http.StatusUnsupportedMediaType, "send the request as application/json")
	}
	return nil
}

// statusError is an error with the HTTP status to answer.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func httpError(status int, format string, args ...any) error {
	return &statusError{status, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return httpError(http.StatusBadRequest, format, args...)
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	var se *statusError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &se):
		return se.status
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrMessageSizeExceeded),
		errors.Is(err, broker.ErrSessionRequired):
		return http.StatusBadRequest
	case errors.Is(err, broker.ErrNotFound), errors.Is(err, broker.ErrMessageNotFound):
		return http.StatusNotFound
	case errors.Is(err, broker.ErrAlreadyExists), errors.Is(err, broker.ErrSessionCannotBeLocked),
		errors.Is(err, broker.ErrSessionLockLost), errors.Is(err, broker.ErrLockLost):
		return http.StatusConflict
	case errors.Is(err, broker.ErrQuotaExceeded), errors.Is(err, broker.ErrEntityDisabled):
		return http.StatusForbidden
	case errors.Is(err, broker.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail writes err, if any, as {"error": "..."}.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	if err == nil {
		return
	}
	st := statusOf(err)
	if st >= 500 {
		c.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(st)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	return json.NewEncoder(w).Encode(v)
}

func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badRequest("reading the request: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badRequest("the request is not the JSON expected: %v", err)
	}
	return nil
}
