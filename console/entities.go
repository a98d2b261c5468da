package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/broker/filter"
	"github.com/busbar-io/busbar/isoduration"
	"github.com/busbar-io/busbar/sas"
)

// counts are an entity's message counts and rates, as the tree shows them.
type counts struct {
	Active          int64   `json:"active"`
	DeadLetter      int64   `json:"deadLetter"`
	Scheduled       int64   `json:"scheduled"`
	Deferred        int64   `json:"deferred"`
	Transfer        int64   `json:"transfer"`
	TransferDL      int64   `json:"transferDeadLetter"`
	Total           int64   `json:"total"`
	SizeInBytes     int64   `json:"sizeInBytes"`
	InPerSecond     float64 `json:"inPerSecond"`
	OutPerSecond    float64 `json:"outPerSecond"`
	Subscriptions   int64   `json:"subscriptions,omitempty"`
	AccessedAt      string  `json:"accessedAt,omitempty"`
	UpdatedAt       string  `json:"updatedAt,omitempty"`
	CreatedAt       string  `json:"createdAt,omitempty"`
	RequiresSession bool    `json:"requiresSession"`
	Status          string  `json:"status"`
}

// node is an entity in the tree.
type node struct {
	Kind          string  `json:"kind"` // queue, topic, subscription
	Name          string  `json:"name"`
	Path          string  `json:"path"`
	Counts        counts  `json:"counts"`
	Subscriptions []*node `json:"subscriptions,omitempty"`
	Rules         []rule  `json:"rules,omitempty"`
}

func (c *Console) countsOf(path string, rt broker.RuntimeInfo, requiresSession bool, status broker.EntityStatus) counts {
	in, out := c.stats.rates(path)
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	return counts{Active: rt.ActiveMessageCount, DeadLetter: rt.DeadLetterMessageCount, Scheduled: rt.ScheduledMessageCount,
		Deferred: rt.DeferredMessageCount, Transfer: rt.TransferMessageCount, TransferDL: rt.TransferDeadLetterMessageCount,
		Total: rt.TotalMessageCount, SizeInBytes: rt.SizeInBytes, InPerSecond: in, OutPerSecond: out,
		Subscriptions: rt.SubscriptionCount, AccessedAt: ts(rt.AccessedAt), UpdatedAt: ts(rt.UpdatedAt), CreatedAt: ts(rt.CreatedAt),
		RequiresSession: requiresSession, Status: string(status)}
}

// tree lists the entities the key may see, with their counts and rates.
func (c *Console) tree(w http.ResponseWriter, r *http.Request, p *principal) error {
	ctx := r.Context()
	sees := func(path string) bool {
		return c.need(p, path, sas.Listen) == nil || c.need(p, path, sas.Manage) == nil
	}
	out := struct {
		Queues []*node `json:"queues"`
		Topics []*node `json:"topics"`
	}{Queues: []*node{}, Topics: []*node{}}
	qs, err := c.b.ListQueues(ctx, 0, 0)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if sees(q.Name) {
			out.Queues = append(out.Queues, &node{Kind: "queue", Name: q.Name, Path: q.Name,
				Counts: c.countsOf(q.Name, q.Runtime, q.Properties.RequiresSession, q.Properties.Status)})
		}
	}
	ts, err := c.b.ListTopics(ctx, 0, 0)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if !sees(t.Name) {
			continue
		}
		tn := &node{Kind: "topic", Name: t.Name, Path: t.Name, Counts: c.countsOf(t.Name, t.Runtime, false, t.Properties.Status)}
		subs, err := c.b.ListSubscriptions(ctx, t.Name, 0, 0)
		if err != nil && !errors.Is(err, broker.ErrNotFound) {
			return err
		}
		for _, s := range subs {
			sp := t.Name + "/Subscriptions/" + s.Name
			sn := &node{Kind: "subscription", Name: s.Name, Path: sp,
				Counts: c.countsOf(sp, s.Runtime, s.Properties.RequiresSession, s.Properties.Status)}
			rules, err := c.b.ListRules(ctx, t.Name, s.Name, 0, 0)
			if err == nil {
				for _, ru := range rules {
					sn.Rules = append(sn.Rules, ruleView(ru))
				}
			}
			tn.Subscriptions = append(tn.Subscriptions, sn)
		}
		out.Topics = append(out.Topics, tn)
	}
	return writeJSON(w, out)
}

// field is one settable property of an entity, as the edit form shows it.
// Durations are ISO 8601 ("PT1M"), as in the management API.
type field struct {
	Name  string `json:"name"`
	Type  string `json:"type"` // bool, int, duration, string, status
	Value any    `json:"value"`
}

// skipped are properties the form does not edit: authorization rules and
// the forms a forwarding destination was given in are kept as they are.
var skipped = map[string]bool{"AuthorizationRules": true, "DefaultRule": true, "ForwardToURI": true, "ForwardDeadLetteredMessagesToURI": true}

var durationType = reflect.TypeOf(time.Duration(0))
var statusType = reflect.TypeOf(broker.EntityStatus(""))

// fieldsOf lists the settable properties of a properties struct.
func fieldsOf(props any) []field {
	v := reflect.ValueOf(props)
	var out []field
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if skipped[f.Name] {
			continue
		}
		x := v.Field(i)
		switch {
		case f.Type == durationType:
			out = append(out, field{f.Name, "duration", isoduration.Format(time.Duration(x.Int()))})
		case f.Type == statusType:
			out = append(out, field{f.Name, "status", x.String()})
		case x.Kind() == reflect.Bool:
			out = append(out, field{f.Name, "bool", x.Bool()})
		case x.Kind() == reflect.Int32 || x.Kind() == reflect.Int64:
			out = append(out, field{f.Name, "int", x.Int()})
		case x.Kind() == reflect.String:
			out = append(out, field{f.Name, "string", x.String()})
		}
	}
	return out
}

// defaultsView is what the create form starts from: the fields of a new
// entity of a kind, with the values the broker gives them by default.
type defaultsView struct {
	Kind       string  `json:"kind"`
	Properties []field `json:"properties"`
}

// getDefaults answers the create form's fields for ?kind=queue, topic or
// subscription. Any signed-in key may read them: they hold nothing of the
// namespace; creating the entity needs Manage (putEntity).
func (c *Console) getDefaults(w http.ResponseWriter, r *http.Request, p *principal) error {
	kind := r.URL.Query().Get("kind")
	var props any
	switch kind {
	case "queue":
		props = c.b.DefaultQueueProperties()
	case "topic":
		props = c.b.DefaultTopicProperties()
	case "subscription":
		props = c.b.DefaultSubscriptionProperties()
	default:
		return badRequest("kind %q is not queue, topic or subscription", kind)
	}
	return writeJSON(w, defaultsView{Kind: kind, Properties: fieldsOf(props)})
}

// setFields sets the named properties of the struct props points to from
// their JSON values, and reports the first that does not fit.
func setFields(props any, values map[string]any) error {
	v := reflect.ValueOf(props).Elem()
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		val := values[n]
		f, ok := v.Type().FieldByName(n)
		if !ok || skipped[n] || !f.IsExported() {
			return badRequest("%s is not a property this entity has", n)
		}
		x := v.FieldByIndex(f.Index)
		switch {
		case f.Type == durationType:
			s, _ := val.(string)
			d, err := isoduration.Parse(s)
			if err != nil {
				return badRequest("%s: %q is not an ISO 8601 duration such as PT1M or P14D (%v)", n, s, err)
			}
			x.SetInt(int64(d))
		case x.Kind() == reflect.Bool:
			b, ok := val.(bool)
			if !ok {
				return badRequest("%s must be true or false", n)
			}
			x.SetBool(b)
		case x.Kind() == reflect.Int32 || x.Kind() == reflect.Int64:
			num, ok := val.(float64)
			if !ok || num != float64(int64(num)) || x.OverflowInt(int64(num)) {
				return badRequest("%s must be a whole number", n)
			}
			x.SetInt(int64(num))
		case x.Kind() == reflect.String:
			s, ok := val.(string)
			if !ok {
				return badRequest("%s must be text", n)
			}
			x.SetString(s)
		default:
			return badRequest("%s cannot be set here", n)
		}
	}
	return nil
}

// entityView is an entity with its settable properties.
type entityView struct {
	Kind       string   `json:"kind"`
	Path       string   `json:"path"`
	Name       string   `json:"name"`
	Counts     counts   `json:"counts"`
	Properties []field  `json:"properties"`
	Rules      []rule   `json:"rules,omitempty"`
	Rights     []string `json:"rights"`
}

// splitPath parses an entity path of the console's API: a queue, a topic,
// or "topic/Subscriptions/sub".
func splitPath(path string) (broker.Path, error) {
	if path == "" {
		return broker.Path{}, badRequest("the path of an entity is missing")
	}
	p, err := broker.ParsePath(path)
	if err != nil {
		return p, badRequest("%v", err)
	}
	if p.Subqueue != broker.SubqueueMain {
		return p, badRequest("%q is a subqueue; name its entity", path)
	}
	return p, nil
}

func (c *Console) getEntity(w http.ResponseWriter, r *http.Request, p *principal) error {
	path := r.URL.Query().Get("path")
	bp, err := splitPath(path)
	if err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	v, err := c.entity(r.Context(), bp)
	if err != nil {
		return err
	}
	v.Rights = rightNames(c.rights(p, path))
	return writeJSON(w, v)
}

func (c *Console) entity(ctx context.Context, bp broker.Path) (*entityView, error) {
	if bp.Subscription != "" {
		s, err := c.b.GetSubscription(ctx, bp.Entity, bp.Subscription)
		if err != nil {
			return nil, err
		}
		path := bp.String()
		v := &entityView{Kind: "subscription", Path: path, Name: s.Name, Properties: fieldsOf(s.Properties),
			Counts: c.countsOf(path, s.Runtime, s.Properties.RequiresSession, s.Properties.Status)}
		rules, err := c.b.ListRules(ctx, bp.Entity, bp.Subscription, 0, 0)
		if err != nil {
			return nil, err
		}
		for _, ru := range rules {
			v.Rules = append(v.Rules, ruleView(ru))
		}
		return v, nil
	}
	if q, err := c.b.GetQueue(ctx, bp.Entity); err == nil {
		return &entityView{Kind: "queue", Path: q.Name, Name: q.Name, Properties: fieldsOf(q.Properties),
			Counts: c.countsOf(q.Name, q.Runtime, q.Properties.RequiresSession, q.Properties.Status)}, nil
	} else if !errors.Is(err, broker.ErrNotFound) {
		return nil, err
	}
	t, err := c.b.GetTopic(ctx, bp.Entity)
	if err != nil {
		return nil, err
	}
	return &entityView{Kind: "topic", Path: t.Name, Name: t.Name, Properties: fieldsOf(t.Properties),
		Counts: c.countsOf(t.Name, t.Runtime, false, t.Properties.Status)}, nil
}

// entityChange creates or updates an entity.
type entityChange struct {
	Kind       string         `json:"kind"` // queue, topic, subscription
	Path       string         `json:"path"`
	Create     bool           `json:"create"`
	Properties map[string]any `json:"properties"`
}

func (c *Console) putEntity(w http.ResponseWriter, r *http.Request, p *principal) error {
	var ch entityChange
	if err := readJSON(r, &ch); err != nil {
		return err
	}
	bp, err := splitPath(ch.Path)
	if err != nil {
		return err
	}
	if err := c.need(p, ch.Path, sas.Manage); err != nil {
		return err
	}
	if (ch.Kind == "subscription") != (bp.Subscription != "") {
		return badRequest("a subscription's path is topic/Subscriptions/name; %q is not one of a %s", ch.Path, ch.Kind)
	}
	ctx := r.Context()
	switch ch.Kind {
	case "queue":
		var qp broker.QueueProperties
		if !ch.Create {
			q, err := c.b.GetQueue(ctx, bp.Entity)
			if err != nil {
				return err
			}
			qp = q.Properties
		}
		if err := setFields(&qp, ch.Properties); err != nil {
			return err
		}
		if ch.Create {
			err = c.b.CreateQueue(ctx, bp.Entity, qp)
		} else {
			err = c.b.UpdateQueue(ctx, bp.Entity, qp)
		}
	case "topic":
		var tp broker.TopicProperties
		if !ch.Create {
			t, err := c.b.GetTopic(ctx, bp.Entity)
			if err != nil {
				return err
			}
			tp = t.Properties
		}
		if err := setFields(&tp, ch.Properties); err != nil {
			return err
		}
		if ch.Create {
			err = c.b.CreateTopic(ctx, bp.Entity, tp)
		} else {
			err = c.b.UpdateTopic(ctx, bp.Entity, tp)
		}
	case "subscription":
		var sp broker.SubscriptionProperties
		if !ch.Create {
			s, err := c.b.GetSubscription(ctx, bp.Entity, bp.Subscription)
			if err != nil {
				return err
			}
			sp = s.Properties
		}
		if err := setFields(&sp, ch.Properties); err != nil {
			return err
		}
		if ch.Create {
			err = c.b.CreateSubscription(ctx, bp.Entity, bp.Subscription, sp)
		} else {
			err = c.b.UpdateSubscription(ctx, bp.Entity, bp.Subscription, sp)
		}
	default:
		return badRequest("kind %q is not queue, topic or subscription", ch.Kind)
	}
	if err != nil {
		return err
	}
	c.log.Info("console entity change", "key", p.keyName, "path", ch.Path, "create", ch.Create)
	v, err := c.entity(r.Context(), bp)
	if err != nil {
		return err
	}
	return writeJSON(w, v)
}

func (c *Console) deleteEntity(w http.ResponseWriter, r *http.Request, p *principal) error {
	path := r.URL.Query().Get("path")
	bp, err := splitPath(path)
	if err != nil {
		return err
	}
	if err := c.need(p, path, sas.Manage); err != nil {
		return err
	}
	ctx := r.Context()
	switch {
	case bp.Subscription != "":
		err = c.b.DeleteSubscription(ctx, bp.Entity, bp.Subscription)
	default:
		err = c.b.DeleteQueue(ctx, bp.Entity)
		if errors.Is(err, broker.ErrNotFound) {
			err = c.b.DeleteTopic(ctx, bp.Entity)
		}
	}
	if err != nil {
		return err
	}
	c.log.Info("console entity deleted", "key", p.keyName, "path", path)
	return writeJSON(w, map[string]string{"deleted": path})
}

// rule is a subscription rule as the console shows and edits it.
type rule struct {
	Name        string            `json:"name"`
	FilterType  string            `json:"filterType"` // true, false, sql, correlation
	SQL         string            `json:"sql,omitempty"`
	Correlation map[string]string `json:"correlation,omitempty"`
	Properties  map[string]any    `json:"properties,omitempty"` // correlation filter's application properties
	Action      string            `json:"action,omitempty"`
	Create      bool              `json:"create,omitempty"`
	Path        string            `json:"path,omitempty"`
}

var filterTypes = [...]string{broker.FilterTrue: "true", broker.FilterFalse: "false", broker.FilterSQL: "sql", broker.FilterCorrelation: "correlation"}

func ruleView(r broker.RuleProperties) rule {
	v := rule{Name: r.Name, FilterType: filterTypes[r.Filter.Kind], SQL: r.Filter.SQL, Action: r.Action}
	if r.Filter.Kind == broker.FilterCorrelation {
		cf := r.Filter.Correlation
		v.Correlation = map[string]string{}
		for k, s := range map[string]string{"correlationId": cf.CorrelationID, "messageId": cf.MessageID, "to": cf.To,
			"replyTo": cf.ReplyTo, "subject": cf.Subject, "sessionId": cf.SessionID, "replyToSessionId": cf.ReplyToSessionID,
			"contentType": cf.ContentType} {
			if s != "" {
				v.Correlation[k] = s
			}
		}
		v.Properties = cf.Properties
	}
	return v
}

// ruleProps converts the console's rule to the broker's, checking the SQL
// as the management API does (the broker parses it again).
func ruleProps(v rule) (broker.RuleProperties, error) {
	rp := broker.RuleProperties{Name: v.Name, Action: v.Action}
	switch v.FilterType {
	case "true", "":
		rp.Filter.Kind = broker.FilterTrue
	case "false":
		rp.Filter.Kind = broker.FilterFalse
	case "sql":
		rp.Filter.Kind, rp.Filter.SQL = broker.FilterSQL, v.SQL
	case "correlation":
		cf := &rp.Filter.Correlation
		rp.Filter.Kind = broker.FilterCorrelation
		for k, s := range v.Correlation {
			switch k {
			case "correlationId":
				cf.CorrelationID = s
			case "messageId":
				cf.MessageID = s
			case "to":
				cf.To = s
			case "replyTo":
				cf.ReplyTo = s
			case "subject":
				cf.Subject = s
			case "sessionId":
				cf.SessionID = s
			case "replyToSessionId":
				cf.ReplyToSessionID = s
			case "contentType":
				cf.ContentType = s
			default:
				return rp, badRequest("a correlation filter has no field %q", k)
			}
		}
		cf.Properties = v.Properties
	default:
		return rp, badRequest("filter type %q is not true, false, sql or correlation", v.FilterType)
	}
	return rp, nil
}

func (c *Console) putRule(w http.ResponseWriter, r *http.Request, p *principal) error {
	var v rule
	if err := readJSON(r, &v); err != nil {
		return err
	}
	bp, err := splitPath(v.Path)
	if err != nil {
		return err
	}
	if bp.Subscription == "" {
		return badRequest("rules belong to subscriptions: %q is not topic/Subscriptions/name", v.Path)
	}
	if err := c.need(p, v.Path, sas.Manage); err != nil {
		return err
	}
	rp, err := ruleProps(v)
	if err != nil {
		return err
	}
	if v.Create {
		err = c.b.AddRule(r.Context(), bp.Entity, bp.Subscription, rp)
	} else {
		err = c.b.UpdateRule(r.Context(), bp.Entity, bp.Subscription, rp)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, ruleView(rp))
}

func (c *Console) deleteRule(w http.ResponseWriter, r *http.Request, p *principal) error {
	path, name := r.URL.Query().Get("path"), r.URL.Query().Get("name")
	bp, err := splitPath(path)
	if err != nil {
		return err
	}
	if err := c.need(p, path, sas.Manage); err != nil {
		return err
	}
	if err := c.b.RemoveRule(r.Context(), bp.Entity, bp.Subscription, name); err != nil {
		return err
	}
	return writeJSON(w, map[string]string{"deleted": name})
}

// validation is the answer to a filter or action being typed.
type validation struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// validate parses a SQL filter or action with the broker's parser.
func (c *Console) validate(w http.ResponseWriter, r *http.Request, p *principal) error {
	var in struct {
		Kind string `json:"kind"` // filter or action
		Text string `json:"text"`
	}
	if err := readJSON(r, &in); err != nil {
		return err
	}
	var err error
	switch in.Kind {
	case "filter":
		_, err = filter.ParseSQL(in.Text)
	case "action":
		if strings.TrimSpace(in.Text) != "" {
			_, err = filter.ParseAction(in.Text)
		}
	default:
		return badRequest("kind %q is not filter or action", in.Kind)
	}
	if err == nil {
		return writeJSON(w, validation{OK: true})
	}
	v := validation{Error: err.Error()}
	var pe *filter.ParseError
	if errors.As(err, &pe) {
		v.Line, v.Column, v.Error = pe.Line, pe.Column, fmt.Sprintf("line %d, column %d: %s", pe.Line, pe.Column, pe.Msg)
	}
	return writeJSON(w, v)
}
