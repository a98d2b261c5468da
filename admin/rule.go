package admin

import (
	"encoding/xml"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/broker/filter"
)

// decodeRule decodes the RuleDescription (or a subscription's
// DefaultRuleDescription) the reader is inside of. The name is "" when the
// body carries none.
func decodeRule(r *reader, root string) (broker.RuleProperties, error) {
	var (
		rp      broker.RuleProperties
		haveFlt bool
	)
	_, err := decodeFields(r, root, fields{
		"Filter": func(r *reader, se xml.StartElement) error {
			haveFlt = true
			return decodeFilter(r, se, &rp.Filter)
		},
		"Action": func(r *reader, se xml.StartElement) error {
			return decodeAction(r, se, &rp.Action, &rp.ActionParameters)
		},
		"Name":      strField(&rp.Name),
		"CreatedAt": nil,
	})
	if err != nil {
		return broker.RuleProperties{}, err
	}
	if !haveFlt {
		rp.Filter = broker.RuleFilter{Kind: broker.FilterTrue}
	}
	return rp, nil
}

// decodeFilter decodes a Filter element by its xsi:type.
func decodeFilter(r *reader, se xml.StartElement, f *broker.RuleFilter) error {
	typ, ok := instanceType(se)
	if !ok {
		return badRequestf("property Filter has no i:type (SqlFilter, CorrelationFilter, TrueFilter or FalseFilter)")
	}
	var sqlExpr string
	switch typ {
	case "TrueFilter", "FalseFilter", "SqlFilter":
		var params map[string]any
		set, err := decodeFields(r, "Filter", fields{
			"SqlExpression":         strField(&sqlExpr),
			"CompatibilityLevel":    compatibilityLevel,
			"Parameters":            keyValuesField(&params, "Filter.Parameters"),
			"RequiresPreprocessing": nil,
		})
		if err != nil {
			return err
		}
		switch typ {
		case "TrueFilter":
			*f = broker.RuleFilter{Kind: broker.FilterTrue}
			return nil
		case "FalseFilter":
			*f = broker.RuleFilter{Kind: broker.FilterFalse}
			return nil
		}
		if !set["SqlExpression"] || sqlExpr == "" {
			return badRequestf("property Filter.SqlExpression is required for a SqlFilter")
		}
		if err := checkSQL("Filter.SqlExpression", sqlExpr, false); err != nil {
			return err
		}
		*f = broker.RuleFilter{Kind: broker.FilterSQL, SQL: sqlExpr, Parameters: params}
		return nil
	case "CorrelationFilter":
		c := &f.Correlation
		*f = broker.RuleFilter{Kind: broker.FilterCorrelation}
		_, err := decodeFields(r, "Filter", fields{
			"CorrelationId":    strField(&c.CorrelationID),
			"MessageId":        strField(&c.MessageID),
			"To":               strField(&c.To),
			"ReplyTo":          strField(&c.ReplyTo),
			"Label":            strField(&c.Subject),
			"SessionId":        strField(&c.SessionID),
			"ReplyToSessionId": strField(&c.ReplyToSessionID),
			"ContentType":      strField(&c.ContentType),
			"Properties":       keyValuesField(&c.Properties, "Filter.Properties"),
		})
		return err
	}
	return badRequestf("property Filter: i:type %q is not one of SqlFilter, CorrelationFilter, TrueFilter, FalseFilter", truncate(typ, 40))
}

// decodeAction decodes an Action element: EmptyRuleAction or SqlRuleAction.
func decodeAction(r *reader, se xml.StartElement, action *string, params *map[string]any) error {
	typ, ok := instanceType(se)
	if !ok {
		return badRequestf("property Action has no i:type (SqlRuleAction or EmptyRuleAction)")
	}
	switch typ {
	case "EmptyRuleAction":
		*action, *params = "", nil
		_, err := decodeFields(r, "Action", fields{})
		return err
	case "SqlRuleAction":
		var expr string
		_, err := decodeFields(r, "Action", fields{
			"SqlExpression":         strField(&expr),
			"CompatibilityLevel":    compatibilityLevel,
			"Parameters":            keyValuesField(params, "Action.Parameters"),
			"RequiresPreprocessing": nil,
		})
		if err != nil {
			return err
		}
		if expr == "" {
			return badRequestf("property Action.SqlExpression is required for a SqlRuleAction")
		}
		if err := checkSQL("Action.SqlExpression", expr, true); err != nil {
			return err
		}
		*action = expr
		return nil
	}
	return badRequestf("property Action: i:type %q is not one of SqlRuleAction, EmptyRuleAction", truncate(typ, 40))
}

// checkSQL parses a filter or action so a syntax error is reported with the
// property it is in, before anything changes.
func checkSQL(prop, expr string, action bool) error {
	var err error
	if action {
		_, err = filter.ParseAction(expr)
	} else {
		_, err = filter.ParseSQL(expr)
	}
	if err != nil {
		return badRequestf("property %s: %v", prop, err)
	}
	return nil
}

func keyValuesField(dst *map[string]any, prop string) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		m, err := decodeKeyValues(r, prop)
		if len(m) > 0 {
			*dst = m
		}
		return err
	}
}

// compatibilityLevel accepts the level the clients send (20, the only one).
func compatibilityLevel(r *reader, se xml.StartElement) error {
	s, err := r.text("CompatibilityLevel")
	if err != nil {
		return err
	}
	_, err = parseInt("CompatibilityLevel", s, 0, 1<<31-1)
	return err
}

// writeRule writes a RuleDescription.
func writeRule(w *writer, rp broker.RuleProperties) {
	openDescription(w, "RuleDescription")
	writeFilter(w, rp.Filter)
	writeAction(w, rp.Action, rp.ActionParameters)
	w.time("CreatedAt", rp.CreatedAt)
	w.text("Name", rp.Name)
	w.close("RuleDescription")
}

const compatLevel = "20"

func writeFilter(w *writer, f broker.RuleFilter) {
	switch f.Kind {
	case broker.FilterFalse:
		w.open("Filter", "i:type", "FalseFilter")
		w.text("SqlExpression", "1=0")
		w.text("CompatibilityLevel", compatLevel)
	case broker.FilterSQL:
		w.open("Filter", "i:type", "SqlFilter")
		w.text("SqlExpression", f.SQL)
		w.text("CompatibilityLevel", compatLevel)
		writeKeyValues(w, "Parameters", f.Parameters)
	case broker.FilterCorrelation:
		c := f.Correlation
		w.open("Filter", "i:type", "CorrelationFilter")
		w.optional("CorrelationId", c.CorrelationID)
		w.optional("MessageId", c.MessageID)
		w.optional("To", c.To)
		w.optional("ReplyTo", c.ReplyTo)
		w.optional("Label", c.Subject)
		w.optional("SessionId", c.SessionID)
		w.optional("ReplyToSessionId", c.ReplyToSessionID)
		w.optional("ContentType", c.ContentType)
		writeKeyValues(w, "Properties", c.Properties)
	default:
		w.open("Filter", "i:type", "TrueFilter")
		w.text("SqlExpression", "1=1")
		w.text("CompatibilityLevel", compatLevel)
	}
	w.close("Filter")
}

func writeAction(w *writer, action string, params map[string]any) {
	if action == "" {
		w.empty("Action", "i:type", "EmptyRuleAction")
		return
	}
	w.open("Action", "i:type", "SqlRuleAction")
	w.text("SqlExpression", action)
	w.text("CompatibilityLevel", compatLevel)
	writeKeyValues(w, "Parameters", params)
	w.close("Action")
}

// isSQLKind reports whether a filter counts as a SQL filter.
func isSQLKind(k broker.FilterKind) bool { return k != broker.FilterCorrelation }
