package broker

import (
	"strings"
)

// AuthorizationRule is a shared access rule that belongs to one queue or
// topic (Service Bus's entity-level AuthorizationRules): a key name, its
// keys and its rights. The broker keeps the rules with the entity's
// properties; the protocol layers enforce them (see sas).
type AuthorizationRule struct {
	KeyName      string
	PrimaryKey   string
	SecondaryKey string
	// Rights are "Manage", "Send" and/or "Listen", as given.
	Rights []string
}

// MaxAuthorizationRules is Service Bus's limit of rules per entity.
const MaxAuthorizationRules = 12

// checkAuthRules validates the rules of an entity of kind k.
func checkAuthRules(k entityKind, rules []AuthorizationRule) error {
	if len(rules) == 0 {
		return nil
	}
	if k == kindSubscription {
		return errorf(ErrInvalidArgument, "a subscription has no authorization rules of its own; set them on its topic")
	}
	if len(rules) > MaxAuthorizationRules {
		return errorf(ErrInvalidArgument, "%d authorization rules, more than %d", len(rules), MaxAuthorizationRules)
	}
	seen := map[string]bool{}
	for i, r := range rules {
		switch {
		case r.KeyName == "" || len(r.KeyName) > 256:
			return errorf(ErrInvalidArgument, "authorization rule %d: KeyName must have 1 to 256 characters", i)
		case seen[strings.ToLower(r.KeyName)]:
			return errorf(ErrInvalidArgument, "authorization rule %q appears more than once", r.KeyName)
		case len(r.PrimaryKey) < 1 || len(r.PrimaryKey) > 256 || len(r.SecondaryKey) > 256:
			return errorf(ErrInvalidArgument, "authorization rule %q: PrimaryKey is required, and keys have at most 256 characters", r.KeyName)
		case len(r.Rights) == 0:
			return errorf(ErrInvalidArgument, "authorization rule %q grants no rights (want Manage, Send and/or Listen)", r.KeyName)
		}
		seen[strings.ToLower(r.KeyName)] = true
		for _, right := range r.Rights {
			switch strings.ToLower(right) {
			case "manage", "send", "listen":
			default:
				return errorf(ErrInvalidArgument, "authorization rule %q: unknown right %q (want Manage, Send or Listen)", r.KeyName, right)
			}
		}
	}
	return nil
}

// EntityAuthorizationRules returns the rules of the queue or topic a path
// names ("queue", "topic/Subscriptions/sub", any sub-queue: the rules of
// "queue" or "topic"), and that entity's name; none for a missing entity.
func (b *Broker) EntityAuthorizationRules(path string) (string, []AuthorizationRule) {
	name, _, _ := strings.Cut(strings.Trim(path, "/"), "/")
	if name == "" {
		return "", nil
	}
	e, err := b.lookupEntity(name)
	if err != nil || e.kind == kindSubscription {
		return "", nil
	}
	return e.name, e.props().AuthRules
}

func encodeAuthRules(e *enc, rules []AuthorizationRule) {
	e.uv(uint64(len(rules)))
	for _, r := range rules {
		e.str(r.KeyName)
		e.str(r.PrimaryKey)
		e.str(r.SecondaryKey)
		e.uv(uint64(len(r.Rights)))
		for _, right := range r.Rights {
			e.str(right)
		}
	}
}

func decodeAuthRules(d *dec) []AuthorizationRule {
	n := d.uv()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	rules := make([]AuthorizationRule, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		r := AuthorizationRule{KeyName: d.str(), PrimaryKey: d.str(), SecondaryKey: d.str()}
		m := d.uv()
		if m > uint64(len(d.b)) {
			d.fail()
			return nil
		}
		for j := uint64(0); j < m && d.err == nil; j++ {
			r.Rights = append(r.Rights, d.str())
		}
		rules = append(rules, r)
	}
	return rules
}
