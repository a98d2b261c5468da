package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/isoduration"
	"github.com/busbar-io/busbar/server"
)

// client is a browser's view of the console API: a cookie jar and the
// session's CSRF token.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

func newClient(t *testing.T, s *busbartest.Server) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: "http://" + s.HTTPAddr().String() + "/ui/api/", hc: &http.Client{Jar: jar}}
}

// do sends a request and decodes the answer into out; it returns the status
// and the error message of a failed request.
func (c *client) do(method, path string, in, out any) (int, string) {
	c.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.csrf != "" {
		req.Header.Set("X-Busbar-Csrf", c.csrf)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, ""
}

// must is do for a request that must succeed.
func (c *client) must(method, path string, in, out any) {
	c.t.Helper()
	if st, msg := c.do(method, path, in, out); st != http.StatusOK {
		c.t.Fatalf("%s %s: %d %s", method, path, st, msg)
	}
}

func (c *client) signIn(keyName, key string) {
	c.t.Helper()
	var who struct {
		CSRF   string
		Rights []string
	}
	entity := ""
	if keyName == "owner" {
		entity = "own" // the key of one entity signs in for it
	}
	c.must("POST", "signin", map[string]string{"keyName": keyName, "key": key, "entityPath": entity}, &who)
	c.csrf = who.CSRF
}

func signedIn(t *testing.T, s *busbartest.Server, keyName, key string) *client {
	c := newClient(t, s)
	c.signIn(keyName, key)
	return c
}

func TestSignIn(t *testing.T) {
	s := start(t)
	c := newClient(t, s)
	if st, msg := c.do("GET", "tree", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("tree before sign-in: %d %s", st, msg)
	}
	// A form of another site can send neither JSON nor this origin.
	resp, err := c.hc.Post(c.base+"signin", "text/plain", strings.NewReader(`{"keyName":"watcher","key":"`+listenKey+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a text/plain sign-in: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", c.base+"signin", strings.NewReader(`{"keyName":"watcher","key":"`+listenKey+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	if resp, err = c.hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a sign-in from another origin: %d", resp.StatusCode)
	}
	if st, msg := c.do("POST", "signin", map[string]string{"keyName": "watcher", "key": "d3Jvbmc="}, nil); st != http.StatusUnauthorized || msg != "the key name or the key is wrong" {
		t.Fatalf("a wrong key: %d %q", st, msg)
	}
	if st, msg := c.do("POST", "signin", map[string]string{"keyName": "nobody", "key": listenKey}, nil); st != http.StatusUnauthorized || msg != "the key name or the key is wrong" {
		t.Fatalf("an unknown key name: %d %q", st, msg)
	}
	var who struct {
		KeyName string
		Rights  []string
		CSRF    string
	}
	cs := server.ConnectionString(s.AMQPAddr().String(), "watcher", listenKey)
	body, _ := json.Marshal(map[string]string{"connectionString": cs})
	resp, err = c.hc.Post(c.base+"signin", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if who.KeyName != "watcher" || fmt.Sprint(who.Rights) != "[Listen]" || who.CSRF == "" {
		t.Fatalf("signed in as %+v", who)
	}
	ck := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"busbar_console=", "Path=/ui/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("the cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, listenKey) {
		t.Error("the cookie carries the key")
	}
	// Without the CSRF header a change is refused, even with the cookie.
	if st, _ := c.do("POST", "signout", map[string]string{}, nil); st != http.StatusForbidden {
		t.Fatalf("sign-out without the CSRF token: %d", st)
	}
	c.csrf = who.CSRF
	c.must("GET", "tree", nil, nil)
	c.must("POST", "signout", map[string]string{}, nil)
	if st, _ := c.do("GET", "tree", nil, nil); st != http.StatusUnauthorized {
		t.Fatalf("tree after sign-out: %d", st)
	}
}

// TestRights checks each operation against each key's rights.
func TestRights(t *testing.T) {
	s := start(t, busbartest.WithQueue("orders", broker.QueueProperties{}), busbartest.WithQueue("own", broker.QueueProperties{}))
	root := signedIn(t, s, server.RootKeyName, rootKey)
	listen := signedIn(t, s, "watcher", listenKey)
	send := signedIn(t, s, "producer", sendKey)
	owner := signedIn(t, s, "owner", ownKey)
	msg := map[string]any{"path": "orders", "body": "hi"}
	type check struct {
		name         string
		method, path string
		body         any
	}
	checks := []struct {
		check
		allowed map[*client]bool
	}{
		{check{"peek", "GET", "messages?path=orders", nil}, map[*client]bool{root: true, listen: true}},
		{check{"send", "POST", "send", msg}, map[*client]bool{root: true, send: true}},
		{check{"receive", "POST", "receive", map[string]any{"path": "orders", "count": 1, "mode": "delete"}}, map[*client]bool{root: true, listen: true}},
		{check{"update", "POST", "entity", map[string]any{"kind": "queue", "path": "orders", "properties": map[string]any{"MaxDeliveryCount": 7}}}, map[*client]bool{root: true}},
		{check{"create", "POST", "entity", map[string]any{"kind": "queue", "path": "new", "create": true}}, map[*client]bool{root: true}},
		{check{"purge", "POST", "jobs", map[string]any{"kind": "purge", "path": "orders"}}, map[*client]bool{root: true}},
		{check{"delete", "DELETE", "entity?path=orders", nil}, map[*client]bool{root: true}},
	}
	for _, ch := range checks {
		for _, c := range []*client{listen, send, owner, root} {
			st, m := c.do(ch.method, ch.path, ch.body, nil)
			want := http.StatusForbidden
			if ch.allowed[c] {
				want = http.StatusOK
			}
			if st != want {
				t.Errorf("%s by %s: %d %s, want %d", ch.name, c.who(), st, m, want)
			}
			if st == http.StatusForbidden && !strings.Contains(m, "it needs the") {
				t.Errorf("%s by %s: refused with %q", ch.name, c.who(), m)
			}
		}
	}
	// An entity-level key sees its entity only, and manages it.
	var tree struct{ Queues []struct{ Name string } }
	owner.must("GET", "tree", nil, &tree)
	if len(tree.Queues) != 1 || tree.Queues[0].Name != "own" {
		t.Errorf("the owner of own sees %+v", tree.Queues)
	}
	owner.must("POST", "entity", map[string]any{"kind": "queue", "path": "own", "properties": map[string]any{"MaxDeliveryCount": 3}}, nil)
}

func (c *client) who() string {
	switch c.csrf {
	case "":
		return "anonymous"
	}
	var w struct{ KeyName string }
	c.must("GET", "me", nil, &w)
	return w.KeyName
}

func TestEntityValidation(t *testing.T) {
	s := start(t)
	c := signedIn(t, s, server.RootKeyName, rootKey)
	for _, tc := range []struct {
		props map[string]any
		want  string
	}{
		{map[string]any{"LockDuration": "PT10M"}, "LockDuration 10m0s is outside [5s, 5m0s]"},
		{map[string]any{"LockDuration": "ten minutes"}, `LockDuration: "ten minutes" is not an ISO 8601 duration`},
		{map[string]any{"MaxDeliveryCount": 1.5}, "MaxDeliveryCount must be a whole number"},
		{map[string]any{"Status": "Sleeping"}, `Status "Sleeping" is not one of`},
		{map[string]any{"AuthorizationRules": "x"}, "AuthorizationRules is not a property this entity has"},
		{map[string]any{"ForwardTo": "nowhere"}, `forwarding destination "nowhere" does not exist`},
	} {
		st, msg := c.do("POST", "entity", map[string]any{"kind": "queue", "path": "q", "create": true, "properties": tc.props}, nil)
		if st != http.StatusBadRequest && st != http.StatusNotFound || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %d %q, want %q", tc.props, st, msg, tc.want)
		}
	}
	var ev struct {
		Properties []struct {
			Name  string
			Type  string
			Value any
		}
	}
	c.must("POST", "entity", map[string]any{"kind": "queue", "path": "q", "create": true,
		"properties": map[string]any{"LockDuration": "PT45S", "MaxDeliveryCount": 4, "RequiresSession": true}}, &ev)
	got := map[string]any{}
	for _, f := range ev.Properties {
		got[f.Name] = f.Value
	}
	if got["LockDuration"] != "PT45S" || got["MaxDeliveryCount"] != 4.0 || got["RequiresSession"] != true {
		t.Fatalf("created with %v", got)
	}
	b, err := s.Broker().GetQueue(context.Background(), "q")
	if err != nil || b.Properties.LockDuration != 45*time.Second || b.Properties.MaxDeliveryCount != 4 {
		t.Fatalf("the broker holds %+v, %v", b, err)
	}
	if st, msg := c.do("POST", "entity", map[string]any{"kind": "queue", "path": "q", "create": true}, nil); st != http.StatusConflict {
		t.Errorf("creating q twice: %d %s", st, msg)
	}
}

// TestCreateDefaults checks that the create form's fields (api/defaults)
// are, kind by kind, exactly those the edit form shows for an entity the
// broker created without properties, with the same values.
func TestCreateDefaults(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	b := s.Broker()
	if err := b.CreateQueue(ctx, "q", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateSubscription(ctx, "t", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	type field struct {
		Name  string
		Type  string
		Value any
	}
	root := signedIn(t, s, server.RootKeyName, rootKey)
	listen := signedIn(t, s, "watcher", listenKey) // reading the defaults needs no right
	for _, tc := range []struct{ kind, path string }{{"queue", "q"}, {"topic", "t"}, {"subscription", "t/Subscriptions/s"}} {
		var d struct {
			Kind       string
			Properties []field
		}
		listen.must("GET", "defaults?kind="+tc.kind, nil, &d)
		var ev struct{ Properties []field }
		root.must("GET", "entity?path="+url.QueryEscape(tc.path), nil, &ev)
		if d.Kind != tc.kind || len(d.Properties) == 0 || !reflect.DeepEqual(d.Properties, ev.Properties) {
			t.Errorf("%s: the create form has\n%+v\nthe edit form of a new %s has\n%+v", tc.kind, d, tc.kind, ev.Properties)
		}
	}
	// Among them, properties the create form once lacked, with the broker's defaults.
	var d struct{ Properties []field }
	root.must("GET", "defaults?kind=queue", nil, &d)
	got := map[string]any{}
	for _, f := range d.Properties {
		got[f.Name] = f.Value
	}
	if got["DuplicateDetectionHistoryTimeWindow"] != isoduration.Format(broker.DefaultDuplicateDetectionWindow) ||
		got["AutoDeleteOnIdle"] != isoduration.Format(broker.InfiniteTTL) || got["Status"] != string(broker.StatusActive) ||
		got["MaxMessageSizeInKilobytes"] != float64(broker.DefaultMaxMessageSizeInKilobytes) {
		t.Errorf("queue defaults: %v", got)
	}
	for _, kind := range []string{"widget", "", "Queue"} {
		st, msg := root.do("GET", "defaults?kind="+kind, nil, nil)
		if want := fmt.Sprintf("kind %q is not queue, topic or subscription", kind); st != http.StatusBadRequest || msg != want {
			t.Errorf("kind %q: %d %q, want 400 %q", kind, st, msg, want)
		}
	}
	if st, _ := newClient(t, s).do("GET", "defaults?kind=queue", nil, nil); st != http.StatusUnauthorized {
		t.Errorf("defaults before sign-in: %d", st)
	}
}

func TestValidateSQL(t *testing.T) {
	s := start(t)
	c := signedIn(t, s, "watcher", listenKey)
	for _, tc := range []struct {
		kind, text string
		ok         bool
		want       string
	}{
		{"filter", "region = 'eu' AND priority > 2", true, ""},
		{"filter", "region = 'eu' AND", false, "line 1, column 18"},
		{"filter", "sys.Label LIKE 'a%' ESCAPE", false, "line 1, column"},
		{"action", "SET a = 1; REMOVE b", true, ""},
		{"action", "", true, ""},
		{"action", "SET = 1", false, "line 1, column 5"},
	} {
		var v struct {
			OK     bool
			Error  string
			Line   int
			Column int
		}
		c.must("POST", "validate", map[string]string{"kind": tc.kind, "text": tc.text}, &v)
		if v.OK != tc.ok || !strings.Contains(v.Error, tc.want) || !tc.ok && v.Line != 1 {
			t.Errorf("%s %q: %+v", tc.kind, tc.text, v)
		}
	}
}

// deadLetter sends n messages to path and dead-letters them with reason.
func deadLetter(t *testing.T, c *client, path string, n int, reason string) {
	t.Helper()
	c.must("POST", "send", map[string]any{"path": path, "body": `{"n":1}`, "count": n, "properties": map[string]any{"kind": reason}}, nil)
	left := n
	for left > 0 {
		var r struct{ Messages []json.RawMessage }
		c.must("POST", "receive", map[string]any{"path": path, "count": min(left, 1000), "mode": "deadletter", "reason": reason}, &r)
		if len(r.Messages) == 0 {
			t.Fatalf("nothing to dead-letter in %s, %d left", path, left)
		}
		left -= len(r.Messages)
	}
}

type report struct {
	ID                                                  string
	Total, Examined, Matched, Done, Failed, Unconfirmed int
	Errors                                              []string
	Finished                                            bool
}

func (c *client) runJob(req map[string]any) report {
	c.t.Helper()
	var r report
	c.must("POST", "jobs", req, &r)
	poll.Until(c.t, 2*time.Minute, "the job to finish", func() bool {
		c.must("GET", "jobs?id="+url.QueryEscape(r.ID), nil, &r)
		return r.Finished
	})
	return r
}

func counts(t *testing.T, s *busbartest.Server, q string) (active, dead int64) {
	t.Helper()
	i, err := s.Broker().GetQueue(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return i.Runtime.ActiveMessageCount, i.Runtime.DeadLetterMessageCount
}

func TestResubmit(t *testing.T) {
	s := start(t, busbartest.WithQueue("orders", broker.QueueProperties{}), busbartest.WithQueue("parking", broker.QueueProperties{}))
	c := signedIn(t, s, server.RootKeyName, rootKey)
	deadLetter(t, c, "orders", 30, "Poison")
	deadLetter(t, c, "orders", 20, "Timeout")

	var groups struct {
		Total   int
		Reasons []struct {
			Reason string
			Count  int
		}
	}
	c.must("GET", "deadletters?path=orders", nil, &groups)
	if groups.Total != 50 || fmt.Sprint(groups.Reasons) != "[{Poison 30} {Timeout 20}]" {
		t.Fatalf("reasons: %+v", groups)
	}

	// All matching a reason go back to the source, without the
	// dead-letter properties; the others stay, unlocked.
	r := c.runJob(map[string]any{"kind": "resubmit", "path": "orders", "search": map[string]any{"reason": "Timeout"}})
	if r.Total != 50 || r.Examined != 50 || r.Matched != 20 || r.Done != 20 || r.Failed != 0 || len(r.Errors) != 0 {
		t.Fatalf("report: %+v", r)
	}
	if a, d := counts(t, s, "orders"); a != 20 || d != 30 {
		t.Fatalf("after the resubmit: %d active, %d dead-lettered", a, d)
	}
	var page struct {
		Messages []struct {
			DeadLetterReason string
			Properties       map[string]any
		}
	}
	c.must("GET", "messages?path=orders&count=100", nil, &page)
	if len(page.Messages) != 20 || page.Messages[0].DeadLetterReason != "" || page.Messages[0].Properties["kind"] != "Timeout" {
		t.Fatalf("resubmitted: %+v", page.Messages)
	}
	if _, has := page.Messages[0].Properties["DeadLetterReason"]; has {
		t.Fatal("a resubmitted message keeps its dead-letter reason")
	}
	// The dead letters not selected are available again at once.
	var got struct{ Messages []json.RawMessage }
	c.must("POST", "receive", map[string]any{"path": "orders", "subqueue": "deadletter", "count": 1, "mode": "delete"}, &got)
	if len(got.Messages) != 1 {
		t.Fatal("the dead letters left are still locked")
	}

	// Selected by sequence number, to another entity.
	var dl struct {
		Messages []struct{ SequenceNumber int64 }
	}
	c.must("GET", "messages?path=orders&subqueue=deadletter&count=3", nil, &dl)
	seqs := []int64{dl.Messages[0].SequenceNumber, dl.Messages[2].SequenceNumber}
	r = c.runJob(map[string]any{"kind": "resubmit", "path": "orders", "sequenceNumbers": seqs, "target": "parking"})
	if r.Done != 2 || r.Failed != 0 {
		t.Fatalf("report: %+v", r)
	}
	if a, _ := counts(t, s, "parking"); a != 2 {
		t.Fatalf("parking has %d", a)
	}

	// A target that refuses: nothing leaves the dead-letter queue.
	c.must("POST", "entity", map[string]any{"kind": "queue", "path": "parking", "properties": map[string]any{"Status": "SendDisabled"}}, nil)
	_, before := counts(t, s, "orders")
	r = c.runJob(map[string]any{"kind": "resubmit", "path": "orders", "target": "parking"})
	if r.Done != 0 || r.Failed != int(before) || len(r.Errors) == 0 || !strings.Contains(r.Errors[0], "sending to parking") {
		t.Fatalf("report of a refused resubmit: %+v", r)
	}
	if _, d := counts(t, s, "orders"); d != before {
		t.Fatalf("dead letters: %d, want %d", d, before)
	}
	if a, _ := counts(t, s, "parking"); a != 2 {
		t.Fatalf("parking has %d", a)
	}

	// Purge all.
	r = c.runJob(map[string]any{"kind": "purge", "path": "orders"})
	if r.Done != int(before) {
		t.Fatalf("purge: %+v", r)
	}
	if _, d := counts(t, s, "orders"); d != 0 {
		t.Fatalf("%d dead letters after the purge", d)
	}
}

func TestSessionState(t *testing.T) {
	s := start(t, busbartest.WithQueue("flows", broker.QueueProperties{RequiresSession: true}))
	c := signedIn(t, s, server.RootKeyName, rootKey)
	c.must("POST", "send", map[string]any{"path": "flows", "body": "x", "sessionId": "a"}, nil)
	c.must("POST", "session", map[string]any{"path": "flows", "id": "a", "state": `{"step":2}`}, nil)
	sagaState := `{"saga":"s","status":"running","version":1,"state":{}}`
	c.must("POST", "session", map[string]any{"path": "flows", "id": "b", "state": sagaState}, nil)
	var list struct {
		Sessions []struct {
			ID        string
			Messages  int
			StateSize int
		}
	}
	c.must("GET", "sessions?path=flows", nil, &list)
	if fmt.Sprint(list.Sessions) != fmt.Sprintf("[{a 1 10} {b 0 %d}]", len(sagaState)) {
		t.Fatalf("sessions: %+v", list.Sessions)
	}
	var st struct {
		Text   string
		IsText bool
	}
	c.must("GET", "session?path=flows&id=a", nil, &st)
	if st.Text != `{"step":2}` || !st.IsText {
		t.Fatalf("state: %+v", st)
	}
	var tk struct {
		Sagas []struct{ ID, Saga, Status string }
	}
	c.must("GET", "toolkit", nil, &tk)
	if fmt.Sprint(tk.Sagas) != "[{b s running}]" {
		t.Fatalf("toolkit: %+v", tk)
	}
	// A session another receiver holds cannot be changed.
	l := signedIn(t, s, "watcher", listenKey)
	if st, msg := l.do("POST", "session", map[string]any{"path": "flows", "id": "a", "state": "x"}, nil); st != http.StatusForbidden {
		t.Fatalf("a Listen key set a state: %d %s", st, msg)
	}
}

func TestScheduledListAndCancel(t *testing.T) {
	s := start(t, busbartest.WithQueue("q", broker.QueueProperties{}), busbartest.WithTopic("t", broker.TopicProperties{}))
	c := signedIn(t, s, server.RootKeyName, rootKey)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	// A topic cannot be peeked (as on Service Bus): its scheduled messages
	// are cancelled by the sequence numbers their sender got.
	if st, msg := c.do("POST", "cancel", map[string]any{"path": "t", "sequenceNumbers": []int64{999}}, nil); st != http.StatusNotFound {
		t.Fatalf("cancelling an unknown message of a topic: %d %s", st, msg)
	}
	for _, path := range []string{"q"} {
		c.must("POST", "send", map[string]any{"path": path, "body": "later", "scheduledEnqueueTime": at, "count": 2}, nil)
		c.must("POST", "send", map[string]any{"path": path, "body": "now"}, nil)
		var page struct {
			Messages []struct {
				SequenceNumber       int64
				State                string
				ScheduledEnqueueTime string
			}
		}
		c.must("GET", "messages?path="+path+"&state=Scheduled", nil, &page)
		if len(page.Messages) != 2 || page.Messages[0].State != "Scheduled" || !strings.HasPrefix(page.Messages[0].ScheduledEnqueueTime, at[:19]) {
			t.Fatalf("%s: scheduled %+v", path, page.Messages)
		}
		c.must("POST", "cancel", map[string]any{"path": path, "sequenceNumbers": []int64{page.Messages[0].SequenceNumber}}, nil)
		c.must("GET", "messages?path="+path+"&state=Scheduled", nil, &page)
		if len(page.Messages) != 1 {
			t.Fatalf("%s: after cancelling one, %+v", path, page.Messages)
		}
		if st, msg := c.do("POST", "cancel", map[string]any{"path": path, "sequenceNumbers": []int64{999}}, nil); st != http.StatusNotFound {
			t.Fatalf("%s: cancelling an unknown message: %d %s", path, st, msg)
		}
	}
}
