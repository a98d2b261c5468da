package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// faultyBackend is the real broker with injected failures.
type faultyBackend struct {
	*broker.Broker
	getQueueErr error
}

func (f *faultyBackend) GetQueue(ctx context.Context, name string) (*broker.QueueInfo, error) {
	if f.getQueueErr != nil {
		return nil, f.getQueueErr
	}
	return f.Broker.GetQueue(ctx, name)
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

func mustAuthorizer(t *testing.T) *sas.Authorizer {
	t.Helper()
	az, err := sas.NewAuthorizer([]sas.Rule{{KeyName: rootKeyName, PrimaryKey: rootKey, Rights: sas.Manage}})
	if err != nil {
		t.Fatal(err)
	}
	return az
}
