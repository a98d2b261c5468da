package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// httpError is an error with the HTTP status the management API answers.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

// withStatus attaches an explicit status to err.
func withStatus(status int, format string, args ...any) error {
	return &httpError{status: status, err: fmt.Errorf(format, args...)}
}

// statusOf maps an error to the status Service Bus answers with:
// 400 for malformed input, 401/403 for authorization, 404, 409, 413, 503
// while the broker is closed, 500 for anything else.
func statusOf(err error) int {
	var he *httpError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadRequest), errors.Is(err, broker.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, sas.ErrNoRight):
		return http.StatusForbidden
	case errors.Is(err, sas.ErrMalformed), errors.Is(err, sas.ErrUnknownKey), errors.Is(err, sas.ErrBadSignature),
		errors.Is(err, sas.ErrExpired), errors.Is(err, sas.ErrAudience):
		return http.StatusUnauthorized
	case errors.Is(err, broker.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, broker.ErrAlreadyExists):
		return http.StatusConflict
	case errors.Is(err, broker.ErrQuotaExceeded):
		return http.StatusForbidden
	case errors.Is(err, broker.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// subCode is the Service Bus sub-code some clients look for in the detail
// (the JS client tells "already exists" from other conflicts by it).
func subCode(status int, err error) string {
	switch {
	case status == http.StatusUnauthorized:
		return "SubCode=40100. "
	case status == http.StatusForbidden && errors.Is(err, sas.ErrNoRight):
		return "SubCode=40300. "
	case status == http.StatusNotFound:
		return "SubCode=40400. "
	case status == http.StatusConflict && errors.Is(err, broker.ErrAlreadyExists):
		return "SubCode=40900. "
	case status == http.StatusRequestEntityTooLarge:
		return "SubCode=41300. "
	}
	return ""
}

// writeError answers with the <Error> body the clients parse.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	detail := err.Error()
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		detail = "the request body is larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	}
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelError
	}
	h.log.Log(r.Context(), level, "management request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", detail)
	var x writer
	x.open("Error")
	x.int("Code", int64(status))
	var st *serviceText
	if !errors.As(err, &st) {
		detail = subCode(status, err) + detail
	}
	x.text("Detail", detail)
	x.close("Error")
	if st != nil && st.reason != "" && writeWithReason(w, status, st.reason, x.b.Bytes()) {
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(x.b.Bytes())
}
