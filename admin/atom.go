package admin

import (
	"encoding/xml"
	"time"
)

// openEntry reads an Atom <entry> up to the first element of its <content>
// (the description) and returns that element; the reader is then inside it.
// Atom metadata (id, title, updated, author, link, ...) is ignored.
func openEntry(r *reader) (xml.StartElement, error) {
	root, err := r.root()
	if err != nil {
		return xml.StartElement{}, err
	}
	if root.Name.Local != "entry" {
		return xml.StartElement{}, badRequestf("the body must be an Atom <entry>, not <%s>", root.Name.Local)
	}
	for {
		se, ok, err := r.child("entry")
		if err != nil {
			return xml.StartElement{}, err
		}
		if !ok {
			return xml.StartElement{}, badRequestf("the <entry> has no <content>")
		}
		if se.Name.Local != "content" {
			if err := r.skip(); err != nil {
				return xml.StartElement{}, err
			}
			continue
		}
		desc, ok, err := r.child("content")
		if err != nil {
			return xml.StartElement{}, err
		}
		if !ok {
			return xml.StartElement{}, badRequestf("the <content> of the entry is empty")
		}
		return desc, nil
	}
}

// closeEntry reads what follows the description: the end of <content>
// (another description there is an error) and the rest of the entry.
func closeEntry(r *reader) error {
	if se, ok, err := r.child("content"); err != nil {
		return err
	} else if ok {
		return badRequestf("the <content> holds more than one description (found <%s>)", se.Name.Local)
	}
	for {
		_, ok, err := r.child("entry")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := r.skip(); err != nil {
			return err
		}
	}
}

// atomEntry is the Atom metadata of one entity.
type atomEntry struct {
	self      string // absolute URL of the entity, with api-version
	title     string // the entity's own name
	published time.Time
	updated   time.Time
	author    string // namespace name
}

// startEntry writes an entry's metadata and opens its <content>; the caller
// writes the description and calls endEntry. inFeed omits the namespace
// declaration the enclosing feed already made.
func startEntry(w *writer, e atomEntry, inFeed bool) {
	if inFeed {
		w.open("entry")
	} else {
		w.open("entry", "xmlns", nsAtom)
	}
	w.text("id", e.self)
	w.textAttr("title", e.title, "type", "text")
	w.time("published", e.published)
	w.time("updated", e.updated)
	w.open("author")
	w.text("name", e.author)
	w.close("author")
	w.empty("link", "rel", "self", "href", e.self)
	w.open("content", "type", "application/xml")
}

func endEntry(w *writer) {
	w.close("content")
	w.close("entry")
}

// openDescription writes the start tag of a description element with the
// namespaces the service declares.
func openDescription(w *writer, name string) {
	w.open(name, "xmlns", nsConnect, "xmlns:i", nsInstance)
}

// feedPage is one page of a listing.
type feedPage struct {
	title   string // "Queues", "Topics", "Subscriptions", "Rules"
	self    string // the request URL
	next    string // URL of the next page, "" on the last
	updated time.Time
}

func startFeed(w *writer, f feedPage) {
	w.open("feed", "xmlns", nsAtom)
	w.textAttr("title", f.title, "type", "text")
	w.text("id", f.self)
	w.time("updated", f.updated)
	w.empty("link", "rel", "self", "href", f.self)
	if f.next != "" {
		w.empty("link", "rel", "next", "href", f.next)
	}
}

func endFeed(w *writer) { w.close("feed") }
