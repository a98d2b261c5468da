package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// serviceText is an error whose text is the service's own, written to the
// <Detail> without a SubCode prefix (clients and Microsoft's tests match
// the text from its start).
type serviceText struct {
	he *httpError
	// reason, when set, replaces the status line's reason phrase, as the
	// service's own ("401 SubCode=40100: Unauthorized : …"), which clients
	// show in their errors.
	reason string
}

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
		return &serviceText{he: &httpError{status: status, err: errors.New(s)}}
	}
	// Subscriptions answer with the operation's name, in the reason
	// phrase too, whether or not the subscription exists.
	subText := func(op string) error {
		s := "Unauthorized access for '" + op + "' operation on endpoint. Manage claim required for this operation."
		return &serviceText{he: &httpError{status: status, err: errors.New(s)}, reason: "SubCode=40100: Unauthorized : " + s}
	}
	sub := rt.kind == routeSubscription || rt.kind == routeSubscriptions
	switch r.Method {
	case http.MethodGet:
		switch rt.kind {
		case routeSubscription:
			return subText("GetSubscription")
		case routeSubscriptions:
			return subText("EnumerateSubscriptions")
		case routeEntity:
			if h.o.Broker != nil && !h.exists(r, rt) {
				return nil
			}
		}
		return text("Manage,EntityRead claims required for this operation.")
	case http.MethodPut:
		if sub {
			return subText("CreateOrUpdateSubscription")
		}
		return text("Authorization failed for specified action: Manage,EntityWrite.")
	case http.MethodDelete:
		if sub {
			return subText("DeleteSubscription")
		}
		return text("Authorization failed for specified action: Manage,EntityDelete.")
	}
	return text("Authorization failed for specified action: Manage.")
}

// exists reports whether the queue or topic a route names exists.
func (h *handler) exists(r *http.Request, rt route) bool {
	ctx := r.Context()
	if _, err := h.o.Broker.GetQueue(ctx, rt.entity); !errors.Is(err, broker.ErrNotFound) {
		return true
	}
	_, err := h.o.Broker.GetTopic(ctx, rt.entity)
	return !errors.Is(err, broker.ErrNotFound)
}

// writeWithReason answers with a status line carrying reason as its reason
// phrase, which net/http cannot set: it takes over the connection (HTTP/1.x
// only), writes the whole response and closes it. It reports false, having
// written nothing, when the connection cannot be taken over.
func writeWithReason(w http.ResponseWriter, status int, reason string, body []byte) bool {
	rc := http.NewResponseController(w)
	conn, buf, err := rc.Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	reason = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/xml; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, reason, len(body))
	_, _ = buf.Write(body)
	_ = buf.Flush()
	return true
}

// isNoManage reports whether err is a valid token without the Manage right.
func isNoManage(err error) bool { return errors.Is(err, sas.ErrNoRight) }
