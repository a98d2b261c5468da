package admin

import (
	"encoding/xml"

	"github.com/busbar-io/busbar/broker"
)

// authRulesField decodes a queue's or topic's AuthorizationRules: a list
// of SharedAccessAuthorizationRule elements (key name, keys, rights). The
// broker stores them and the listeners accept tokens signed with their keys
// for that entity. ClaimType, ClaimValue and the times are accepted and not
// kept.
func authRulesField(dst *[]broker.AuthorizationRule) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		var rules []broker.AuthorizationRule
		err := eachChild(r, "AuthorizationRules", se.Name.Local, "AuthorizationRule", func(el xml.StartElement) error {
			if len(rules) == broker.MaxAuthorizationRules {
				return badRequestf("property AuthorizationRules: more than %d rules", broker.MaxAuthorizationRules)
			}
			if typ, ok := instanceType(el); ok && typ != "SharedAccessAuthorizationRule" {
				return badRequestf("property AuthorizationRules: i:type %q is not SharedAccessAuthorizationRule", truncate(typ, 40))
			}
			var rule broker.AuthorizationRule
			_, err := decodeFields(r, "AuthorizationRule", fields{
				"ClaimType":    nil,
				"ClaimValue":   nil,
				"CreatedTime":  nil,
				"ModifiedTime": nil,
				"KeyName":      strField(&rule.KeyName),
				"PrimaryKey":   strField(&rule.PrimaryKey),
				"SecondaryKey": strField(&rule.SecondaryKey),
				"Rights": func(r *reader, se xml.StartElement) error {
					return eachChild(r, "AuthorizationRule.Rights", se.Name.Local, "AccessRights", func(xml.StartElement) error {
						s, err := r.text("AccessRights")
						rule.Rights = append(rule.Rights, s)
						return err
					})
				},
			})
			rules = append(rules, rule)
			return err
		})
		*dst = rules
		return err
	}
}

// eachChild calls fn for each child element of parent, which must all be
// named want (prop names the list in errors).
func eachChild(r *reader, prop, parent, want string, fn func(xml.StartElement) error) error {
	for {
		el, ok, err := r.child(parent)
		if err != nil || !ok {
			return err
		}
		if el.Name.Local != want {
			return badRequestf("property %s: unexpected element <%s>, want %s", prop, el.Name.Local, want)
		}
		if err := fn(el); err != nil {
			return err
		}
	}
}

// writeAuthRules writes AuthorizationRules as the service does.
func writeAuthRules(w *writer, rules []broker.AuthorizationRule) {
	if len(rules) == 0 {
		w.empty("AuthorizationRules")
		return
	}
	w.open("AuthorizationRules")
	for _, r := range rules {
		w.open("AuthorizationRule", "i:type", "SharedAccessAuthorizationRule")
		w.text("ClaimType", "SharedAccessKey")
		w.text("ClaimValue", "None")
		w.open("Rights")
		for _, right := range r.Rights {
			w.text("AccessRights", right)
		}
		w.close("Rights")
		w.text("KeyName", r.KeyName)
		w.text("PrimaryKey", r.PrimaryKey)
		if r.SecondaryKey != "" {
			w.text("SecondaryKey", r.SecondaryKey)
		}
		w.close("AuthorizationRule")
	}
	w.close("AuthorizationRules")
}
