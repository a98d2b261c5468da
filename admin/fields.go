package admin

import (
	"encoding/xml"
	"net/url"
	"strings"
	"time"

	"github.com/busbar-io/busbar/broker"
)

// decodeFunc decodes one property element (the reader is just inside it)
// and consumes it up to its end tag.
type decodeFunc func(r *reader, se xml.StartElement) error

// fields maps a description's property names to their decoders; a nil
// decoder marks a read-only property the clients may echo back, which is
// accepted and ignored.
type fields map[string]decodeFunc

// decodeFields reads the children of the description element root. An
// unknown or repeated property is an error naming it.
func decodeFields(r *reader, root string, f fields) (fieldSet, error) {
	set := fieldSet{}
	for {
		se, ok, err := r.child(root)
		if err != nil {
			return nil, err
		}
		if !ok {
			return set, nil
		}
		name := se.Name.Local
		fn, known := f[name]
		if !known {
			return nil, badRequestf("unknown property %s in %s", name, root)
		}
		if err := set.add(name); err != nil {
			return nil, err
		}
		if isNil, _ := attr(se, nsInstance, "nil"); isNil == "true" {
			// <X i:nil="true"/>, as .NET's serializers write an unset
			// property: the property is absent.
			delete(set, name)
			if err := r.skip(); err != nil {
				return nil, err
			}
			continue
		}
		if fn == nil {
			err = r.skip()
		} else {
			err = fn(r, se)
		}
		if err != nil {
			return nil, err
		}
	}
}

func strField(dst *string) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		*dst = s
		return err
	}
}

func boolField(dst *bool) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		*dst, err = parseBool(se.Name.Local, s)
		return err
	}
}

func durationField(dst *time.Duration) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		*dst, err = parseDuration(se.Name.Local, s)
		return err
	}
}

func int64Field(dst *int64, lo, hi int64) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		*dst, err = parseInt(se.Name.Local, s, lo, hi)
		return err
	}
}

func int32Field(dst *int32) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		*dst, err = parseInt32(se.Name.Local, s)
		return err
	}
}

// statusField accepts the statuses a client may set.
func statusField(dst *broker.EntityStatus) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		switch st := broker.EntityStatus(strings.TrimSpace(s)); st {
		case broker.StatusActive, broker.StatusDisabled, broker.StatusSendDisabled, broker.StatusReceiveDisabled:
			*dst = st
			return nil
		}
		return badRequestf("property Status: %q is not one of Active, Disabled, SendDisabled, ReceiveDisabled", truncate(s, 40))
	}
}

// forwardField accepts an entity name or an absolute URI naming it
// ("sb://host/queue", as the JS and .NET clients send); the broker keeps the
// name in dst and, for a URI, the URI as given in uri, to echo it.
func forwardField(dst, uri *string) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		s, err := r.text(se.Name.Local)
		if err != nil {
			return err
		}
		if *dst, err = forwardName(se.Name.Local, s); err != nil {
			return err
		}
		*uri = ""
		if s = strings.TrimSpace(s); strings.Contains(s, "://") {
			*uri = s
		}
		return nil
	}
}

func forwardName(prop, s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		return strings.Trim(s, "/"), nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", badRequestf("property %s: %q is neither an entity name nor an absolute URI", prop, truncate(s, 80))
	}
	name := strings.Trim(u.Path, "/")
	if name == "" {
		return "", badRequestf("property %s: the URI %q names no entity", prop, truncate(s, 80))
	}
	return name, nil
}

// forwardURI renders a forwarding destination as the service does: the
// URI it was given as (uri, while it still names the destination), else an
// absolute URI on the namespace's host.
func forwardURI(host, name, uri string) string {
	if name == "" {
		return ""
	}
	if uri != "" {
		if n, err := forwardName("", uri); err == nil && strings.EqualFold(n, name) {
			return uri
		}
	}
	return "sb://" + host + "/" + name
}

// falseOnly accepts a boolean feature Busbar does not offer only when it is
// off (EnableExpress and the like).
func falseOnly(r *reader, se xml.StartElement) error {
	s, err := r.text(se.Name.Local)
	if err != nil {
		return err
	}
	on, err := parseBool(se.Name.Local, s)
	if err != nil {
		return err
	}
	if on {
		return badRequestf("property %s: true is not supported by Busbar", se.Name.Local)
	}
	return nil
}

// writeCountDetails writes CountDetails with the prefixed namespace the
// service uses (the JS client requires exactly one xmlns:prefix on it).
func writeCountDetails(w *writer, ri broker.RuntimeInfo) {
	w.open("CountDetails", "xmlns:d2p1", nsCounts)
	w.int("d2p1:ActiveMessageCount", clamp32(ri.ActiveMessageCount))
	w.int("d2p1:DeadLetterMessageCount", clamp32(ri.DeadLetterMessageCount))
	w.int("d2p1:ScheduledMessageCount", clamp32(ri.ScheduledMessageCount))
	w.int("d2p1:TransferMessageCount", clamp32(ri.TransferMessageCount))
	w.int("d2p1:TransferDeadLetterMessageCount", clamp32(ri.TransferDeadLetterMessageCount))
	w.close("CountDetails")
}
