package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Entities are declared at package level, one set per test, so that the
// whole set is known before the broker starts: when the management API
// does not work the harness declares them all in a --config file instead.
// A test calls create to get the entity's run-unique name; with the
// management API that is when the entity is created, a new one on every
// call (so `go test -count=N` gives every run fresh entities).

// queueSpec declares a queue.
type queueSpec struct {
	base  string
	props admin.QueueProperties
	uses  atomic.Int32
}

// topicSpec declares a topic with its subscriptions.
type topicSpec struct {
	base  string
	props admin.TopicProperties
	subs  []subSpec
	uses  atomic.Int32
}

// subSpec declares a subscription; with rules, it has exactly those rules
// (the first replaces $Default).
type subSpec struct {
	name  string
	props admin.SubscriptionProperties
	rules []admin.RuleProperties
}

var (
	registryMu sync.Mutex
	queues     []*queueSpec
	topics     []*topicSpec
)

// declareQueue registers a queue; base must be unique in the package.
func declareQueue(base string, p admin.QueueProperties) *queueSpec {
	q := &queueSpec{base: base, props: p}
	registryMu.Lock()
	defer registryMu.Unlock()
	mustBeNew(base)
	queues = append(queues, q)
	return q
}

// declareTopic registers a topic and its subscriptions.
func declareTopic(base string, p admin.TopicProperties, subs ...subSpec) *topicSpec {
	tp := &topicSpec{base: base, props: p, subs: subs}
	registryMu.Lock()
	defer registryMu.Unlock()
	mustBeNew(base)
	topics = append(topics, tp)
	return tp
}

// mustBeNew panics when an entity with base name was declared before: two
// tests sharing an entity would disturb each other.
func mustBeNew(base string) {
	for _, q := range queues {
		if q.base == base {
			panic("conformance: entity " + base + " declared twice")
		}
	}
	for _, tp := range topics {
		if tp.base == base {
			panic("conformance: entity " + base + " declared twice")
		}
	}
}

// entityName makes a base name unique to this run.
func entityName(base string) string { return base + "-" + suite.runID }

// nameForUse is the entity's name for its n-th use (from 1) in this run.
// In config mode there is only the declared one.
func nameForUse(t *testing.T, base string, n int32) string {
	t.Helper()
	if n == 1 {
		return entityName(base)
	}
	if suite.mode != "admin" {
		t.Fatalf("entity %s: entities declared in a --config file serve one run only (use -count=1)", base)
	}
	return fmt.Sprintf("%s-%d", entityName(base), n)
}

// create creates the queue (in admin mode) and returns its name.
func (q *queueSpec) create(t *testing.T) string {
	t.Helper()
	harness(t)
	name := nameForUse(t, q.base, q.uses.Add(1))
	if suite.mode != "admin" {
		return name
	}
	props := q.props
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adminClient().CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &props}); err != nil {
		t.Fatalf("creating queue %s through the management API: %v", name, err)
	}
	return name
}

// create creates the topic, its subscriptions and their rules (in admin
// mode) and returns the topic's name.
func (tp *topicSpec) create(t *testing.T) string {
	t.Helper()
	harness(t)
	name := nameForUse(t, tp.base, tp.uses.Add(1))
	if suite.mode != "admin" {
		return name
	}
	if err := tp.createWithAdmin(name); err != nil {
		t.Fatalf("creating topic %s through the management API: %v", name, err)
	}
	return name
}

func (tp *topicSpec) createWithAdmin(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ac := adminClient()
	props := tp.props
	if _, err := ac.CreateTopic(ctx, topic, &admin.CreateTopicOptions{Properties: &props}); err != nil {
		return err
	}
	for _, s := range tp.subs {
		sp := s.props
		if len(s.rules) > 0 {
			first := s.rules[0]
			sp.DefaultRule = &first
		}
		if _, err := ac.CreateSubscription(ctx, topic, s.name, &admin.CreateSubscriptionOptions{Properties: &sp}); err != nil {
			return fmt.Errorf("subscription %s: %w", s.name, err)
		}
		for _, r := range s.rules[min(1, len(s.rules)):] {
			name := r.Name
			if _, err := ac.CreateRule(ctx, topic, s.name, &admin.CreateRuleOptions{Name: &name, Filter: r.Filter, Action: r.Action}); err != nil {
				return fmt.Errorf("subscription %s, rule %s: %w", s.name, r.Name, err)
			}
		}
	}
	return nil
}

var (
	adminOnce sync.Once
	adminC    *admin.Client
	adminErr  error
)

// adminClient returns the suite's management client. Against a broker
// serving the ATOM API over plain HTTP (Busbar, the emulator) its requests
// are rewritten from https to http, as the emulator's own Go sample does.
func adminClient() *admin.Client {
	adminOnce.Do(func() {
		var opts admin.ClientOptions
		if !suite.adminTLS {
			opts.Transport = plainHTTP{}
		}
		opts.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond}
		adminC, adminErr = admin.NewClientFromConnectionString(suite.adminCS, &opts)
	})
	if adminErr != nil {
		panic(fmt.Sprintf("admin client: %v", adminErr))
	}
	return adminC
}

// plainHTTP is an azcore transport sending every request over plain HTTP.
type plainHTTP struct{}

var plainHTTPClient = &http.Client{Timeout: 30 * time.Second}

// Do implements policy.Transporter.
func (plainHTTP) Do(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return plainHTTPClient.Do(r)
}

var _ policy.Transporter = plainHTTP{}

// probeAdmin checks that the management API can create and read a queue.
func probeAdmin() error {
	ctx, cancel := context.WithTimeout(context.Background(), adminProbeLimit)
	defer cancel()
	name := entityName("probe")
	if _, err := adminClient().CreateQueue(ctx, name, nil); err != nil {
		return fmt.Errorf("CreateQueue: %w", err)
	}
	got, err := adminClient().GetQueue(ctx, name, nil)
	if err != nil {
		return fmt.Errorf("GetQueue: %w", err)
	}
	if got == nil {
		return fmt.Errorf("GetQueue(%s) found nothing after CreateQueue", name)
	}
	return nil
}

// writeConfigFile writes every declared entity into a configuration file
// in the emulator's Config.json format, for `busbar serve --config`.
func writeConfigFile(path string) error {
	registryMu.Lock()
	defer registryMu.Unlock()
	type obj = map[string]any
	var qs, ts []obj
	for _, q := range queues {
		qs = append(qs, obj{"Name": entityName(q.base), "Properties": queueConfig(q.props)})
	}
	for _, tp := range topics {
		var subs []obj
		for _, s := range tp.subs {
			rules := []obj{}
			for _, r := range s.rules {
				rc, err := ruleConfig(r)
				if err != nil {
					return fmt.Errorf("topic %s, subscription %s: %w", tp.base, s.name, err)
				}
				rules = append(rules, obj{"Name": r.Name, "Properties": rc})
			}
			subs = append(subs, obj{"Name": s.name, "Properties": subscriptionConfig(s.props), "Rules": rules})
		}
		ts = append(ts, obj{"Name": entityName(tp.base), "Properties": topicConfig(tp.props), "Subscriptions": subs})
	}
	file := obj{"UserConfig": obj{
		"Namespaces": []obj{{"Name": "sbemulatorns", "Queues": qs, "Topics": ts}},
		"Logging":    obj{"Type": "Console"},
	}}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// setIf copies *v into m[key] when v is not nil.
func setIf[T any](m map[string]any, key string, v *T) {
	if v != nil {
		m[key] = *v
	}
}

func queueConfig(p admin.QueueProperties) map[string]any {
	m := map[string]any{}
	setIf(m, "DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	setIf(m, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	setIf(m, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	setIf(m, "ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo)
	setIf(m, "ForwardTo", p.ForwardTo)
	setIf(m, "LockDuration", p.LockDuration)
	setIf(m, "MaxDeliveryCount", p.MaxDeliveryCount)
	setIf(m, "RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	setIf(m, "RequiresSession", p.RequiresSession)
	setIf(m, "MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	setIf(m, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	return m
}

func topicConfig(p admin.TopicProperties) map[string]any {
	m := map[string]any{}
	setIf(m, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	setIf(m, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow)
	setIf(m, "RequiresDuplicateDetection", p.RequiresDuplicateDetection)
	setIf(m, "MaxMessageSizeInKilobytes", p.MaxMessageSizeInKilobytes)
	setIf(m, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	return m
}

func subscriptionConfig(p admin.SubscriptionProperties) map[string]any {
	m := map[string]any{}
	setIf(m, "DeadLetteringOnMessageExpiration", p.DeadLetteringOnMessageExpiration)
	setIf(m, "DeadLetteringOnFilterEvaluationExceptions", p.EnableDeadLetteringOnFilterEvaluationExceptions)
	setIf(m, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive)
	setIf(m, "LockDuration", p.LockDuration)
	setIf(m, "MaxDeliveryCount", p.MaxDeliveryCount)
	setIf(m, "ForwardDeadLetteredMessagesTo", p.ForwardDeadLetteredMessagesTo)
	setIf(m, "ForwardTo", p.ForwardTo)
	setIf(m, "RequiresSession", p.RequiresSession)
	setIf(m, "AutoDeleteOnIdle", p.AutoDeleteOnIdle)
	return m
}

func ruleConfig(r admin.RuleProperties) (map[string]any, error) {
	m := map[string]any{}
	switch f := r.Filter.(type) {
	case *admin.SQLFilter:
		m["FilterType"] = "Sql"
		m["SqlFilter"] = map[string]any{"SqlExpression": f.Expression}
	case *admin.TrueFilter:
		m["FilterType"] = "Sql"
		m["SqlFilter"] = map[string]any{"SqlExpression": "1=1"}
	case *admin.FalseFilter:
		m["FilterType"] = "Sql"
		m["SqlFilter"] = map[string]any{"SqlExpression": "1=0"}
	case *admin.CorrelationFilter:
		c := map[string]any{}
		setIf(c, "ContentType", f.ContentType)
		setIf(c, "CorrelationId", f.CorrelationID)
		setIf(c, "Label", f.Subject)
		setIf(c, "MessageId", f.MessageID)
		setIf(c, "ReplyTo", f.ReplyTo)
		setIf(c, "ReplyToSessionId", f.ReplyToSessionID)
		setIf(c, "SessionId", f.SessionID)
		setIf(c, "To", f.To)
		if len(f.ApplicationProperties) > 0 {
			c["Properties"] = f.ApplicationProperties
		}
		m["FilterType"] = "Correlation"
		m["CorrelationFilter"] = c
	default:
		return nil, fmt.Errorf("rule %s: filter %T has no config form", r.Name, r.Filter)
	}
	if a, ok := r.Action.(*admin.SQLAction); ok && strings.TrimSpace(a.Expression) != "" {
		m["Action"] = map[string]any{"SqlExpression": a.Expression}
	}
	return m, nil
}
