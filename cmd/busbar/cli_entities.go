package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// defaultTimeout bounds a command that makes a few calls to the broker.
const defaultTimeout = time.Minute

// adminSession is what an entity command needs: a context honouring
// --timeout, the admin client and the output.
type adminSession struct {
	ctx    context.Context
	cancel context.CancelFunc
	ac     *admin.Client
	out    output
}

// connectAdmin resolves the endpoints and builds the admin client.
func connectAdmin(env *cliEnv, cf *connFlags) (*adminSession, error) {
	ep, err := cf.resolve()
	if err != nil {
		return nil, err
	}
	ac, err := ep.adminClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(env.ctx, cf.timeout)
	return &adminSession{ctx: ctx, cancel: cancel, ac: ac, out: output{w: env.stdout, json: cf.json}}, nil
}

// withTimeout returns ctx bounded by d, or just cancellable when d is 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// adminCommand is the skeleton shared by every entity command: parse the
// flags (registering the connection flags and those of register), connect,
// run body with the positional arguments.
func adminCommand(env *cliEnv, c command, args []string, minArgs, maxArgs int,
	register func(fs *flagSet), body func(s *adminSession, pos []string) error) error {
	fs := newFlagSet(c)
	var cf connFlags
	cf.register(fs, defaultTimeout)
	if register != nil {
		register(fs)
	}
	pos, err := parseArgs(env, c, fs, args, minArgs, maxArgs)
	if err != nil {
		return err
	}
	s, err := connectAdmin(env, &cf)
	if err != nil {
		return err
	}
	defer s.cancel()
	return body(s, pos)
}

// done prints a one-line confirmation (or {"result": …} with --json).
func (s *adminSession) done(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	return s.out.emit(map[string]string{"result": msg}, func(w io.Writer) { fmt.Fprintln(w, msg) })
}

// ---- queue ----

func queueCommand(env *cliEnv, args []string) error {
	return group{name: "queue", summary: "Create, list, show, update and delete queues.", subs: []subcommand{
		{"create", "create a queue", queueCreate},
		{"list", "list queues with their message counts", queueList},
		{"show", "show a queue's properties and counts", queueShow},
		{"update", "change a queue's properties", queueUpdate},
		{"delete", "delete a queue and its messages", queueDelete},
	}}.dispatch(env, args)
}

func queueCreate(env *cliEnv, args []string) error {
	c := command{path: "queue create", args: "NAME [flags]", summary: "Create a queue. Properties not given take the broker's defaults.",
		examples: `busbar queue create orders
busbar queue create orders --lock-duration 30s --max-delivery-count 5 --ttl 14d
busbar queue create payments --sessions --duplicate-detection --duplicate-window 10m
busbar queue create audit --forward-to archive --status SendDisabled`}
	var pf *propFlags[admin.QueueProperties]
	return adminCommand(env, c, args, 1, 1, func(fs *flagSet) { pf = queuePropFlags(fs) }, func(s *adminSession, pos []string) error {
		var p admin.QueueProperties
		if _, err := pf.applyTo(&p); err != nil {
			return err
		}
		resp, err := s.ac.CreateQueue(s.ctx, pos[0], &admin.CreateQueueOptions{Properties: &p})
		if err != nil {
			return fmt.Errorf("creating queue %q: %w", pos[0], err)
		}
		return s.out.emit(entityJSON{Name: resp.QueueName, Properties: resp.QueueProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "created queue %s\n", resp.QueueName)
		})
	})
}

// entityJSON is the --json shape of show/create: name, static properties and
// (for show) runtime counts.
type entityJSON struct {
	Name       string `json:"name"`
	Properties any    `json:"properties"`
	Runtime    any    `json:"runtime,omitempty"`
}

func queueList(env *cliEnv, args []string) error {
	c := command{path: "queue list", args: "[flags]", summary: "List queues with their status and message counts.",
		examples: `busbar queue list
busbar queue list --json | jq -r '.[] | select(.runtime.DeadLetterMessageCount > 0) | .name'`}
	return adminCommand(env, c, args, 0, 0, nil, func(s *adminSession, _ []string) error {
		props := map[string]admin.QueueProperties{}
		pager := s.ac.NewListQueuesPager(nil)
		for pager.More() {
			page, err := pager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing queues: %w", err)
			}
			for _, q := range page.Queues {
				props[q.QueueName] = q.QueueProperties
			}
		}
		runtime := map[string]admin.QueueRuntimeProperties{}
		rpager := s.ac.NewListQueuesRuntimePropertiesPager(nil)
		for rpager.More() {
			page, err := rpager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing queues: %w", err)
			}
			for _, q := range page.QueueRuntimeProperties {
				runtime[q.QueueName] = q.QueueRuntimeProperties
			}
		}
		names := sortedKeys(props)
		list := make([]entityJSON, 0, len(names))
		for _, n := range names {
			rt := runtime[n]
			list = append(list, entityJSON{Name: n, Properties: props[n], Runtime: rt})
		}
		return s.out.emit(list, func(w io.Writer) {
			row(w, "NAME", "STATUS", "SESSIONS", "ACTIVE", "DEAD-LETTER", "SCHEDULED", "TRANSFER-DLQ")
			for _, n := range names {
				p, rt := props[n], runtime[n]
				row(w, n, orDash(p.Status), orDash(p.RequiresSession), rt.ActiveMessageCount, rt.DeadLetterMessageCount,
					rt.ScheduledMessageCount, rt.TransferDeadLetterMessageCount)
			}
		})
	})
}

func queueShow(env *cliEnv, args []string) error {
	c := command{path: "queue show", args: "NAME [flags]", summary: "Show a queue's properties and runtime counts.",
		examples: `busbar queue show orders
busbar queue show orders --json | jq .runtime.ActiveMessageCount`}
	return adminCommand(env, c, args, 1, 1, nil, func(s *adminSession, pos []string) error {
		q, err := s.ac.GetQueue(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading queue %q: %w", pos[0], err)
		}
		if q == nil {
			return notFoundf("queue %q not found", pos[0])
		}
		rt, err := s.ac.GetQueueRuntimeProperties(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading queue %q: %w", pos[0], err)
		}
		if rt == nil {
			return notFoundf("queue %q not found", pos[0])
		}
		return s.out.emit(entityJSON{Name: q.QueueName, Properties: q.QueueProperties, Runtime: rt.QueueRuntimeProperties}, func(w io.Writer) {
			row(w, "Name", q.QueueName)
			propRows(w, q.QueueProperties)
			propRows(w, rt.QueueRuntimeProperties)
		})
	})
}

func queueUpdate(env *cliEnv, args []string) error {
	c := command{path: "queue update", args: "NAME [flags]", summary: "Change a queue's properties; those not given keep their values.",
		examples: `busbar queue update orders --max-delivery-count 20
busbar queue update orders --status Disabled
busbar queue update orders --forward-to ""`}
	var pf *propFlags[admin.QueueProperties]
	return adminCommand(env, c, args, 1, 1, func(fs *flagSet) { pf = queuePropFlags(fs) }, func(s *adminSession, pos []string) error {
		q, err := s.ac.GetQueue(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading queue %q: %w", pos[0], err)
		}
		if q == nil {
			return notFoundf("queue %q not found", pos[0])
		}
		p := q.QueueProperties
		if changed, err := pf.applyTo(&p); err != nil {
			return err
		} else if !changed {
			return usageErrorf("queue update: no property flags given (see busbar queue update --help)")
		}
		resp, err := s.ac.UpdateQueue(s.ctx, pos[0], p, nil)
		if err != nil {
			return fmt.Errorf("updating queue %q: %w", pos[0], err)
		}
		return s.out.emit(entityJSON{Name: resp.QueueName, Properties: resp.QueueProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "updated queue %s\n", resp.QueueName)
		})
	})
}

func queueDelete(env *cliEnv, args []string) error {
	c := command{path: "queue delete", args: "NAME [flags]", summary: "Delete a queue with all its messages.",
		examples: `busbar queue delete orders`}
	return adminCommand(env, c, args, 1, 1, nil, func(s *adminSession, pos []string) error {
		if _, err := s.ac.DeleteQueue(s.ctx, pos[0], nil); err != nil {
			return fmt.Errorf("deleting queue %q: %w", pos[0], err)
		}
		return s.done("deleted queue %s", pos[0])
	})
}

// ---- topic ----

func topicCommand(env *cliEnv, args []string) error {
	return group{name: "topic", summary: "Create, list, show, update and delete topics.", subs: []subcommand{
		{"create", "create a topic", topicCreate},
		{"list", "list topics", topicList},
		{"show", "show a topic's properties and counts", topicShow},
		{"update", "change a topic's properties", topicUpdate},
		{"delete", "delete a topic with its subscriptions", topicDelete},
	}}.dispatch(env, args)
}

func topicCreate(env *cliEnv, args []string) error {
	c := command{path: "topic create", args: "NAME [flags]", summary: "Create a topic. Properties not given take the broker's defaults.",
		examples: `busbar topic create events
busbar topic create events --ttl 7d --duplicate-detection`}
	var pf *propFlags[admin.TopicProperties]
	return adminCommand(env, c, args, 1, 1, func(fs *flagSet) { pf = topicPropFlags(fs) }, func(s *adminSession, pos []string) error {
		var p admin.TopicProperties
		if _, err := pf.applyTo(&p); err != nil {
			return err
		}
		resp, err := s.ac.CreateTopic(s.ctx, pos[0], &admin.CreateTopicOptions{Properties: &p})
		if err != nil {
			return fmt.Errorf("creating topic %q: %w", pos[0], err)
		}
		return s.out.emit(entityJSON{Name: resp.TopicName, Properties: resp.TopicProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "created topic %s\n", resp.TopicName)
		})
	})
}

func topicList(env *cliEnv, args []string) error {
	c := command{path: "topic list", args: "[flags]", summary: "List topics with their status and subscription counts.",
		examples: `busbar topic list
busbar topic list --json`}
	return adminCommand(env, c, args, 0, 0, nil, func(s *adminSession, _ []string) error {
		props := map[string]admin.TopicProperties{}
		pager := s.ac.NewListTopicsPager(nil)
		for pager.More() {
			page, err := pager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			for _, t := range page.Topics {
				props[t.TopicName] = t.TopicProperties
			}
		}
		runtime := map[string]admin.TopicRuntimeProperties{}
		rpager := s.ac.NewListTopicsRuntimePropertiesPager(nil)
		for rpager.More() {
			page, err := rpager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			for _, t := range page.TopicRuntimeProperties {
				runtime[t.TopicName] = t.TopicRuntimeProperties
			}
		}
		names := sortedKeys(props)
		list := make([]entityJSON, 0, len(names))
		for _, n := range names {
			list = append(list, entityJSON{Name: n, Properties: props[n], Runtime: runtime[n]})
		}
		return s.out.emit(list, func(w io.Writer) {
			row(w, "NAME", "STATUS", "SUBSCRIPTIONS", "SCHEDULED", "SIZE")
			for _, n := range names {
				p, rt := props[n], runtime[n]
				row(w, n, orDash(p.Status), rt.SubscriptionCount, rt.ScheduledMessageCount, rt.SizeInBytes)
			}
		})
	})
}

func topicShow(env *cliEnv, args []string) error {
	c := command{path: "topic show", args: "NAME [flags]", summary: "Show a topic's properties and runtime counts.",
		examples: `busbar topic show events`}
	return adminCommand(env, c, args, 1, 1, nil, func(s *adminSession, pos []string) error {
		t, err := s.ac.GetTopic(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading topic %q: %w", pos[0], err)
		}
		if t == nil {
			return notFoundf("topic %q not found", pos[0])
		}
		rt, err := s.ac.GetTopicRuntimeProperties(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading topic %q: %w", pos[0], err)
		}
		if rt == nil {
			return notFoundf("topic %q not found", pos[0])
		}
		return s.out.emit(entityJSON{Name: t.TopicName, Properties: t.TopicProperties, Runtime: rt.TopicRuntimeProperties}, func(w io.Writer) {
			row(w, "Name", t.TopicName)
			propRows(w, t.TopicProperties)
			propRows(w, rt.TopicRuntimeProperties)
		})
	})
}

func topicUpdate(env *cliEnv, args []string) error {
	c := command{path: "topic update", args: "NAME [flags]", summary: "Change a topic's properties; those not given keep their values.",
		examples: `busbar topic update events --ttl 1d
busbar topic update events --status SendDisabled`}
	var pf *propFlags[admin.TopicProperties]
	return adminCommand(env, c, args, 1, 1, func(fs *flagSet) { pf = topicPropFlags(fs) }, func(s *adminSession, pos []string) error {
		t, err := s.ac.GetTopic(s.ctx, pos[0], nil)
		if err != nil {
			return fmt.Errorf("reading topic %q: %w", pos[0], err)
		}
		if t == nil {
			return notFoundf("topic %q not found", pos[0])
		}
		p := t.TopicProperties
		if changed, err := pf.applyTo(&p); err != nil {
			return err
		} else if !changed {
			return usageErrorf("topic update: no property flags given (see busbar topic update --help)")
		}
		resp, err := s.ac.UpdateTopic(s.ctx, pos[0], p, nil)
		if err != nil {
			return fmt.Errorf("updating topic %q: %w", pos[0], err)
		}
		return s.out.emit(entityJSON{Name: resp.TopicName, Properties: resp.TopicProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "updated topic %s\n", resp.TopicName)
		})
	})
}

func topicDelete(env *cliEnv, args []string) error {
	c := command{path: "topic delete", args: "NAME [flags]", summary: "Delete a topic with its subscriptions and their messages.",
		examples: `busbar topic delete events`}
	return adminCommand(env, c, args, 1, 1, nil, func(s *adminSession, pos []string) error {
		if _, err := s.ac.DeleteTopic(s.ctx, pos[0], nil); err != nil {
			return fmt.Errorf("deleting topic %q: %w", pos[0], err)
		}
		return s.done("deleted topic %s", pos[0])
	})
}

// ---- subscription ----

func subscriptionCommand(env *cliEnv, args []string) error {
	return group{name: "subscription", summary: "Create, list, show, update and delete the subscriptions of a topic.", subs: []subcommand{
		{"create", "create a subscription", subscriptionCreate},
		{"list", "list a topic's subscriptions", subscriptionList},
		{"show", "show a subscription's properties and counts", subscriptionShow},
		{"update", "change a subscription's properties", subscriptionUpdate},
		{"delete", "delete a subscription", subscriptionDelete},
	}}.dispatch(env, args)
}

func subscriptionCreate(env *cliEnv, args []string) error {
	c := command{path: "subscription create", args: "TOPIC NAME [flags]",
		summary: "Create a subscription. With --sql or --correlation-* its first rule ($Default) has that filter instead of 1=1.",
		examples: `busbar subscription create events audit
busbar subscription create events eu --sql "region = 'eu'" --action "SET routed = 1"
busbar subscription create events invoices --correlation-subject invoice --sessions`}
	var pf *propFlags[admin.SubscriptionProperties]
	var rf *ruleFlags
	return adminCommand(env, c, args, 2, 2, func(fs *flagSet) {
		pf = subscriptionPropFlags(fs)
		rf = registerRuleFlags(fs)
	}, func(s *adminSession, pos []string) error {
		var p admin.SubscriptionProperties
		if _, err := pf.applyTo(&p); err != nil {
			return err
		}
		filter, action, given, err := rf.rule(nil)
		if err != nil {
			return err
		}
		if given {
			p.DefaultRule = &admin.RuleProperties{Name: "$Default", Filter: filter, Action: action}
		}
		resp, err := s.ac.CreateSubscription(s.ctx, pos[0], pos[1], &admin.CreateSubscriptionOptions{Properties: &p})
		if err != nil {
			return fmt.Errorf("creating subscription %s/%s: %w", pos[0], pos[1], err)
		}
		return s.out.emit(entityJSON{Name: resp.SubscriptionName, Properties: resp.SubscriptionProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "created subscription %s/%s\n", resp.TopicName, resp.SubscriptionName)
		})
	})
}

func subscriptionList(env *cliEnv, args []string) error {
	c := command{path: "subscription list", args: "TOPIC [flags]", summary: "List a topic's subscriptions with their message counts.",
		examples: `busbar subscription list events`}
	return adminCommand(env, c, args, 1, 1, nil, func(s *adminSession, pos []string) error {
		props := map[string]admin.SubscriptionProperties{}
		pager := s.ac.NewListSubscriptionsPager(pos[0], nil)
		for pager.More() {
			page, err := pager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing subscriptions of %q: %w", pos[0], err)
			}
			for _, sub := range page.Subscriptions {
				props[sub.SubscriptionName] = sub.SubscriptionProperties
			}
		}
		runtime := map[string]admin.SubscriptionRuntimeProperties{}
		rpager := s.ac.NewListSubscriptionsRuntimePropertiesPager(pos[0], nil)
		for rpager.More() {
			page, err := rpager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing subscriptions of %q: %w", pos[0], err)
			}
			for _, sub := range page.SubscriptionRuntimeProperties {
				runtime[sub.SubscriptionName] = sub.SubscriptionRuntimeProperties
			}
		}
		names := sortedKeys(props)
		list := make([]entityJSON, 0, len(names))
		for _, n := range names {
			list = append(list, entityJSON{Name: n, Properties: props[n], Runtime: runtime[n]})
		}
		return s.out.emit(list, func(w io.Writer) {
			row(w, "NAME", "STATUS", "SESSIONS", "ACTIVE", "DEAD-LETTER", "FORWARD-TO")
			for _, n := range names {
				p, rt := props[n], runtime[n]
				row(w, n, orDash(p.Status), orDash(p.RequiresSession), rt.ActiveMessageCount, rt.DeadLetterMessageCount, orDash(p.ForwardTo))
			}
		})
	})
}

func subscriptionShow(env *cliEnv, args []string) error {
	c := command{path: "subscription show", args: "TOPIC NAME [flags]", summary: "Show a subscription's properties and runtime counts.",
		examples: `busbar subscription show events audit`}
	return adminCommand(env, c, args, 2, 2, nil, func(s *adminSession, pos []string) error {
		sub, err := s.ac.GetSubscription(s.ctx, pos[0], pos[1], nil)
		if err != nil {
			return fmt.Errorf("reading subscription %s/%s: %w", pos[0], pos[1], err)
		}
		if sub == nil {
			return notFoundf("subscription %s/%s not found", pos[0], pos[1])
		}
		rt, err := s.ac.GetSubscriptionRuntimeProperties(s.ctx, pos[0], pos[1], nil)
		if err != nil {
			return fmt.Errorf("reading subscription %s/%s: %w", pos[0], pos[1], err)
		}
		if rt == nil {
			return notFoundf("subscription %s/%s not found", pos[0], pos[1])
		}
		return s.out.emit(entityJSON{Name: sub.SubscriptionName, Properties: sub.SubscriptionProperties, Runtime: rt.SubscriptionRuntimeProperties}, func(w io.Writer) {
			row(w, "Name", sub.TopicName+"/"+sub.SubscriptionName)
			propRows(w, sub.SubscriptionProperties)
			propRows(w, rt.SubscriptionRuntimeProperties)
		})
	})
}

func subscriptionUpdate(env *cliEnv, args []string) error {
	c := command{path: "subscription update", args: "TOPIC NAME [flags]", summary: "Change a subscription's properties; those not given keep their values.",
		examples: `busbar subscription update events audit --max-delivery-count 3
busbar subscription update events audit --forward-to audit-archive`}
	var pf *propFlags[admin.SubscriptionProperties]
	return adminCommand(env, c, args, 2, 2, func(fs *flagSet) { pf = subscriptionPropFlags(fs) }, func(s *adminSession, pos []string) error {
		sub, err := s.ac.GetSubscription(s.ctx, pos[0], pos[1], nil)
		if err != nil {
			return fmt.Errorf("reading subscription %s/%s: %w", pos[0], pos[1], err)
		}
		if sub == nil {
			return notFoundf("subscription %s/%s not found", pos[0], pos[1])
		}
		p := sub.SubscriptionProperties
		p.DefaultRule = nil
		if changed, err := pf.applyTo(&p); err != nil {
			return err
		} else if !changed {
			return usageErrorf("subscription update: no property flags given (see busbar subscription update --help)")
		}
		resp, err := s.ac.UpdateSubscription(s.ctx, pos[0], pos[1], p, nil)
		if err != nil {
			return fmt.Errorf("updating subscription %s/%s: %w", pos[0], pos[1], err)
		}
		return s.out.emit(entityJSON{Name: resp.SubscriptionName, Properties: resp.SubscriptionProperties}, func(w io.Writer) {
			fmt.Fprintf(w, "updated subscription %s/%s\n", pos[0], pos[1])
		})
	})
}

func subscriptionDelete(env *cliEnv, args []string) error {
	c := command{path: "subscription delete", args: "TOPIC NAME [flags]", summary: "Delete a subscription with its messages.",
		examples: `busbar subscription delete events audit`}
	return adminCommand(env, c, args, 2, 2, nil, func(s *adminSession, pos []string) error {
		if _, err := s.ac.DeleteSubscription(s.ctx, pos[0], pos[1], nil); err != nil {
			return fmt.Errorf("deleting subscription %s/%s: %w", pos[0], pos[1], err)
		}
		return s.done("deleted subscription %s/%s", pos[0], pos[1])
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
