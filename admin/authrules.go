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
		for {
			el, ok, err := r.child(se.Name.Local)
			if err != nil {
				return err
			}
			if !ok {
				*dst = rules
				return nil
			}
			if el.Name.Local != "AuthorizationRule" {
				return badRequestf("property AuthorizationRules: unexpected element <%s>, want AuthorizationRule", el.Name.Local)
			}
			if len(rules) == broker.MaxAuthorizationRules {
				return badRequestf("property AuthorizationRules: more than %d rules", broker.MaxAuthorizationRules)
			}
			if typ, ok := instanceType(el); ok && typ != "SharedAccessAuthorizationRule" {
				return badRequestf("property AuthorizationRules: i:type %q is not SharedAccessAuthorizationRule", truncate(typ, 40))
			}
			var rule broker.AuthorizationRule
			_, err = decodeFields(r, "AuthorizationRule", fields{
				"ClaimType":    nil,
				"ClaimValue":   nil,
				"CreatedTime":  nil,
				"ModifiedTime": nil,
				"KeyName":      strField(&rule.KeyName),
				"PrimaryKey":   strField(&rule.PrimaryKey),
				"SecondaryKey": strField(&rule.SecondaryKey),
				"Rights":       rightsField(&rule.Rights),
			})
			if err != nil {
				return err
			}
			rules = append(rules, rule)
		}
	}
}

// rightsField decodes <Rights><AccessRights>Send</AccessRights>…</Rights>.
func rightsField(dst *[]string) decodeFunc {
	return func(r *reader, se xml.StartElement) error {
		for {
			el, ok, err := r.child(se.Name.Local)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if el.Name.Local != "AccessRights" {
				return badRequestf("property AuthorizationRule.Rights: unexpected element <%s>, want AccessRights", el.Name.Local)
			}
			s, err := r.text("AccessRights")
			if err != nil {
				return err
			}
			*dst = append(*dst, s)
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
