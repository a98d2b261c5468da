package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// faultyBackend is the real broker with injected failures.
type faultyBackend struct {
	*broker.Broker
	getQueueErr error
	addRuleErr  func(p broker.RuleProperties) error
}

func (f *faultyBackend) GetQueue(ctx context.Context, name string) (*broker.QueueInfo, error) {
	if f.getQueueErr != nil {
		return nil, f.getQueueErr
	}
	return f.Broker.GetQueue(ctx, name)
}

func (f *faultyBackend) AddRule(ctx context.Context, topic, sub string, p broker.RuleProperties) error {
	if f.addRuleErr != nil {
		if err := f.addRuleErr(p); err != nil {
			return err
		}
	}
	return f.Broker.AddRule(ctx, topic, sub, p)
}

func TestInternalErrorsAre500(t *testing.T) {
	e := newEnv(t)
	fb := &faultyBackend{Broker: e.b, getQueueErr: errors.New("disk on fire")}
	h := NewHandler(Options{Broker: fb, Authorizer: mustAuthorizer(t), Logger: quietLogger()})
	req := httptest.NewRequest(http.MethodGet, "http://busbar.local/q?api-version=2021-05", nil)
	req.Header.Set("Authorization", sas.Sign("http://busbar.local/q", rootKeyName, rootKey, time.Now().Add(time.Minute)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	errorBody(t, rec.Code, rec.Body.String(), 500, "disk on fire")
	if ct := rec.Header().Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
}

func TestRuleUpdateRestoresTheOldRuleWhenRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.b.CreateTopic(ctx, "t", broker.TopicProperties{}); err != nil {
		t.Fatal(err)
	}
	if err := e.b.CreateSubscription(ctx, "t", "s", broker.SubscriptionProperties{}); err != nil {
		t.Fatal(err)
	}
	old := broker.RuleProperties{Name: "r", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQL: "a = 1"}}
	if err := e.b.AddRule(ctx, "t", "s", old); err != nil {
		t.Fatal(err)
	}
	fb := &faultyBackend{Broker: e.b, addRuleErr: func(p broker.RuleProperties) error {
		if p.Filter.SQL == "b = 2" {
			return errors.New("store full")
		}
		return nil
	}}
	before, err := getRule(ctx, fb, "t", "s", "r")
	if err != nil {
		t.Fatal(err)
	}
	next := broker.RuleProperties{Name: "r", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQL: "b = 2"}}
	if err := updateRule(ctx, fb, "t", "s", before, next); err == nil || !strings.Contains(err.Error(), "store full") {
		t.Fatalf("update error %v, want the AddRule failure", err)
	}
	after, err := getRule(ctx, fb, "t", "s", "r")
	if err != nil || after.Filter.SQL != "a = 1" {
		t.Fatalf("after a refused update the rule is %+v, %v; want the old one", after, err)
	}
	// And an accepted update replaces it.
	next.Filter.SQL = "c = 3"
	if err := updateRule(ctx, fb, "t", "s", after, next); err != nil {
		t.Fatal(err)
	}
	if got, _ := getRule(ctx, fb, "t", "s", "R"); got.Filter.SQL != "c = 3" {
		t.Fatalf("after the update the rule is %+v", got)
	}
}

func mustAuthorizer(t *testing.T) *sas.Authorizer {
	t.Helper()
	az, err := sas.NewAuthorizer([]sas.Rule{{KeyName: rootKeyName, PrimaryKey: rootKey, Rights: sas.Manage}})
	if err != nil {
		t.Fatal(err)
	}
	return az
}
