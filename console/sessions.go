package console

import (
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// sessionView is a session as the sessions page lists it.
type sessionView struct {
	ID           string `json:"id"`
	Messages     int    `json:"messages"`
	StateSize    int    `json:"stateSize"`
	StateUpdated string `json:"stateUpdated,omitempty"`
	LockedUntil  string `json:"lockedUntil,omitempty"`
}

// maxSessionList bounds the sessions one request lists.
const maxSessionList = 500

func (c *Console) listSessions(w http.ResponseWriter, r *http.Request, p *principal) error {
	path := r.URL.Query().Get("path")
	if _, err := splitPath(path); err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	ss, err := c.b.Sessions(r.Context(), path, 0, maxSessionList)
	if err != nil {
		return err
	}
	out := []sessionView{}
	for _, s := range ss {
		v := sessionView{ID: s.ID, Messages: s.MessageCount, StateUpdated: timeString(s.StateUpdated), LockedUntil: timeString(s.LockedUntil)}
		if s.HasState {
			st, err := c.b.GetSessionState(r.Context(), path, s.ID)
			if err != nil {
				return err
			}
			v.StateSize = len(st)
		}
		out = append(out, v)
	}
	return writeJSON(w, map[string]any{"sessions": out})
}

// stateView is a session's state: as text when it is UTF-8, always as base64.
type stateView struct {
	ID     string `json:"id"`
	Text   string `json:"text,omitempty"`
	IsText bool   `json:"isText"`
	Base64 string `json:"base64"`
	Size   int    `json:"size"`
}

func (c *Console) getSession(w http.ResponseWriter, r *http.Request, p *principal) error {
	path, id := r.URL.Query().Get("path"), r.URL.Query().Get("id")
	if _, err := splitPath(path); err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	st, err := c.b.GetSessionState(r.Context(), path, id)
	if err != nil {
		return err
	}
	v := stateView{ID: id, Base64: base64.StdEncoding.EncodeToString(st), Size: len(st), IsText: utf8.Valid(st)}
	if v.IsText {
		v.Text = string(st)
	}
	return writeJSON(w, v)
}

// setSession replaces a session's state. It locks the session for the
// change, as a session receiver would; a session another receiver holds
// cannot be changed.
func (c *Console) setSession(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Path   string `json:"path"`
		ID     string `json:"id"`
		State  string `json:"state"`
		Base64 bool   `json:"base64"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	if _, err := splitPath(in.Path); err != nil {
		return err
	}
	if err := c.need(p, in.Path, sas.Manage); err != nil {
		return err
	}
	st := []byte(in.State)
	if in.Base64 {
		b, err := base64.StdEncoding.DecodeString(in.State)
		if err != nil {
			return badRequest("the state is not base64: %v", err)
		}
		st = b
	}
	cons, err := c.b.AcceptSession(r.Context(), in.Path, in.ID, broker.ConsumerOptions{Deliver: func(*broker.Message) {}})
	if err != nil {
		return err
	}
	defer func() { _ = cons.Close() }()
	if err := c.b.SetSessionState(r.Context(), in.Path, in.ID, st); err != nil {
		return err
	}
	c.log.Info("console session state set", "key", p.keyName, "path", in.Path, "session", in.ID, "bytes", len(st))
	return writeJSON(w, map[string]any{"id": in.ID, "size": len(st), "updated": c.now().UTC().Format(time.RFC3339)})
}
