package admin

import (
	"errors"
	"net/http"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// serviceText is an error whose text is the service's own, written to the
// <Detail> without a SubCode prefix (clients and Microsoft's tests match
// the text from its start).
type serviceText struct{ he *httpError }

func (e *serviceText) Error() string { return e.he.Error() }
func (e *serviceText) Unwrap() error { return e.he }

// noManage answers a request signed with a valid key that lacks the Manage
// right as Service Bus does: 401 with the service's texts for reads,
// listings, writes and deletes (the Go SDK's own tests match them), except
// that reading a queue, topic or subscription that does not exist stays
// "not found" (nil: serve the request, which finds nothing).
func (h *handler) noManage(r *http.Request, rt route) error {
	status := http.StatusUnauthorized
	text := func(s string) error {
		return &serviceText{&httpError{status: status, err: errors.New(s)}}
	}
	sub := rt.kind == routeSubscription || rt.kind == routeSubscriptions
	switch r.Method {
	case http.MethodGet:
		if rt.kind == routeEntity || rt.kind == routeSubscription {
			if h.o.Broker != nil && !h.exists(r, rt) {
				return nil
			}
		}
		switch {
		case rt.kind == routeSubscription:
			return text("Unauthorized access for 'GetSubscription' operation on endpoint. Manage claim required for this operation.")
		case rt.kind == routeSubscriptions:
			return text("Unauthorized access for 'EnumerateSubscriptions' operation on endpoint. Manage claim required for this operation.")
		}
		return text("Manage,EntityRead claims required for this operation.")
	case http.MethodPut:
		if sub {
			return text("Unauthorized access for 'CreateOrUpdateSubscription' operation on endpoint. Manage claim required for this operation.")
		}
		return text("Authorization failed for specified action: Manage,EntityWrite.")
	case http.MethodDelete:
		if sub {
			return text("Unauthorized access for 'DeleteSubscription' operation on endpoint. Manage claim required for this operation.")
		}
		return text("Authorization failed for specified action: Manage,EntityDelete.")
	}
	return text("Authorization failed for specified action: Manage.")
}

// exists reports whether the queue, topic or subscription a route names
// exists.
func (h *handler) exists(r *http.Request, rt route) bool {
	ctx := r.Context()
	if rt.kind == routeSubscription {
		_, err := h.o.Broker.GetSubscription(ctx, rt.entity, rt.sub)
		return !errors.Is(err, broker.ErrNotFound)
	}
	if _, err := h.o.Broker.GetQueue(ctx, rt.entity); !errors.Is(err, broker.ErrNotFound) {
		return true
	}
	_, err := h.o.Broker.GetTopic(ctx, rt.entity)
	return !errors.Is(err, broker.ErrNotFound)
}

// isNoManage reports whether err is a valid token without the Manage right.
func isNoManage(err error) bool { return errors.Is(err, sas.ErrNoRight) }
