package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/config"
)

// applyEntities declares the config file's entities in the broker,
// idempotently: a missing entity is created, an existing one is updated to
// the declared properties, and declared rules are added or replaced.
// Entities the file does not mention are left alone.
func applyEntities(ctx context.Context, b *broker.Broker, f *config.File) error {
	if f == nil || f.UserConfig == nil {
		return nil
	}
	for _, ns := range f.UserConfig.Namespaces {
		for _, q := range ns.Queues {
			if err := upsert(
				func() error { return b.CreateQueue(ctx, q.Name, queueProps(q.Properties)) },
				func() error { return b.UpdateQueue(ctx, q.Name, queueProps(q.Properties)) },
			); err != nil {
				return fmt.Errorf("queue %q: %w", q.Name, err)
			}
		}
		for _, t := range ns.Topics {
			if err := upsert(
				func() error { return b.CreateTopic(ctx, t.Name, topicProps(t.Properties)) },
				func() error { return b.UpdateTopic(ctx, t.Name, topicProps(t.Properties)) },
			); err != nil {
				return fmt.Errorf("topic %q: %w", t.Name, err)
			}
			for _, s := range t.Subscriptions {
				if err := applySubscription(ctx, b, t.Name, s); err != nil {
					return fmt.Errorf("topic %q subscription %q: %w", t.Name, s.Name, err)
				}
			}
		}
	}
	return nil
}

func applySubscription(ctx context.Context, b *broker.Broker, topic string, s config.Subscription) error {
	p := subscriptionProps(s.Properties)
	if err := upsert(
		func() error { return b.CreateSubscription(ctx, topic, s.Name, p) },
		func() error { return b.UpdateSubscription(ctx, topic, s.Name, p) },
	); err != nil {
		return err
	}
	if len(s.Rules) == 0 {
		return nil
	}
	existing, err := b.ListRules(ctx, topic, s.Name, 0, 0)
	if err != nil {
		return err
	}
	// A subscription declared with rules has exactly those rules: the
	// $Default rule created with it goes, unless the file declares it.
	declared := map[string]bool{}
	for _, r := range s.Rules {
		declared[strings.ToLower(r.Name)] = true
	}
	for _, r := range existing {
		if !declared[strings.ToLower(r.Name)] {
			if err := b.RemoveRule(ctx, topic, s.Name, r.Name); err != nil {
				return fmt.Errorf("rule %q: %w", r.Name, err)
			}
		}
	}
	for _, r := range s.Rules {
		rp := ruleProps(r)
		err := b.AddRule(ctx, topic, s.Name, rp)
		if errors.Is(err, broker.ErrAlreadyExists) {
			if err = b.RemoveRule(ctx, topic, s.Name, r.Name); err == nil {
				err = b.AddRule(ctx, topic, s.Name, rp)
			}
		}
		if err != nil {
			return fmt.Errorf("rule %q: %w", r.Name, err)
		}
	}
	return nil
}

// upsert creates, or updates when the entity exists.
func upsert(create, update func() error) error {
	err := create()
	if errors.Is(err, broker.ErrAlreadyExists) {
		return update()
	}
	return err
}

// orZero returns *p, or the zero value (the broker's "default") when the
// file left the property out.
func orZero[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func queueProps(c config.QueueProperties) broker.QueueProperties {
	return broker.QueueProperties{
		LockDuration:                        c.LockDuration.Duration,
		MaxSizeInMegabytes:                  orZero(c.MaxSizeInMegabytes),
		RequiresDuplicateDetection:          orZero(c.RequiresDuplicateDetection),
		DuplicateDetectionHistoryTimeWindow: dupWindow(c.DuplicateDetectionHistoryTimeWindow),
		RequiresSession:                     orZero(c.RequiresSession),
		DefaultMessageTimeToLive:            c.DefaultMessageTimeToLive.Duration,
		DeadLetteringOnMessageExpiration:    orZero(c.DeadLetteringOnMessageExpiration),
		MaxDeliveryCount:                    orZero(c.MaxDeliveryCount),
		ForwardTo:                           c.ForwardTo,
		ForwardDeadLetteredMessagesTo:       c.ForwardDeadLetteredMessagesTo,
		AutoDeleteOnIdle:                    c.AutoDeleteOnIdle.Duration,
		MaxMessageSizeInKilobytes:           orZero(c.MaxMessageSizeInKilobytes),
	}
}

func topicProps(c config.TopicProperties) broker.TopicProperties {
	return broker.TopicProperties{
		MaxSizeInMegabytes:                  orZero(c.MaxSizeInMegabytes),
		RequiresDuplicateDetection:          orZero(c.RequiresDuplicateDetection),
		DuplicateDetectionHistoryTimeWindow: dupWindow(c.DuplicateDetectionHistoryTimeWindow),
		DefaultMessageTimeToLive:            c.DefaultMessageTimeToLive.Duration,
		AutoDeleteOnIdle:                    c.AutoDeleteOnIdle.Duration,
		MaxMessageSizeInKilobytes:           orZero(c.MaxMessageSizeInKilobytes),
	}
}

func subscriptionProps(c config.SubscriptionProperties) broker.SubscriptionProperties {
	return broker.SubscriptionProperties{
		LockDuration:                              c.LockDuration.Duration,
		RequiresSession:                           orZero(c.RequiresSession),
		DefaultMessageTimeToLive:                  c.DefaultMessageTimeToLive.Duration,
		DeadLetteringOnMessageExpiration:          orZero(c.DeadLetteringOnMessageExpiration),
		DeadLetteringOnFilterEvaluationExceptions: orZero(c.DeadLetteringOnFilterEvaluationExceptions),
		MaxDeliveryCount:                          orZero(c.MaxDeliveryCount),
		ForwardTo:                                 c.ForwardTo,
		ForwardDeadLetteredMessagesTo:             c.ForwardDeadLetteredMessagesTo,
		AutoDeleteOnIdle:                          c.AutoDeleteOnIdle.Duration,
	}
}

// dupWindow maps a declared duplicate-detection window. The emulator's schema
// allows windows from 5 s, Service Bus from 20 s; a shorter declared window is
// raised to the broker's minimum rather than refusing an emulator file.
func dupWindow(d config.Duration) time.Duration {
	if d.Set && d.Duration < broker.MinDuplicateDetectionWindow {
		return broker.MinDuplicateDetectionWindow
	}
	return d.Duration
}

func ruleProps(r config.Rule) broker.RuleProperties {
	p := broker.RuleProperties{Name: r.Name}
	switch r.Properties.FilterType {
	case "Sql":
		p.Filter = broker.RuleFilter{Kind: broker.FilterSQL, SQL: r.Properties.SqlFilter.SqlExpression}
	case "Correlation":
		c := r.Properties.CorrelationFilter
		p.Filter = broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: broker.CorrelationFilter{
			CorrelationID: c.CorrelationId, MessageID: c.MessageId, To: c.To, ReplyTo: c.ReplyTo,
			Subject: c.Label, SessionID: c.SessionId, ReplyToSessionID: c.ReplyToSessionId,
			ContentType: c.ContentType, Properties: c.Properties,
		}}
	}
	if r.Properties.Action != nil {
		p.Action = r.Properties.Action.SqlExpression
	}
	return p
}
