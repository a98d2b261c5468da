package admin

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/busbar-io/busbar/broker"
)

// call is one management request being served.
type call struct {
	h      *handler
	w      http.ResponseWriter
	r      *http.Request
	rt     route
	status int
}

func (c *call) b() Backend { return c.h.o.Broker }

// serve dispatches on the route and the method (checkRequest has refused
// the methods a route does not allow).
func (c *call) serve() error {
	get, put := c.r.Method == http.MethodGet, c.r.Method == http.MethodPut
	switch c.rt.kind {
	case routeNamespace:
		return c.namespaceInfo()
	case routeQueues:
		return c.listQueues()
	case routeTopics:
		return c.listTopics()
	case routeSubscriptions:
		return c.listSubscriptions()
	case routeRules:
		if put {
			return c.putRule()
		}
		return c.listRules()
	case routeEntity:
		switch {
		case get:
			return c.getEntity()
		case put:
			return c.putEntity()
		}
		return c.deleteEntity()
	case routeSubscription:
		switch {
		case get:
			return c.getSubscription()
		case put:
			return c.putSubscription()
		}
		return c.b().DeleteSubscription(c.ctx(), c.rt.entity, c.rt.sub)
	case routeRule:
		switch {
		case get:
			return c.getRule()
		case put:
			return c.putRule()
		}
		return c.b().RemoveRule(c.ctx(), c.rt.entity, c.rt.sub, c.rt.rule)
	}
	return withStatus(http.StatusNotFound, "the path %q addresses nothing", c.r.URL.Path)
}

func (c *call) ctx() context.Context { return c.r.Context() }

// version is the api-version to echo in links.
func (c *call) version() string {
	if v := c.r.URL.Query().Get("api-version"); v != "" {
		return v
	}
	return APIVersions[len(APIVersions)-1]
}

// host is the namespace host the client addressed (with its port).
func (c *call) host() string {
	if c.r.Host == "" {
		return "localhost"
	}
	return c.r.Host
}

// url returns the absolute URL of path as the client would address it.
func (c *call) url(path string, q url.Values) string {
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("api-version", c.version())
	return scheme + "://" + c.host() + "/" + path + "?" + q.Encode()
}

// entry builds the Atom metadata of the entity at path.
func (c *call) entry(path, title string, ri broker.RuntimeInfo) atomEntry {
	return atomEntry{self: c.url(path, nil), title: title, published: ri.CreatedAt, updated: ri.UpdatedAt, author: c.h.o.NamespaceName}
}

// respond writes a 200 (or c.status) Atom document.
func (c *call) respond(kind string, w *writer) error {
	c.w.Header().Set("Content-Type", "application/atom+xml;type="+kind+";charset=utf-8")
	c.w.WriteHeader(c.status)
	_, _ = c.w.Write(w.b.Bytes())
	return nil
}

// readDescription reads the body and opens its description element.
func (c *call) readDescription() (*reader, string, error) {
	body, err := c.h.readBody(c.w, c.r)
	if err != nil {
		return nil, "", err
	}
	rd := newReader(bytes.NewReader(body))
	desc, err := openEntry(rd)
	if err != nil {
		return nil, "", err
	}
	return rd, desc.Name.Local, nil
}

// isUpdate reports whether a PUT updates (If-Match) rather than creates.
func (c *call) isUpdate() bool { return c.r.Header.Get("If-Match") != "" }

func (c *call) namespaceInfo() error {
	o := c.h.o
	var w writer
	startEntry(&w, atomEntry{self: c.url("$namespaceinfo", nil), title: o.NamespaceName, published: o.CreatedAt,
		updated: o.CreatedAt, author: o.NamespaceName}, false)
	openDescription(&w, "NamespaceInfo")
	w.time("CreatedTime", o.CreatedAt)
	if c.h.standard() {
		w.text("MessagingSKU", "Standard")
	} else {
		w.text("MessagingSKU", "Premium")
		w.int("MessagingUnits", 1)
	}
	w.time("ModifiedTime", o.CreatedAt)
	w.text("Name", o.NamespaceName)
	w.text("NamespaceType", "Messaging")
	w.close("NamespaceInfo")
	endEntry(&w)
	return c.respond("entry", &w)
}

// window reads $skip and $top (default 100).
func (c *call) window() (skip, top int, err error) {
	q := c.r.URL.Query()
	skip, top = 0, 100
	for _, p := range []struct {
		name string
		dst  *int
	}{{"$skip", &skip}, {"$top", &top}} {
		if s := q.Get(p.name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return 0, 0, badRequestf("%s=%q is not a non-negative integer", p.name, truncate(s, 20))
			}
			*p.dst = v
		}
	}
	return skip, top, nil
}

// feed writes one page of a listing. list returns up to top items from
// skip on (asking for one more than the page tells whether a next page
// exists); each item is written by entry.
func feed[T any](c *call, title, path string, list func(skip, top int) ([]T, error), entry func(w *writer, item T) error) error {
	skip, top, err := c.window()
	if err != nil {
		return err
	}
	var items []T
	if top > 0 {
		if items, err = list(skip, top+1); err != nil {
			return err
		}
	}
	next := ""
	if len(items) > top {
		items = items[:top]
		next = c.url(path, url.Values{"$skip": {strconv.Itoa(skip + top)}, "$top": {strconv.Itoa(top)}})
	}
	var w writer
	startFeed(&w, feedPage{title: title, self: c.url(path, c.r.URL.Query()), next: next, updated: c.h.o.Now()})
	for _, it := range items {
		if err := entry(&w, it); err != nil {
			return err
		}
	}
	endFeed(&w)
	return c.respond("feed", &w)
}
