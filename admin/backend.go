package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/busbar-io/busbar/broker"
)

// Backend is the subset of the broker's entity API the management plane
// calls; *broker.Broker satisfies it, and tests may supply their own.
// Errors are the broker's wrapped sentinels (broker.ErrNotFound,
// broker.ErrAlreadyExists, broker.ErrInvalidArgument, ...), which the
// handler maps to HTTP statuses. Names compare case-insensitively; lists
// are in name order and page with skip and top (top ≤ 0: all).
type Backend interface {
	// CreateQueue creates a queue; ErrAlreadyExists if the name is taken
	// by a queue or a topic.
	CreateQueue(ctx context.Context, name string, p broker.QueueProperties) error
	// UpdateQueue replaces a queue's settable properties.
	UpdateQueue(ctx context.Context, name string, p broker.QueueProperties) error
	// GetQueue returns a queue's properties and runtime state.
	GetQueue(ctx context.Context, name string) (*broker.QueueInfo, error)
	// DeleteQueue deletes a queue and its messages.
	DeleteQueue(ctx context.Context, name string) error
	// ListQueues lists queues in name order.
	ListQueues(ctx context.Context, skip, top int) ([]*broker.QueueInfo, error)

	// CreateTopic creates a topic.
	CreateTopic(ctx context.Context, name string, p broker.TopicProperties) error
	// UpdateTopic replaces a topic's settable properties.
	UpdateTopic(ctx context.Context, name string, p broker.TopicProperties) error
	// GetTopic returns a topic's properties and runtime state.
	GetTopic(ctx context.Context, name string) (*broker.TopicInfo, error)
	// DeleteTopic deletes a topic with its subscriptions.
	DeleteTopic(ctx context.Context, name string) error
	// ListTopics lists topics in name order.
	ListTopics(ctx context.Context, skip, top int) ([]*broker.TopicInfo, error)

	// CreateSubscription creates a subscription with its $Default rule, or
	// p.DefaultRule instead.
	CreateSubscription(ctx context.Context, topic, name string, p broker.SubscriptionProperties) error
	// UpdateSubscription replaces a subscription's settable properties.
	UpdateSubscription(ctx context.Context, topic, name string, p broker.SubscriptionProperties) error
	// GetSubscription returns a subscription's properties and runtime state.
	GetSubscription(ctx context.Context, topic, name string) (*broker.SubscriptionInfo, error)
	// DeleteSubscription deletes a subscription and its messages.
	DeleteSubscription(ctx context.Context, topic, name string) error
	// ListSubscriptions lists a topic's subscriptions in name order.
	ListSubscriptions(ctx context.Context, topic string, skip, top int) ([]*broker.SubscriptionInfo, error)

	// AddRule adds a rule to a subscription; ErrAlreadyExists if one of
	// that name exists.
	AddRule(ctx context.Context, topic, sub string, p broker.RuleProperties) error
	// RemoveRule removes a subscription's rule.
	RemoveRule(ctx context.Context, topic, sub, name string) error
	// ListRules lists a subscription's rules in name order.
	ListRules(ctx context.Context, topic, sub string, skip, top int) ([]broker.RuleProperties, error)
	// UpdateRule replaces a subscription's rule in one durable step.
	UpdateRule(ctx context.Context, topic, sub string, p broker.RuleProperties) error
}

// getRule finds one rule of a subscription by name (case-insensitively).
func getRule(ctx context.Context, b Backend, topic, sub, name string) (broker.RuleProperties, error) {
	rules, err := b.ListRules(ctx, topic, sub, 0, 0)
	if err != nil {
		return broker.RuleProperties{}, err
	}
	for _, r := range rules {
		if strings.EqualFold(r.Name, name) {
			return r, nil
		}
	}
	return broker.RuleProperties{}, notFoundf("subscription %q of topic %q has no rule %q", sub, topic, name)
}

// notFoundf returns an error wrapping broker.ErrNotFound.
func notFoundf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{broker.ErrNotFound}, args...)...)
}
