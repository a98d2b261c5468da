package filter

import "strings"

// sysProp describes one Service Bus system property.
type sysProp struct {
	name     string // canonical spelling, passed to Message.SystemProperty
	settable bool   // a rule action may SET it
	typ      kind   // the type a SET converts to; kNull for no conversion
}

// systemProperties lists the system properties the sys. scope knows, keyed
// by lower-case name. Subject is the AMQP-era alias of Label.
var systemProperties = map[string]sysProp{}

func init() {
	for _, p := range []sysProp{
		{"MessageId", true, kString},
		{"CorrelationId", true, kString},
		{"SessionId", true, kString},
		{"ReplyToSessionId", true, kString},
		{"To", true, kString},
		{"ReplyTo", true, kString},
		{"Label", true, kString},
		{"ContentType", true, kString},
		{"PartitionKey", false, kNull}, // Busbar has no partitions: read-only
		{"ViaPartitionKey", false, kNull},
		{"TimeToLive", true, kDuration},
		{"ScheduledEnqueueTimeUtc", true, kTime},
		{"EnqueuedTimeUtc", false, kNull},
		{"SequenceNumber", false, kNull},
		{"EnqueuedSequenceNumber", false, kNull},
		{"DeliveryCount", false, kNull},
		{"Size", false, kNull},
		{"ExpiresAtUtc", false, kNull},
		{"LockedUntilUtc", false, kNull},
		{"LockToken", false, kNull},
		{"DeadLetterSource", false, kNull},
		{"State", false, kNull},
	} {
		systemProperties[strings.ToLower(p.name)] = p
	}
	systemProperties["subject"] = systemProperties["label"]
}

// CanonicalSystemProperty returns the canonical spelling of a Service Bus
// system property name given in any case ("subject" and "Label" both give
// "Label"), and whether the name is a known system property. Filters pass
// canonical names to Message.SystemProperty and
// MutableMessage.SetSystemProperty.
func CanonicalSystemProperty(name string) (string, bool) {
	p, ok := systemProperties[strings.ToLower(name)]
	if !ok {
		return name, false
	}
	return p.name, true
}
