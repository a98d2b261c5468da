package admin

import (
	"math"

	"github.com/busbar-io/busbar/broker"
)

// topicFields returns the decoders of a TopicDescription writing into p.
func topicFields(p *broker.TopicProperties) fields {
	return fields{
		"DefaultMessageTimeToLive":            durationField(&p.DefaultMessageTimeToLive),
		"MaxSizeInMegabytes":                  int64Field(&p.MaxSizeInMegabytes, 1, math.MaxInt32),
		"RequiresDuplicateDetection":          boolField(&p.RequiresDuplicateDetection),
		"DuplicateDetectionHistoryTimeWindow": durationField(&p.DuplicateDetectionHistoryTimeWindow),
		"EnableBatchedOperations":             boolField(&p.EnableBatchedOperations),
		"SizeInBytes":                         nil,
		"FilteringMessagesBeforePublishing":   falseOnly,
		"IsAnonymousAccessible":               falseOnly,
		"AuthorizationRules":                  authRulesField(&p.AuthorizationRules),
		"Status":                              statusField(&p.Status),
		"UserMetadata":                        strField(&p.UserMetadata),
		"AccessedAt":                          nil,
		"CreatedAt":                           nil,
		"UpdatedAt":                           nil,
		"SupportOrdering":                     boolField(&p.SupportOrdering),
		"AutoDeleteOnIdle":                    durationField(&p.AutoDeleteOnIdle),
		"EnablePartitioning":                  boolField(&p.EnablePartitioning),
		"EnableSubscriptionPartitioning":      falseOnly,
		"EntityAvailabilityStatus":            nil,
		"EnableExpress":                       falseOnly,
		"CountDetails":                        nil,
		"SubscriptionCount":                   nil,
		"SqlFilterCount":                      nil,
		"CorrelationFilterCount":              nil,
		"MaxMessageSizeInKilobytes":           int64Field(&p.MaxMessageSizeInKilobytes, 1, math.MaxInt32),
	}
}

// decodeTopic decodes the TopicDescription the reader is inside of over
// base, as decodeQueue.
func decodeTopic(r *reader, base broker.TopicProperties) (broker.TopicProperties, fieldSet, error) {
	p := base
	set, err := decodeFields(r, "TopicDescription", topicFields(&p))
	return p, set, err
}

// filterCounts are a topic's SQL and correlation filters over all its
// subscriptions (TrueFilter and FalseFilter count as SQL filters, as they
// are in Service Bus). Reported from api-version 2024-05 on.
type filterCounts struct {
	present          bool
	sql, correlation int64
}

// writeTopic writes a TopicDescription in the service's element order.
func writeTopic(w *writer, p broker.TopicProperties, ri broker.RuntimeInfo, fc filterCounts) {
	openDescription(w, "TopicDescription")
	w.duration("DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	w.int("MaxSizeInMegabytes", p.MaxSizeInMegabytes)
	w.boolean("RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	w.duration("DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	w.boolean("EnableBatchedOperations", p.EnableBatchedOperations)
	w.int("SizeInBytes", ri.SizeInBytes)
	w.boolean("FilteringMessagesBeforePublishing", false)
	w.boolean("IsAnonymousAccessible", false)
	writeAuthRules(w, p.AuthorizationRules)
	w.text("Status", string(p.Status))
	w.optional("UserMetadata", p.UserMetadata)
	w.time("CreatedAt", ri.CreatedAt)
	w.time("UpdatedAt", ri.UpdatedAt)
	w.time("AccessedAt", ri.AccessedAt)
	w.boolean("SupportOrdering", p.SupportOrdering)
	writeCountDetails(w, ri)
	w.int("SubscriptionCount", clamp32(ri.SubscriptionCount))
	if fc.present {
		w.int("SqlFilterCount", clamp32(fc.sql))
		w.int("CorrelationFilterCount", clamp32(fc.correlation))
	}
	w.duration("AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	w.boolean("EnablePartitioning", p.EnablePartitioning)
	w.text("EntityAvailabilityStatus", "Available")
	w.boolean("EnableSubscriptionPartitioning", false)
	w.boolean("EnableExpress", false)
	w.int("MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	w.close("TopicDescription")
}
