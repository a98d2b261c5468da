package admin

import (
	"net/http"
	"strings"
)

// routeKind is what a management path addresses.
type routeKind uint8

const (
	routeUnknown       routeKind = iota
	routeNamespace               // /$namespaceinfo
	routeQueues                  // /$Resources/Queues
	routeTopics                  // /$Resources/Topics
	routeEntity                  // /{queue or topic}
	routeSubscriptions           // /{topic}/Subscriptions
	routeSubscription            // /{topic}/Subscriptions/{sub}
	routeRules                   // /{topic}/Subscriptions/{sub}/Rules
	routeRule                    // /{topic}/Subscriptions/{sub}/Rules/{rule}
)

var routeNames = [...]string{
	routeUnknown: "unknown", routeNamespace: "namespace", routeQueues: "list_queues", routeTopics: "list_topics",
	routeEntity: "entity", routeSubscriptions: "list_subscriptions", routeSubscription: "subscription",
	routeRules: "list_rules", routeRule: "rule",
}

// String names the route for metrics.
func (k routeKind) String() string { return routeNames[k] }

// route is a parsed management path.
type route struct {
	kind              routeKind
	entity, sub, rule string
}

// allows reports whether the method applies to the route. A PUT on a
// subscription's Rules collection creates a rule named by the body (the Go
// client sends CreateRule without a name that way).
func (rt route) allows(method string) bool {
	switch rt.kind {
	case routeNamespace, routeQueues, routeTopics, routeSubscriptions:
		return method == http.MethodGet
	case routeRules:
		return method == http.MethodGet || method == http.MethodPut
	case routeEntity, routeSubscription, routeRule:
		return method == http.MethodGet || method == http.MethodPut || method == http.MethodDelete
	}
	return false
}

// parseRoute parses a request path. Queue and topic names may contain '/',
// but never a "Subscriptions" or "Rules" segment, so the first
// "Subscriptions" segment splits the topic from the subscription.
func parseRoute(path string) (route, error) {
	s := strings.TrimPrefix(path, "/")
	rt := route{}
	s = strings.TrimSuffix(s, "/")
	switch {
	case s == "":
		return rt, withStatus(http.StatusNotFound, "no entity path: address /$namespaceinfo, /$Resources/Queues, /$Resources/Topics or an entity")
	case strings.EqualFold(s, "$namespaceinfo"):
		rt.kind = routeNamespace
		return rt, nil
	case strings.EqualFold(s, "$Resources/Queues"):
		rt.kind = routeQueues
		return rt, nil
	case strings.EqualFold(s, "$Resources/Topics"):
		rt.kind = routeTopics
		return rt, nil
	}
	segs := strings.Split(s, "/")
	i := 1
	for i < len(segs) && !strings.EqualFold(segs[i], "Subscriptions") {
		i++
	}
	rt.entity = strings.Join(segs[:i], "/")
	rest := segs[min(i+1, len(segs)):]
	switch {
	case i == len(segs):
		rt.kind = routeEntity
	case len(rest) == 0:
		rt.kind = routeSubscriptions
	case len(rest) == 1:
		rt.kind, rt.sub = routeSubscription, rest[0]
	case len(rest) == 2 && strings.EqualFold(rest[1], "Rules"):
		rt.kind, rt.sub = routeRules, rest[0]
	case len(rest) == 3 && strings.EqualFold(rest[1], "Rules"):
		rt.kind, rt.sub, rt.rule = routeRule, rest[0], rest[2]
	default:
		return rt, withStatus(http.StatusNotFound, "the path %q addresses no entity: use {topic}/Subscriptions/{subscription}/Rules/{rule}", truncate(path, 200))
	}
	return rt, nil
}

// subPath returns the entity path of a subscription route ("t/Subscriptions/s").
func (rt route) subPath() string { return rt.entity + "/Subscriptions/" + rt.sub }
