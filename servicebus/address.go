package servicebus

import (
	"fmt"
	"strings"
)

// Node is what a link address names.
type Node uint8

// The nodes a Service Bus address can name.
const (
	NodeEntity     Node = iota // a queue, topic or subscription (or one of its sub-queues)
	NodeManagement             // <entity>/$management
	NodeCBS                    // $cbs
)

// SubQueue is the sub-queue part of an entity address.
type SubQueue uint8

// Sub-queues of a queue or subscription.
const (
	SubQueueNone               SubQueue = iota
	SubQueueDeadLetter                  // /$DeadLetterQueue
	SubQueueTransferDeadLetter          // /$Transfer/$DeadLetterQueue
)

// Address is a parsed link address.
type Address struct {
	Node Node
	// Entity is the queue or topic path, or "topic/Subscriptions/sub", as the
	// client spelled it (entity names are case-insensitive; the broker folds case).
	Entity string
	// SubQueue is the dead-letter sub-queue named, if any.
	SubQueue SubQueue
}

// Path returns the address's entity path including the sub-queue suffix, as
// the broker names receive sources ("q/$DeadLetterQueue").
func (a Address) Path() string {
	switch a.SubQueue {
	case SubQueueDeadLetter:
		return a.Entity + "/$DeadLetterQueue"
	case SubQueueTransferDeadLetter:
		return a.Entity + "/$Transfer/$DeadLetterQueue"
	}
	return a.Entity
}

// maxAddressLen bounds what is parsed: entity paths are at most 260
// characters, plus a subscription name, sub-queue and scheme/host.
const maxAddressLen = 2048

// ParseAddress parses a link address as the SDKs send it: a bare path
// ("orders", "orders/Subscriptions/s1/$DeadLetterQueue", "orders/$management",
// "$cbs") or a full URI ("amqps://host/orders"), whose scheme and authority
// are dropped. Matching of the reserved segments is case-insensitive.
func ParseAddress(s string) (Address, error) {
	if s == "" {
		return Address{}, fmt.Errorf("empty address")
	}
	if len(s) > maxAddressLen {
		return Address{}, fmt.Errorf("address of %d bytes is too long", len(s))
	}
	p := s
	if i := strings.Index(p, "://"); i >= 0 {
		p = p[i+3:]
		j := strings.IndexByte(p, '/')
		if j < 0 {
			return Address{}, fmt.Errorf("address %q names a host but no entity", s)
		}
		p = p[j:]
	}
	p = strings.Trim(p, "/")
	if strings.EqualFold(p, "$cbs") {
		return Address{Node: NodeCBS}, nil
	}
	a := Address{Node: NodeEntity}
	if base, ok := cutSuffixFold(p, "/$management"); ok {
		a.Node, p = NodeManagement, base
	}
	if base, ok := cutSuffixFold(p, "/$Transfer/$DeadLetterQueue"); ok {
		a.SubQueue, p = SubQueueTransferDeadLetter, base
	} else if base, ok := cutSuffixFold(p, "/$DeadLetterQueue"); ok {
		a.SubQueue, p = SubQueueDeadLetter, base
	}
	if p == "" || strings.Contains(p, "$") {
		return Address{}, fmt.Errorf("address %q does not name an entity", s)
	}
	a.Entity = p
	return a, nil
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}
