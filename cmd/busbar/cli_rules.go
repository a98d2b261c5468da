package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// flagSet is the standard library's flag set; the short name keeps the
// command skeletons readable.
type flagSet = flag.FlagSet

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parseProperty reads "key=value" or "key:type=value" (types: string, int
// (64-bit), int32, long, float, double, bool, time (RFC 3339)) into a key
// and an application-property value.
func parseProperty(s string) (string, any, error) {
	kt, v, ok := strings.Cut(s, "=")
	if !ok || kt == "" {
		return "", nil, fmt.Errorf("property %q: want key=value or key:type=value", s)
	}
	key, typ := kt, "string"
	if i := strings.LastIndexByte(kt, ':'); i >= 0 {
		key, typ = kt[:i], strings.ToLower(kt[i+1:])
	}
	if key == "" {
		return "", nil, fmt.Errorf("property %q: empty key", s)
	}
	var (
		val any
		err error
	)
	switch typ {
	case "string", "str":
		val = v
	case "int", "long", "int64":
		val, err = strconv.ParseInt(v, 10, 64)
	case "int32":
		var n int64
		n, err = strconv.ParseInt(v, 10, 32)
		val = int32(n)
	case "float", "double", "float64":
		val, err = strconv.ParseFloat(v, 64)
	case "bool", "boolean":
		val, err = strconv.ParseBool(v)
	case "time", "timestamp":
		val, err = time.Parse(time.RFC3339Nano, v)
	default:
		return "", nil, fmt.Errorf("property %q: unknown type %q (string, int, int32, long, float, double, bool, time)", s, typ)
	}
	if err != nil {
		return "", nil, fmt.Errorf("property %q: %v is not a valid %s", s, v, typ)
	}
	return key, val, nil
}

// parseProperties turns repeated --property flags into a map.
func parseProperties(flagName string, kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		k, v, err := parseProperty(kv)
		if err != nil {
			return nil, usageErrorf("--%s: %v", flagName, err)
		}
		m[k] = v
	}
	return m, nil
}

// ruleFlags are the flags describing a rule's filter and action.
type ruleFlags struct {
	fs          *flag.FlagSet
	sql, action string
	corr        map[string]*string
	corrProps   multiFlag
}

// correlationFields are the system properties a correlation filter can
// match, by flag suffix.
var correlationFields = []struct {
	flag, help string
	field      func(*admin.CorrelationFilter) **string
}{
	{"id", "correlation id", func(c *admin.CorrelationFilter) **string { return &c.CorrelationID }},
	{"message-id", "message id", func(c *admin.CorrelationFilter) **string { return &c.MessageID }},
	{"subject", "subject (label)", func(c *admin.CorrelationFilter) **string { return &c.Subject }},
	{"session-id", "session id", func(c *admin.CorrelationFilter) **string { return &c.SessionID }},
	{"to", "to", func(c *admin.CorrelationFilter) **string { return &c.To }},
	{"reply-to", "reply-to", func(c *admin.CorrelationFilter) **string { return &c.ReplyTo }},
	{"reply-to-session-id", "reply-to session id", func(c *admin.CorrelationFilter) **string { return &c.ReplyToSessionID }},
	{"content-type", "content type", func(c *admin.CorrelationFilter) **string { return &c.ContentType }},
}

func registerRuleFlags(fs *flag.FlagSet) *ruleFlags {
	rf := &ruleFlags{fs: fs, corr: map[string]*string{}}
	fs.StringVar(&rf.sql, "sql", "", `SQL filter, e.g. "priority > 5 AND region = 'eu'"`)
	for _, cf := range correlationFields {
		rf.corr[cf.flag] = fs.String("correlation-"+cf.flag, "", "correlation filter: match the "+cf.help)
	}
	fs.Var(&rf.corrProps, "correlation-property", "correlation filter: match an application property, key=value or key:type=value (repeatable)")
	fs.StringVar(&rf.action, "action", "", `SQL rule action, e.g. "SET priority = 'high'" ("" removes it on update)`)
	return rf
}

// rule builds the filter and action from the flags given, starting from cur
// (nil when creating). given reports whether any rule flag was used.
func (rf *ruleFlags) rule(cur *admin.RuleProperties) (filter admin.RuleFilter, action admin.RuleAction, given bool, err error) {
	set := setFlags(rf.fs)
	if cur != nil {
		filter, action = cur.Filter, cur.Action
	}
	var corr *admin.CorrelationFilter
	for _, cf := range correlationFields {
		if set["correlation-"+cf.flag] {
			if corr == nil {
				corr = &admin.CorrelationFilter{}
			}
			*cf.field(corr) = ptr(*rf.corr[cf.flag])
		}
	}
	if len(rf.corrProps) > 0 {
		if corr == nil {
			corr = &admin.CorrelationFilter{}
		}
		if corr.ApplicationProperties, err = parseProperties("correlation-property", rf.corrProps); err != nil {
			return nil, nil, false, err
		}
	}
	switch {
	case set["sql"] && corr != nil:
		return nil, nil, false, usageErrorf("--sql and --correlation-* are two kinds of filter: give one")
	case set["sql"]:
		filter, given = &admin.SQLFilter{Expression: rf.sql}, true
	case corr != nil:
		filter, given = corr, true
	}
	if set["action"] {
		given = true
		action = nil
		if strings.TrimSpace(rf.action) != "" {
			action = &admin.SQLAction{Expression: rf.action}
		}
	}
	if filter == nil {
		filter = &admin.TrueFilter{}
	}
	return filter, action, given, nil
}

// ruleJSON is the --json shape of a rule.
type ruleJSON struct {
	Name   string         `json:"name"`
	Filter map[string]any `json:"filter"`
	Action *string        `json:"action,omitempty"`
}

func ruleView(r admin.RuleProperties) ruleJSON {
	v := ruleJSON{Name: r.Name, Filter: map[string]any{}}
	switch f := r.Filter.(type) {
	case *admin.SQLFilter:
		v.Filter["type"], v.Filter["sql"] = "sql", f.Expression
		if len(f.Parameters) > 0 {
			v.Filter["parameters"] = f.Parameters
		}
	case *admin.CorrelationFilter:
		v.Filter["type"] = "correlation"
		for _, cf := range correlationFields {
			if p := *cf.field(f); p != nil {
				v.Filter[cf.flag] = *p
			}
		}
		if len(f.ApplicationProperties) > 0 {
			v.Filter["properties"] = f.ApplicationProperties
		}
	case *admin.TrueFilter:
		v.Filter["type"] = "true"
	case *admin.FalseFilter:
		v.Filter["type"] = "false"
	default:
		v.Filter["type"] = fmt.Sprintf("%T", f)
	}
	if a, ok := r.Action.(*admin.SQLAction); ok && a != nil {
		v.Action = &a.Expression
	}
	return v
}

// filterText renders a filter on one line for tables.
func filterText(v ruleJSON) string {
	switch v.Filter["type"] {
	case "sql":
		return fmt.Sprint(v.Filter["sql"])
	case "correlation":
		var parts []string
		for _, cf := range correlationFields {
			if s, ok := v.Filter[cf.flag]; ok {
				parts = append(parts, fmt.Sprintf("%s=%v", cf.flag, s))
			}
		}
		if props, ok := v.Filter["properties"].(map[string]any); ok {
			for _, k := range sortedKeys(props) {
				parts = append(parts, fmt.Sprintf("%s=%v", k, props[k]))
			}
		}
		return "correlation: " + strings.Join(parts, ", ")
	}
	return fmt.Sprint(v.Filter["type"])
}

// ---- rule commands ----

func ruleCommand(env *cliEnv, args []string) error {
	return group{name: "rule", summary: "Create, list, show, update and delete the rules (filters and actions) of a subscription.", subs: []subcommand{
		{"create", "add a rule to a subscription", ruleCreate},
		{"list", "list a subscription's rules", ruleList},
		{"show", "show a rule", ruleShow},
		{"update", "change a rule's filter or action", ruleUpdate},
		{"delete", "remove a rule", ruleDelete},
	}}.dispatch(env, args)
}

func ruleCreate(env *cliEnv, args []string) error {
	c := command{path: "rule create", args: "TOPIC SUBSCRIPTION NAME [flags]",
		summary: "Add a rule to a subscription. Without --sql or --correlation-* the filter matches every message.",
		examples: `busbar rule create events audit high --sql "priority > 5"
busbar rule create events audit invoices --correlation-subject invoice --correlation-property region=eu
busbar rule create events audit tag --sql "1=1" --action "SET seen = true"`}
	var rf *ruleFlags
	return adminCommand(env, c, args, 3, 3, func(fs *flagSet) { rf = registerRuleFlags(fs) }, func(s *adminSession, pos []string) error {
		filter, action, _, err := rf.rule(nil)
		if err != nil {
			return err
		}
		resp, err := s.ac.CreateRule(s.ctx, pos[0], pos[1], &admin.CreateRuleOptions{Name: &pos[2], Filter: filter, Action: action})
		if err != nil {
			return fmt.Errorf("creating rule %s/%s/%s: %w", pos[0], pos[1], pos[2], err)
		}
		return s.out.emit(ruleView(resp.RuleProperties), func(w io.Writer) {
			fmt.Fprintf(w, "created rule %s on %s/%s\n", resp.Name, pos[0], pos[1])
		})
	})
}

func ruleList(env *cliEnv, args []string) error {
	c := command{path: "rule list", args: "TOPIC SUBSCRIPTION [flags]", summary: "List a subscription's rules.",
		examples: `busbar rule list events audit
busbar rule list events audit --json`}
	return adminCommand(env, c, args, 2, 2, nil, func(s *adminSession, pos []string) error {
		var rules []ruleJSON
		pager := s.ac.NewListRulesPager(pos[0], pos[1], nil)
		for pager.More() {
			page, err := pager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing rules of %s/%s: %w", pos[0], pos[1], err)
			}
			for _, r := range page.Rules {
				rules = append(rules, ruleView(r))
			}
		}
		sort.Slice(rules, func(i, j int) bool { return rules[i].Name < rules[j].Name })
		if rules == nil {
			rules = []ruleJSON{}
		}
		return s.out.emit(rules, func(w io.Writer) {
			row(w, "NAME", "FILTER", "ACTION")
			for _, r := range rules {
				row(w, r.Name, filterText(r), orDash(r.Action))
			}
		})
	})
}

func ruleShow(env *cliEnv, args []string) error {
	c := command{path: "rule show", args: "TOPIC SUBSCRIPTION NAME [flags]", summary: "Show a rule's filter and action.",
		examples: `busbar rule show events audit '$Default'`}
	return adminCommand(env, c, args, 3, 3, nil, func(s *adminSession, pos []string) error {
		r, err := s.ac.GetRule(s.ctx, pos[0], pos[1], pos[2], nil)
		if err != nil {
			return fmt.Errorf("reading rule %s/%s/%s: %w", pos[0], pos[1], pos[2], err)
		}
		if r == nil {
			return notFoundf("rule %s/%s/%s not found", pos[0], pos[1], pos[2])
		}
		v := ruleView(r.RuleProperties)
		return s.out.emit(v, func(w io.Writer) {
			row(w, "Name", v.Name)
			row(w, "Filter", filterText(v))
			row(w, "Action", orDash(v.Action))
		})
	})
}

func ruleUpdate(env *cliEnv, args []string) error {
	c := command{path: "rule update", args: "TOPIC SUBSCRIPTION NAME [flags]",
		summary: "Replace a rule's filter (--sql or --correlation-*) or action (--action); what is not given is kept.",
		examples: `busbar rule update events audit high --sql "priority > 8"
busbar rule update events audit tag --action ""`}
	var rf *ruleFlags
	return adminCommand(env, c, args, 3, 3, func(fs *flagSet) { rf = registerRuleFlags(fs) }, func(s *adminSession, pos []string) error {
		cur, err := s.ac.GetRule(s.ctx, pos[0], pos[1], pos[2], nil)
		if err != nil {
			return fmt.Errorf("reading rule %s/%s/%s: %w", pos[0], pos[1], pos[2], err)
		}
		if cur == nil {
			return notFoundf("rule %s/%s/%s not found", pos[0], pos[1], pos[2])
		}
		filter, action, given, err := rf.rule(&cur.RuleProperties)
		if err != nil {
			return err
		}
		if !given {
			return usageErrorf("rule update: give --sql, --correlation-* or --action")
		}
		resp, err := s.ac.UpdateRule(s.ctx, pos[0], pos[1], admin.RuleProperties{Name: pos[2], Filter: filter, Action: action})
		if err != nil {
			return fmt.Errorf("updating rule %s/%s/%s: %w", pos[0], pos[1], pos[2], err)
		}
		return s.out.emit(ruleView(resp.RuleProperties), func(w io.Writer) {
			fmt.Fprintf(w, "updated rule %s on %s/%s\n", pos[2], pos[0], pos[1])
		})
	})
}

func ruleDelete(env *cliEnv, args []string) error {
	c := command{path: "rule delete", args: "TOPIC SUBSCRIPTION NAME [flags]", summary: "Remove a rule from a subscription.",
		examples: `busbar rule delete events audit '$Default'`}
	return adminCommand(env, c, args, 3, 3, nil, func(s *adminSession, pos []string) error {
		if _, err := s.ac.DeleteRule(s.ctx, pos[0], pos[1], pos[2], nil); err != nil {
			return fmt.Errorf("deleting rule %s/%s/%s: %w", pos[0], pos[1], pos[2], err)
		}
		return s.done("deleted rule %s from %s/%s", pos[2], pos[0], pos[1])
	})
}
