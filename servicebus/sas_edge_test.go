package servicebus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// TestPutTokenEdgeCases covers the tokens a hostile or broken client
// sends on $cbs beyond TestPutToken's: huge ones, absurd expiries, and
// near-misses of a valid signature. Each is refused with 401 and a
// description; the connection stays usable.
func TestPutTokenEdgeCases(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	base := "amqp://" + e.addr + "/"
	later := time.Now().Add(time.Hour)
	valid := sas.Sign(base+"q", rootKeyName, rootKey, later)
	for _, tc := range []struct {
		name, token string
		code        int32
	}{
		{"huge token, 1 MiB sr", sas.Sign(base+"q/"+strings.Repeat("a", 1<<20), rootKeyName, rootKey, later), 401},
		{"huge signature", "SharedAccessSignature sr=" + base + "q&sig=" + strings.Repeat("A", 1<<20) + "&se=9999999999&skn=" + rootKeyName, 401},
		{"expiry zero", sas.Sign(base+"q", rootKeyName, rootKey, time.Unix(0, 0)), 401},
		{"expiry beyond int64 seconds", strings.Replace(valid, "se=", "se=99999999999999999999", 1), 401},
		{"signature of another expiry", strings.Replace(valid, "se=", "se=1", 1), 401},
		{"duplicated fields", valid + "&sig=AAAA", 401},
		{"listen key signed with the root key", sas.Sign(base+"q", listenName, rootKey, later), 401},
		{"empty", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, desc := putToken(t, e, base+"q", tc.token, "id", nil)
			if code != tc.code || desc == "" {
				t.Fatalf("status %d %.200q, want %d with a description", code, desc, tc.code)
			}
		})
	}
	if code, desc := putToken(t, e, base+"q", valid, "id", nil); code != 202 {
		t.Fatalf("a valid token after the hostile ones: %d %q", code, desc)
	}
}

// TestPutTokenWrongRights grants a Listen-only claim on $cbs and then
// tries to send with it: the attach is refused with
// amqp:unauthorized-access, while receiving is allowed.
func TestPutTokenWrongRights(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.queue("q", broker.QueueProperties{})
	ctx := testCtx(t)
	sess := e.anonSession(ctx, t)
	aud := "amqp://" + e.addr + "/q"
	cbsSnd, err := sess.NewSender(ctx, "$cbs", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply := "$cbs-reply"
	cbsRcv, err := sess.NewReceiver(ctx, "$cbs", &goamqp.ReceiverOptions{TargetAddress: reply, Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	req := &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: "1", ReplyTo: &reply},
		ApplicationProperties: map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": aud},
		Value:                 sas.Sign(aud, listenName, listenKey, time.Now().Add(time.Hour)),
	}
	if err := cbsSnd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := cbsRcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.ApplicationProperties["status-code"]; code != int32(202) {
		t.Fatalf("put-token of a Listen token: %v %v", code, resp.ApplicationProperties["status-description"])
	}
	_, err = sess.NewSender(ctx, "q", nil)
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != "amqp:unauthorized-access" {
		t.Fatalf("sending with a Listen claim: %v, want amqp:unauthorized-access", err)
	}
	if ae.Description == "" {
		t.Fatal("refusal without a description")
	}
	rcv, err := sess.NewReceiver(ctx, "q", nil)
	if err != nil {
		t.Fatalf("receiving with a Listen claim: %v", err)
	}
	_ = rcv.Close(ctx)
}
