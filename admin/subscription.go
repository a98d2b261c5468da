package admin

import (
	"encoding/xml"

	"github.com/busbar-io/busbar/broker"
)

// subscriptionFields returns the decoders of a SubscriptionDescription
// writing into p.
func subscriptionFields(p *broker.SubscriptionProperties) fields {
	return fields{
		"LockDuration":                              durationField(&p.LockDuration),
		"RequiresSession":                           boolField(&p.RequiresSession),
		"DefaultMessageTimeToLive":                  durationField(&p.DefaultMessageTimeToLive),
		"DeadLetteringOnMessageExpiration":          boolField(&p.DeadLetteringOnMessageExpiration),
		"DeadLetteringOnFilterEvaluationExceptions": boolField(&p.DeadLetteringOnFilterEvaluationExceptions),
		"DefaultRuleDescription": func(r *reader, se xml.StartElement) error {
			rp, err := decodeRule(r, "DefaultRuleDescription")
			if err != nil {
				return err
			}
			if rp.Name == "" {
				rp.Name = broker.DefaultRuleName
			}
			p.DefaultRule = &rp
			return nil
		},
		"MaxDeliveryCount":              int32Field(&p.MaxDeliveryCount),
		"MessageCount":                  nil,
		"EnableBatchedOperations":       boolField(&p.EnableBatchedOperations),
		"Status":                        statusField(&p.Status),
		"ForwardTo":                     forwardField(&p.ForwardTo, &p.ForwardToURI),
		"UserMetadata":                  strField(&p.UserMetadata),
		"ForwardDeadLetteredMessagesTo": forwardField(&p.ForwardDeadLetteredMessagesTo, &p.ForwardDeadLetteredMessagesToURI),
		"AutoDeleteOnIdle":              durationField(&p.AutoDeleteOnIdle),
		"CreatedAt":                     nil,
		"UpdatedAt":                     nil,
		"AccessedAt":                    nil,
		"CountDetails":                  nil,
		"EntityAvailabilityStatus":      nil,
	}
}

// decodeSubscription decodes the SubscriptionDescription the reader is
// inside of over base, as decodeQueue.
func decodeSubscription(r *reader, base broker.SubscriptionProperties) (broker.SubscriptionProperties, fieldSet, error) {
	p := base
	set, err := decodeFields(r, "SubscriptionDescription", subscriptionFields(&p))
	return p, set, err
}

// writeSubscription writes a SubscriptionDescription in the service's
// element order.
func writeSubscription(w *writer, host string, p broker.SubscriptionProperties, ri broker.RuntimeInfo) {
	openDescription(w, "SubscriptionDescription")
	w.duration("LockDuration", p.LockDuration)
	w.boolean("RequiresSession", p.RequiresSession)
	w.duration("DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	w.boolean("DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	w.boolean("DeadLetteringOnFilterEvaluationExceptions", p.DeadLetteringOnFilterEvaluationExceptions)
	w.int("MessageCount", ri.TotalMessageCount)
	w.int("MaxDeliveryCount", int64(p.MaxDeliveryCount))
	w.boolean("EnableBatchedOperations", p.EnableBatchedOperations)
	w.text("Status", string(p.Status))
	w.optional("ForwardTo", forwardURI(host, p.ForwardTo, p.ForwardToURI))
	w.optional("UserMetadata", p.UserMetadata)
	w.time("CreatedAt", ri.CreatedAt)
	w.time("UpdatedAt", ri.UpdatedAt)
	w.time("AccessedAt", ri.AccessedAt)
	writeCountDetails(w, ri)
	w.optional("ForwardDeadLetteredMessagesTo", forwardURI(host, p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURI))
	w.duration("AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	w.text("EntityAvailabilityStatus", "Available")
	w.close("SubscriptionDescription")
}
