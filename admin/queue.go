package admin

import (
	"math"

	"github.com/busbar-io/busbar/broker"
)

// queueFields returns the decoders of a QueueDescription writing into p.
func queueFields(p *broker.QueueProperties) fields {
	return fields{
		"LockDuration":                        durationField(&p.LockDuration),
		"MaxSizeInMegabytes":                  int64Field(&p.MaxSizeInMegabytes, 1, math.MaxInt32),
		"RequiresDuplicateDetection":          boolField(&p.RequiresDuplicateDetection),
		"RequiresSession":                     boolField(&p.RequiresSession),
		"DefaultMessageTimeToLive":            durationField(&p.DefaultMessageTimeToLive),
		"DeadLetteringOnMessageExpiration":    boolField(&p.DeadLetteringOnMessageExpiration),
		"DuplicateDetectionHistoryTimeWindow": durationField(&p.DuplicateDetectionHistoryTimeWindow),
		"MaxDeliveryCount":                    int32Field(&p.MaxDeliveryCount),
		"EnableBatchedOperations":             boolField(&p.EnableBatchedOperations),
		"SizeInBytes":                         nil,
		"MessageCount":                        nil,
		"IsAnonymousAccessible":               falseOnly,
		"AuthorizationRules":                  authRulesField(&p.AuthorizationRules),
		"Status":                              statusField(&p.Status),
		"AccessedAt":                          nil,
		"CreatedAt":                           nil,
		"UpdatedAt":                           nil,
		"SupportOrdering":                     nil,
		"AutoDeleteOnIdle":                    durationField(&p.AutoDeleteOnIdle),
		"EnablePartitioning":                  boolField(&p.EnablePartitioning),
		"EntityAvailabilityStatus":            nil,
		"EnableExpress":                       falseOnly,
		"CountDetails":                        nil,
		"ForwardTo":                           forwardField(&p.ForwardTo, &p.ForwardToURI),
		"ForwardDeadLetteredMessagesTo":       forwardField(&p.ForwardDeadLetteredMessagesTo, &p.ForwardDeadLetteredMessagesToURI),
		"UserMetadata":                        strField(&p.UserMetadata),
		"MaxMessageSizeInKilobytes":           int64Field(&p.MaxMessageSizeInKilobytes, 1, math.MaxInt32),
	}
}

// decodeQueue decodes the QueueDescription the reader is inside of over
// base: the properties the description carries replace base's, the others
// keep base's values (an update changes only what the client sent).
func decodeQueue(r *reader, base broker.QueueProperties) (broker.QueueProperties, fieldSet, error) {
	p := base
	set, err := decodeFields(r, "QueueDescription", queueFields(&p))
	return p, set, err
}

// writeQueue writes a QueueDescription in the service's element order.
func writeQueue(w *writer, host string, p broker.QueueProperties, ri broker.RuntimeInfo) {
	openDescription(w, "QueueDescription")
	w.duration("LockDuration", p.LockDuration)
	w.int("MaxSizeInMegabytes", p.MaxSizeInMegabytes)
	w.boolean("RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	w.boolean("RequiresSession", p.RequiresSession)
	w.duration("DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	w.boolean("DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	w.duration("DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	w.int("MaxDeliveryCount", int64(p.MaxDeliveryCount))
	w.boolean("EnableBatchedOperations", p.EnableBatchedOperations)
	w.int("SizeInBytes", ri.SizeInBytes)
	w.int("MessageCount", ri.TotalMessageCount)
	w.boolean("IsAnonymousAccessible", false)
	writeAuthRules(w, p.AuthorizationRules)
	w.text("Status", string(p.Status))
	w.optional("ForwardTo", forwardURI(host, p.ForwardTo, p.ForwardToURI))
	w.optional("UserMetadata", p.UserMetadata)
	w.time("CreatedAt", ri.CreatedAt)
	w.time("UpdatedAt", ri.UpdatedAt)
	w.time("AccessedAt", ri.AccessedAt)
	w.boolean("SupportOrdering", true)
	writeCountDetails(w, ri)
	w.duration("AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	w.boolean("EnablePartitioning", p.EnablePartitioning)
	w.optional("ForwardDeadLetteredMessagesTo", forwardURI(host, p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURI))
	w.text("EntityAvailabilityStatus", "Available")
	w.boolean("EnableExpress", false)
	w.int("MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	w.close("QueueDescription")
}
