package admin

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
)

// The fuzz targets feed arbitrary bodies to the description decoders. Every
// failure must be a 400 (errBadRequest), never a panic or another error;
// whatever decodes must survive Busbar's own rendering unchanged. Seeds are
// in testdata/fuzz/<FuzzName>/.

// decodeBody opens the entry and decodes the description with dec, over
// the zero properties (as a create does).
func decodeBody[T any](body []byte, dec func(*reader, T) (T, fieldSet, error)) (T, fieldSet, error) {
	var zero T
	r := newReader(bytes.NewReader(body))
	if _, err := openEntry(r); err != nil {
		return zero, nil, err
	}
	p, set, err := dec(r, zero)
	if err == nil {
		err = closeEntry(r)
	}
	return p, set, err
}

func checkBadRequest(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, errBadRequest) {
		t.Fatalf("decode error %v (%T) is not a bad request", err, err)
	}
}

// Forwarding names that are not plain entity names (the broker refuses
// them) need not survive a round trip through a URI.
func plainName(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '/') {
			return false
		}
	}
	return len(s) > 0 && s[0] != '/' && s[len(s)-1] != '/'
}

func orDuration(d *time.Duration) {
	if *d == 0 {
		*d = time.Minute
	}
}

func FuzzDecodeQueue(f *testing.F) {
	f.Add([]byte(queueXML(`<LockDuration>PT30S</LockDuration><MaxDeliveryCount>3</MaxDeliveryCount>`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _, err := decodeBody(body, decodeQueue)
		checkBadRequest(t, err)
		if err != nil || !plainName(p.ForwardTo) && p.ForwardTo != "" || !plainName(p.ForwardDeadLetteredMessagesTo) && p.ForwardDeadLetteredMessagesTo != "" {
			return
		}
		for _, d := range []*time.Duration{&p.LockDuration, &p.DefaultMessageTimeToLive, &p.DuplicateDetectionHistoryTimeWindow, &p.AutoDeleteOnIdle} {
			orDuration(d)
		}
		p.MaxSizeInMegabytes, p.MaxMessageSizeInKilobytes = max(p.MaxSizeInMegabytes, 1), max(p.MaxMessageSizeInKilobytes, 1)
		p.MaxDeliveryCount = max(p.MaxDeliveryCount, 1)
		if p.Status == "" {
			p.Status = broker.StatusActive
		}
		// A destination comes back as the URI the writer shows.
		p.ForwardToURI = forwardURI("host", p.ForwardTo, p.ForwardToURI)
		p.ForwardDeadLetteredMessagesToURI = forwardURI("host", p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURI)
		var w writer
		writeQueue(&w, "host", p, broker.RuntimeInfo{})
		again, _, err := decodeBody([]byte(entryOf(w.b.String())), decodeQueue)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip of %+v gave %+v, %v\n%s", p, again, err, w.b.String())
		}
	})
}

func FuzzDecodeTopic(f *testing.F) {
	f.Add([]byte(entryOf(`<TopicDescription` + descAttrs + `><DefaultMessageTimeToLive>P1D</DefaultMessageTimeToLive><SupportOrdering>true</SupportOrdering></TopicDescription>`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _, err := decodeBody(body, decodeTopic)
		checkBadRequest(t, err)
		if err != nil {
			return
		}
		for _, d := range []*time.Duration{&p.DefaultMessageTimeToLive, &p.DuplicateDetectionHistoryTimeWindow, &p.AutoDeleteOnIdle} {
			orDuration(d)
		}
		p.MaxSizeInMegabytes, p.MaxMessageSizeInKilobytes = max(p.MaxSizeInMegabytes, 1), max(p.MaxMessageSizeInKilobytes, 1)
		if p.Status == "" {
			p.Status = broker.StatusActive
		}
		var w writer
		writeTopic(&w, p, broker.RuntimeInfo{}, filterCounts{present: true})
		again, _, err := decodeBody([]byte(entryOf(w.b.String())), decodeTopic)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip of %+v gave %+v, %v\n%s", p, again, err, w.b.String())
		}
	})
}

func FuzzDecodeSubscription(f *testing.F) {
	f.Add([]byte(entryOf(`<SubscriptionDescription` + descAttrs + `><LockDuration>PT1M</LockDuration><DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>a = 1</SqlExpression></Filter><Name>r</Name></DefaultRuleDescription></SubscriptionDescription>`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, _, err := decodeBody(body, decodeSubscription)
		checkBadRequest(t, err)
		if err != nil || !plainName(p.ForwardTo) && p.ForwardTo != "" || !plainName(p.ForwardDeadLetteredMessagesTo) && p.ForwardDeadLetteredMessagesTo != "" {
			return
		}
		for _, d := range []*time.Duration{&p.LockDuration, &p.DefaultMessageTimeToLive, &p.AutoDeleteOnIdle} {
			orDuration(d)
		}
		p.MaxDeliveryCount = max(p.MaxDeliveryCount, 1)
		if p.Status == "" {
			p.Status = broker.StatusActive
		}
		p.DefaultRule = nil // accepted at creation, never rendered
		p.ForwardToURI = forwardURI("host", p.ForwardTo, p.ForwardToURI)
		p.ForwardDeadLetteredMessagesToURI = forwardURI("host", p.ForwardDeadLetteredMessagesTo, p.ForwardDeadLetteredMessagesToURI)
		var w writer
		writeSubscription(&w, "host", p, broker.RuntimeInfo{})
		again, _, err := decodeBody([]byte(entryOf(w.b.String())), decodeSubscription)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip of %+v gave %+v, %v\n%s", p, again, err, w.b.String())
		}
	})
}

func decodeRuleDesc(r *reader, _ broker.RuleProperties) (broker.RuleProperties, fieldSet, error) {
	rp, err := decodeRule(r, "RuleDescription")
	return rp, nil, err
}

func FuzzDecodeRule(f *testing.F) {
	f.Add([]byte(entryOf(`<RuleDescription` + descAttrs + `><Filter i:type="CorrelationFilter"><CorrelationId>c</CorrelationId><Properties><KeyValueOfstringanyType><Key>k</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">5</Value></KeyValueOfstringanyType></Properties></Filter><Action i:type="EmptyRuleAction"/><Name>r</Name></RuleDescription>`)))
	f.Fuzz(func(t *testing.T, body []byte) {
		rp, _, err := decodeBody(body, decodeRuleDesc)
		checkBadRequest(t, err)
		if err != nil {
			return
		}
		var w writer
		writeRule(&w, rp)
		again, _, err := decodeBody([]byte(entryOf(w.b.String())), decodeRuleDesc)
		// %#v compares NaN parameters equal, which DeepEqual does not.
		if err != nil || fmt.Sprintf("%#v", again) != fmt.Sprintf("%#v", rp) {
			t.Fatalf("round trip of %#v gave %#v, %v\n%s", rp, again, err, w.b.String())
		}
	})
}
