package servicebus_test

import (
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// putToken sends one put-token on a fresh $cbs link pair (ANONYMOUS
// connection) and returns the reply's status code and description.
func putToken(t *testing.T, e *env, audience, token string, msgID any, expiration any) (int32, string) {
	t.Helper()
	ctx := testCtx(t)
	sess := e.anonSession(ctx, t)
	snd, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply := "$cbs-reply"
	rcv, err := sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: reply, Credit: 10,
		RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	app := map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience}
	if expiration != nil {
		app["expiration"] = expiration
	}
	req := &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: msgID, ReplyTo: &reply},
		ApplicationProperties: app,
		Value:                 token,
	}
	if err := snd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Properties == nil || resp.Properties.CorrelationID != msgID {
		t.Fatalf("correlation-id %#v, want %#v", resp.Properties, msgID)
	}
	code, ok := resp.ApplicationProperties["status-code"].(int32)
	if !ok {
		t.Fatalf("status-code is a %T", resp.ApplicationProperties["status-code"])
	}
	desc, _ := resp.ApplicationProperties["status-description"].(string)
	return code, desc
}

func TestPutToken(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	base := "amqp://" + e.addr + "/"
	sign := func(aud string, exp time.Time) string { return sas.Sign(aud, rootKeyName, rootKey, exp) }
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name       string
		audience   string
		token      string
		msgID      any
		expiration any
		code       int32
		desc       string
	}{
		{"entity, string expiration", base + "q", sign(base+"q", later), "id-1", "1767225600", 202, ""},
		{"management node, uuid id, no expiration", base + "q/$management", sign(base+"q/$management", later), goamqp.UUID{1, 2}, nil, 202, ""},
		{"dead-letter sub-queue, timestamp expiration", base + "q/$DeadLetterQueue", sign(base+"q/$DeadLetterQueue", later), uint64(7), later, 202, ""},
		{"namespace", base, sign(base, later), "id-4", nil, 202, ""},
		{"missing entity", base + "nope", sign(base+"nope", later), "id-5", nil, 404, "The messaging entity '" + base + "nope' could not be found."},
		{"expired token", base + "q", sign(base+"q", time.Now().Add(-time.Minute)), "id-6", nil, 401, "ExpiredToken"},
		{"wrong key", base + "q", sas.Sign(base+"q", rootKeyName, "wrong", later), "id-7", nil, 401, ""},
		{"token for another entity", base + "q", sign(base+"other", later), "id-8", nil, 401, ""},
		{"not a token", base + "q", "Bearer xyz", "id-9", nil, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, desc := putToken(t, e, tc.audience, tc.token, tc.msgID, tc.expiration)
			if code != tc.code || !strings.Contains(desc, tc.desc) {
				t.Fatalf("status %d %q, want %d containing %q", code, desc, tc.code, tc.desc)
			}
		})
	}
}
