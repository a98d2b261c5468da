package server

import (
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// entityRules returns the lookup the authorizer uses for the shared access
// rules of a queue or topic (set through the management API), so that a
// key of an entity's own works on the AMQP and HTTP listeners alike.
func entityRules(b *broker.Broker) func(path string) []sas.Rule {
	return func(path string) []sas.Rule {
		name, rules := b.EntityAuthorizationRules(path)
		out := make([]sas.Rule, 0, len(rules))
		for _, r := range rules {
			rights, err := sas.ParseRights(r.Rights)
			if err != nil {
				continue // the broker validated them; an unknown right grants nothing
			}
			out = append(out, sas.Rule{KeyName: r.KeyName, PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey,
				Rights: rights, Entity: name})
		}
		return out
	}
}
