package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// DefaultMaxBodyBytes bounds a management request body (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// APIVersions are the values of the api-version query parameter accepted:
// those the official clients send. A request without one is served as the
// newest.
var APIVersions = []string{"2017-04", "2021-05", "2024-05"}

// Options configure the management handler.
type Options struct {
	// Broker serves the entity operations. Without one every management
	// request answers 503 and /readyz reports unhealthy.
	Broker Backend
	// Authorizer validates the SharedAccessSignature of every management
	// request, which needs the Manage right. Nil refuses every management
	// request with 401.
	Authorizer *sas.Authorizer
	// Now reads the time for token expiry and timestamps (default time.Now).
	Now func() time.Time
	// Metrics is served on /metrics; nil serves no /metrics.
	Metrics *Metrics
	// EnablePprof serves net/http/pprof under /debug/pprof/.
	EnablePprof bool
	// Logger receives request failures (default slog.Default()).
	Logger *slog.Logger
	// NamespaceName is reported by GET /$namespaceinfo and as the author of
	// entries (default "busbar").
	NamespaceName string
	// CreatedAt is the namespace's creation time (default: when NewHandler ran).
	CreatedAt time.Time
	// SKU is the namespace's tier, "Premium" (default) or "Standard": it is
	// reported by GET /$namespaceinfo, and on Standard a partitioned queue
	// or topic reports 16 partitions' worth of MaxSizeInMegabytes, as the
	// service does.
	SKU string
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Ready reports whether the broker is open, for /readyz and /health.
	// By default the broker is asked: it is ready until it answers
	// broker.ErrClosed.
	Ready func() error
}

type handler struct {
	o   Options
	log *slog.Logger
	mux *http.ServeMux // observability endpoints
}

// NewHandler returns the HTTP handler of the management plane, to mount at
// the root of the management listener:
//
//   - the ATOM management API (every request carrying api-version, and every
//     path that is not an observability endpoint);
//   - GET /healthz (process up), /readyz and /health (broker open), as JSON;
//   - GET /metrics (Prometheus) when Options.Metrics is set;
//   - /debug/pprof/ when Options.EnablePprof is set.
//
// An observability path with an api-version query is an entity of that
// name (a queue may be called "health").
func NewHandler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.NamespaceName == "" {
		o.NamespaceName = "busbar"
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = o.Now()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &handler{o: o, log: o.Logger, mux: http.NewServeMux()}
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, nil, "healthy", "Service is healthy.")
	})
	h.mux.HandleFunc("/readyz", h.ready)
	h.mux.HandleFunc("/health", h.ready)
	if o.Metrics != nil {
		h.mux.Handle("/metrics", o.Metrics.Handler())
	}
	if o.EnablePprof {
		h.mux.HandleFunc("/debug/pprof/", pprof.Index)
		h.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		h.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		h.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		h.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return h
}

// isOpsPath reports whether path is an observability endpoint.
func (h *handler) isOpsPath(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/health":
		return true
	case "/metrics":
		return h.o.Metrics != nil
	}
	return h.o.EnablePprof && strings.HasPrefix(path, "/debug/pprof/")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("api-version") && h.isOpsPath(r.URL.Path) {
		h.mux.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	rt, status := h.serveATOM(w, r)
	if h.o.Metrics != nil {
		h.o.Metrics.observeRequest(rt.kind.String(), r.Method, status, time.Since(start))
	}
}

// serveATOM serves one management request and returns its route and status.
func (h *handler) serveATOM(w http.ResponseWriter, r *http.Request) (route, int) {
	rt, err := parseRoute(r.URL.Path)
	if err == nil {
		err = h.checkRequest(r, rt)
	}
	if err == nil && h.o.Broker == nil {
		err = withStatus(http.StatusServiceUnavailable, "the broker is not open")
	}
	if err != nil {
		h.writeError(w, r, err)
		return rt, statusOf(err)
	}
	c := &call{h: h, w: w, r: r, rt: rt, status: http.StatusOK}
	if err := c.serve(); err != nil {
		h.writeError(w, r, err)
		return rt, statusOf(err)
	}
	return rt, c.status
}

// checkRequest validates the api-version, the SAS token and the method.
func (h *handler) checkRequest(r *http.Request, rt route) error {
	if v := r.URL.Query().Get("api-version"); v != "" && !knownVersion(v) {
		return badRequestf("api-version %q is not supported; use one of %s", truncate(v, 40), strings.Join(APIVersions, ", "))
	}
	token := r.Header.Get("Authorization")
	if token == "" {
		return withStatus(http.StatusUnauthorized, "the Authorization header is missing: send a SharedAccessSignature token for the request URL, signed with a key that has the Manage right")
	}
	if h.o.Authorizer == nil {
		return withStatus(http.StatusUnauthorized, "no shared access rules are configured, so no token can be valid")
	}
	if err := h.o.Authorizer.AuthorizeOnHost(token, h.o.Now(), r.Host, strings.Trim(r.URL.Path, "/"), sas.Manage); err != nil {
		if isNoManage(err) && rt.allows(r.Method) {
			return h.noManage(r, rt)
		}
		return err
	}
	if !rt.allows(r.Method) {
		return withStatus(http.StatusMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path)
	}
	return nil
}

func knownVersion(v string) bool {
	for _, k := range APIVersions {
		if v == k {
			return true
		}
	}
	return false
}

// readBody reads a bounded request body.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, badRequestf("reading the request body: %v", err)
	}
	if len(body) == 0 {
		return nil, badRequestf("the request body is empty; send an Atom <entry> with the description")
	}
	return body, nil
}

// ready answers /readyz and /health.
func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	var err error
	switch {
	case h.o.Broker == nil:
		err = errors.New("the broker is not open")
	case h.o.Ready != nil:
		err = h.o.Ready()
	default:
		err = brokerOpen(r.Context(), h.o.Broker)
	}
	if err != nil {
		writeHealth(w, err, "unhealthy", "Service is unhealthy: "+err.Error())
		return
	}
	writeHealth(w, nil, "healthy", "Service is healthy.")
}

// readinessProbe is a name no entity can have: looking it up only tells
// whether the broker is open.
const readinessProbe = "$readiness-probe"

// brokerOpen reports broker.ErrClosed once the broker is closed.
func brokerOpen(ctx context.Context, b Backend) error {
	if _, err := b.GetQueue(ctx, readinessProbe); errors.Is(err, broker.ErrClosed) {
		return errors.New("the broker is closed")
	}
	return nil
}

// writeHealth writes the emulator's health JSON: 200 when err is nil, 503 otherwise.
func writeHealth(w http.ResponseWriter, err error, status, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}{status, message})
}
