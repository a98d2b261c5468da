package broker

import (
	"strings"
)

// Name limits, as Service Bus.
const (
	MaxEntityPathLength = 260 // queue and topic names
	MaxChildNameLength  = 50  // subscription and rule names
	MaxIDLength         = 128 // message and session ids
)

// validateEntityName checks a queue or topic name: letters, digits, '.', '-',
// '_', '/', at most 260 characters, starting and ending with a letter or
// digit, no empty path segment, no reserved '$' segment.
func validateEntityName(kind, name string) error {
	if name == "" {
		return errorf(ErrInvalidArgument, "%s name is empty", kind)
	}
	if len(name) > MaxEntityPathLength {
		return errorf(ErrInvalidArgument, "%s name %q is %d characters, more than %d", kind, name, len(name), MaxEntityPathLength)
	}
	if err := checkChars(kind, name, true); err != nil {
		return err
	}
	for rest := name; rest != ""; {
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
			if rest == "" {
				seg = ""
			}
		} else {
			rest = ""
		}
		if seg == "" {
			return errorf(ErrInvalidArgument, "%s name %q has an empty path segment", kind, name)
		}
		if strings.EqualFold(seg, "subscriptions") || strings.EqualFold(seg, "rules") {
			return errorf(ErrInvalidArgument, "%s name %q uses the reserved segment %q", kind, name, seg)
		}
	}
	return nil
}

// validateChildName checks a subscription or rule name (no '/', ≤ 50).
func validateChildName(kind, name string) error {
	if name == "" {
		return errorf(ErrInvalidArgument, "%s name is empty", kind)
	}
	if len(name) > MaxChildNameLength {
		return errorf(ErrInvalidArgument, "%s name %q is %d characters, more than %d", kind, name, len(name), MaxChildNameLength)
	}
	if kind == "rule" && name == DefaultRuleName {
		return nil
	}
	return checkChars(kind, name, false)
}

func checkChars(kind, name string, slash bool) error {
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '-' || c == '_' || (slash && c == '/')
		if !ok {
			return errorf(ErrInvalidArgument, "%s name %q contains %q; allowed are letters, digits, '.', '-', '_'%s", kind, name, c, map[bool]string{true: " and '/'", false: ""}[slash])
		}
	}
	first, last := name[0], name[len(name)-1]
	if !alnum(first) || !alnum(last) {
		return errorf(ErrInvalidArgument, "%s name %q must start and end with a letter or digit", kind, name)
	}
	return nil
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func fold(s string) string { return strings.ToLower(s) }

// Subqueue selects the part of a queue or subscription a path addresses.
type Subqueue uint8

// Subqueues.
const (
	SubqueueMain               Subqueue = 0 // the entity itself
	SubqueueDeadLetter         Subqueue = 1 // <entity>/$DeadLetterQueue
	SubqueueTransferDeadLetter Subqueue = 2 // <entity>/$Transfer/$DeadLetterQueue
)

// String returns the path suffix of the subqueue.
func (s Subqueue) String() string {
	switch s {
	case SubqueueDeadLetter:
		return "/$DeadLetterQueue"
	case SubqueueTransferDeadLetter:
		return "/$Transfer/$DeadLetterQueue"
	}
	return ""
}

// Path is a parsed entity address.
type Path struct {
	Entity       string   // queue or topic name, as given
	Subscription string   // "" unless the path addresses a subscription
	Subqueue     Subqueue // main, dead-letter or transfer dead-letter
}

// String renders the path in the form the SDKs use.
func (p Path) String() string {
	s := p.Entity
	if p.Subscription != "" {
		s += "/Subscriptions/" + p.Subscription
	}
	return s + p.Subqueue.String()
}

// ParsePath parses an address: "q", "t/Subscriptions/s", and either with
// "/$DeadLetterQueue" or "/$Transfer/$DeadLetterQueue", case-insensitively.
// A trailing "/$management" is not part of an entity path and is refused.
func ParsePath(s string) (Path, error) {
	var p Path
	rest := s
	switch {
	case hasSuffixFold(rest, "/$transfer/$deadletterqueue"):
		p.Subqueue = SubqueueTransferDeadLetter
		rest = rest[:len(rest)-len("/$transfer/$deadletterqueue")]
	case hasSuffixFold(rest, "/$deadletterqueue"):
		p.Subqueue = SubqueueDeadLetter
		rest = rest[:len(rest)-len("/$deadletterqueue")]
	}
	if i := lastIndexFold(rest, "/subscriptions/"); i >= 0 {
		p.Entity = rest[:i]
		p.Subscription = rest[i+len("/subscriptions/"):]
		if err := validateChildName("subscription", p.Subscription); err != nil {
			return Path{}, err
		}
	} else {
		p.Entity = rest
	}
	if err := validateEntityName("entity", p.Entity); err != nil {
		return Path{}, err
	}
	return p, nil
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// lastIndexFold is strings.LastIndex for an ASCII lower-case sep, ignoring
// case, without allocating.
func lastIndexFold(s, sep string) int {
	for i := len(s) - len(sep); i >= 0; i-- {
		if strings.EqualFold(s[i:i+len(sep)], sep) {
			return i
		}
	}
	return -1
}
