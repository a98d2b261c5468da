package broker

// What management clients see of an entity, in the service's terms.

import (
	"strings"
	"time"
)

// accessedAt is the AccessedAt a management client sees: for a queue or a
// topic the zero time until a client has used it (sent, received, peeked;
// its idle clock, accessed, also starts at creation and update), as Service
// Bus reports it; a subscription's is never zero (Service Bus sets it at
// creation). After a restart the idle clock restarts, so an entity unused
// since reports the restart time.
func accessedAt(k entityKind, accessed int64, created, updated time.Time) time.Time {
	if k != kindSubscription && (accessed == created.UnixNano() || accessed == updated.UnixNano()) {
		return time.Time{}
	}
	return time.Unix(0, accessed).UTC()
}

// titleKind names an entity kind as Service Bus's error texts do ("Queue",
// "Topic", "Subscription"), which the SDKs' tests match.
func titleKind(k entityKind) string {
	s := k.String()
	return strings.ToUpper(s[:1]) + s[1:]
}
