package admin

import (
	"encoding/xml"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
)

// entryOf wraps a description as the clients send it.
func entryOf(desc string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><updated>2026-01-01T00:00:00Z</updated>` +
		`<content type="application/xml">` + desc + `</content></entry>`
}

const descAttrs = ` xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"`

func decodeQueueString(t *testing.T, body string) (broker.QueueProperties, fieldSet, error) {
	t.Helper()
	return decodeQueueStringOver(t, broker.QueueProperties{}, body)
}

// decodeQueueStringOver decodes body over base, as an update does.
func decodeQueueStringOver(t *testing.T, base broker.QueueProperties, body string) (broker.QueueProperties, fieldSet, error) {
	t.Helper()
	r := newReader(strings.NewReader(body))
	se, err := openEntry(r)
	if err != nil {
		return broker.QueueProperties{}, nil, err
	}
	if se.Name.Local != "QueueDescription" {
		t.Fatalf("description = %s", se.Name.Local)
	}
	p, set, err := decodeQueue(r, base)
	if err == nil {
		err = closeEntry(r)
	}
	return p, set, err
}

func TestDecodeQueueAllProperties(t *testing.T) {
	body := entryOf(`<QueueDescription` + descAttrs + `>
		<LockDuration>PT45S</LockDuration>
		<MaxSizeInMegabytes>2048</MaxSizeInMegabytes>
		<RequiresDuplicateDetection>true</RequiresDuplicateDetection>
		<RequiresSession>true</RequiresSession>
		<DefaultMessageTimeToLive>P2D</DefaultMessageTimeToLive>
		<DeadLetteringOnMessageExpiration>true</DeadLetteringOnMessageExpiration>
		<DuplicateDetectionHistoryTimeWindow>PT30M</DuplicateDetectionHistoryTimeWindow>
		<MaxDeliveryCount>7</MaxDeliveryCount>
		<EnableBatchedOperations>false</EnableBatchedOperations>
		<AuthorizationRules></AuthorizationRules>
		<Status>SendDisabled</Status>
		<AutoDeleteOnIdle>PT1H</AutoDeleteOnIdle>
		<EnablePartitioning>false</EnablePartitioning>
		<ForwardTo>sb://localhost:5300/target</ForwardTo>
		<ForwardDeadLetteredMessagesTo>dlq-target</ForwardDeadLetteredMessagesTo>
		<UserMetadata>a &amp; b</UserMetadata>
		<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>
		<EnableExpress>false</EnableExpress>
		<MaxMessageSizeInKilobytes>4096</MaxMessageSizeInKilobytes>
	</QueueDescription>`)
	p, set, err := decodeQueueString(t, body)
	if err != nil {
		t.Fatal(err)
	}
	want := broker.QueueProperties{
		LockDuration: 45 * time.Second, MaxSizeInMegabytes: 2048, RequiresDuplicateDetection: true,
		DuplicateDetectionHistoryTimeWindow: 30 * time.Minute, RequiresSession: true,
		DefaultMessageTimeToLive: 48 * time.Hour, DeadLetteringOnMessageExpiration: true, MaxDeliveryCount: 7,
		Status: broker.StatusSendDisabled, ForwardTo: "target", ForwardDeadLetteredMessagesTo: "dlq-target",
		ForwardToURI:     "sb://localhost:5300/target",
		AutoDeleteOnIdle: time.Hour, MaxMessageSizeInKilobytes: 4096, UserMetadata: "a & b",
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", p, want)
	}
	if len(set) != 19 || !set["EnableBatchedOperations"] || set["SizeInBytes"] {
		t.Fatalf("field set = %v", set)
	}
}

func TestDecodeQueueErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown property", entryOf(`<QueueDescription` + descAttrs + `><LockDurations>PT1M</LockDurations></QueueDescription>`),
			"unknown property LockDurations in QueueDescription"},
		{"duplicate", entryOf(`<QueueDescription` + descAttrs + `><MaxDeliveryCount>1</MaxDeliveryCount><MaxDeliveryCount>2</MaxDeliveryCount></QueueDescription>`),
			"property MaxDeliveryCount appears more than once"},
		{"bad duration", entryOf(`<QueueDescription` + descAttrs + `><LockDuration>1 minute</LockDuration></QueueDescription>`),
			"property LockDuration: invalid ISO 8601 duration"},
		{"zero duration", entryOf(`<QueueDescription` + descAttrs + `><LockDuration>PT0S</LockDuration></QueueDescription>`),
			`property LockDuration: "PT0S" is not a positive duration`},
		{"bad bool", entryOf(`<QueueDescription` + descAttrs + `><RequiresSession>yes</RequiresSession></QueueDescription>`),
			`property RequiresSession: "yes" is not a boolean`},
		{"int range", entryOf(`<QueueDescription` + descAttrs + `><MaxDeliveryCount>0</MaxDeliveryCount></QueueDescription>`),
			"property MaxDeliveryCount: 0 is outside [1, 2147483647]"},
		{"not an int", entryOf(`<QueueDescription` + descAttrs + `><MaxSizeInMegabytes>1e3</MaxSizeInMegabytes></QueueDescription>`),
			`property MaxSizeInMegabytes: "1e3" is not an integer`},
		{"bad status", entryOf(`<QueueDescription` + descAttrs + `><Status>Creating</Status></QueueDescription>`),
			`property Status: "Creating" is not one of Active`},
		{"express", entryOf(`<QueueDescription` + descAttrs + `><EnableExpress>true</EnableExpress></QueueDescription>`),
			"property EnableExpress: true is not supported by Busbar"},
		{"nested in simple", entryOf(`<QueueDescription` + descAttrs + `><UserMetadata><x/></UserMetadata></QueueDescription>`),
			"property UserMetadata must be a simple value, found element <x>"},
		{"auth rules", entryOf(`<QueueDescription` + descAttrs + `><AuthorizationRules><Rule/></AuthorizationRules></QueueDescription>`),
			"unexpected element <Rule>, want AuthorizationRule"},
		{"auth rights", entryOf(`<QueueDescription` + descAttrs + `><AuthorizationRules><AuthorizationRule><Rights><Right>Send</Right></Rights></AuthorizationRule></AuthorizationRules></QueueDescription>`),
			"unexpected element <Right>, want AccessRights"},
		{"not an entry", `<feed xmlns="http://www.w3.org/2005/Atom"/>`, "the body must be an Atom <entry>, not <feed>"},
		{"no content", `<entry xmlns="http://www.w3.org/2005/Atom"><title>x</title></entry>`, "the <entry> has no <content>"},
		{"empty content", `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"></content></entry>`,
			"the <content> of the entry is empty"},
		{"two descriptions", entryOf(`<QueueDescription` + descAttrs + `/><QueueDescription` + descAttrs + `/>`),
			"the <content> holds more than one description (found <QueueDescription>)"},
		{"truncated", `<entry xmlns="http://www.w3.org/2005/Atom"><content><QueueDescription><LockDuration>PT1M`,
			"malformed XML: XML syntax error on line 1: unexpected EOF"},
		{"malformed", `<entry><content><QueueDescription></Queue></content></entry>`, "malformed XML"},
		{"stray text", entryOf(`<QueueDescription` + descAttrs + `>hello</QueueDescription>`),
			`unexpected text "hello" in QueueDescription`},
		{"forward URI without path", entryOf(`<QueueDescription` + descAttrs + `><ForwardTo>sb://host/</ForwardTo></QueueDescription>`),
			"property ForwardTo: the URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeQueueString(t, tc.body)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not wrap errBadRequest", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestDecodeNilPropertyIsAbsent(t *testing.T) {
	p, set, err := decodeQueueString(t, entryOf(`<QueueDescription`+descAttrs+`><ForwardTo i:nil="true"/><MaxDeliveryCount>2</MaxDeliveryCount></QueueDescription>`))
	if err != nil {
		t.Fatal(err)
	}
	if set["ForwardTo"] || !set["MaxDeliveryCount"] || p.MaxDeliveryCount != 2 {
		t.Fatalf("decoded %+v with fields %v", p, set)
	}
}

func TestDecodeOverKeepsUnsentProperties(t *testing.T) {
	cur := broker.QueueProperties{LockDuration: time.Minute, MaxDeliveryCount: 10, UserMetadata: "old", ForwardTo: "f"}
	got, _, err := decodeQueueStringOver(t, cur, entryOf(`<QueueDescription`+descAttrs+`><MaxDeliveryCount>3</MaxDeliveryCount><UserMetadata></UserMetadata><ForwardTo i:nil="true"/></QueueDescription>`))
	if err != nil {
		t.Fatal(err)
	}
	want := broker.QueueProperties{LockDuration: time.Minute, MaxDeliveryCount: 3, ForwardTo: "f"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded over %+v: %+v, want %+v", cur, got, want)
	}
}

// childNames returns the local names of the children of the first element
// named parent in doc, in document order.
func childNames(t *testing.T, doc []byte, parent string) []string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(string(doc)))
	depth, inside := 0, -1
	var names []string
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch x := tok.(type) {
		case xml.StartElement:
			depth++
			if inside < 0 && x.Name.Local == parent {
				inside = depth
			} else if inside > 0 && depth == inside+1 {
				names = append(names, x.Name.Local)
			}
		case xml.EndElement:
			if depth == inside {
				return names
			}
			depth--
		}
	}
	t.Fatalf("no complete <%s> in %s", parent, doc)
	return nil
}

func TestWriteQueueElementOrder(t *testing.T) {
	var w writer
	p := broker.QueueProperties{LockDuration: time.Minute, MaxSizeInMegabytes: 1024, DefaultMessageTimeToLive: broker.InfiniteTTL,
		DuplicateDetectionHistoryTimeWindow: 10 * time.Minute, MaxDeliveryCount: 10, Status: broker.StatusActive,
		AutoDeleteOnIdle: broker.InfiniteTTL, MaxMessageSizeInKilobytes: 1024, ForwardTo: "fwd", UserMetadata: "m"}
	ri := broker.RuntimeInfo{ActiveMessageCount: 3, DeadLetterMessageCount: 1, TotalMessageCount: 4, SizeInBytes: 99}
	writeQueue(&w, "localhost:5300", p, ri)
	got := childNames(t, w.b.Bytes(), "QueueDescription")
	want := []string{"LockDuration", "MaxSizeInMegabytes", "RequiresDuplicateDetection", "RequiresSession",
		"DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DuplicateDetectionHistoryTimeWindow",
		"MaxDeliveryCount", "EnableBatchedOperations", "SizeInBytes", "MessageCount", "IsAnonymousAccessible",
		"AuthorizationRules", "Status", "ForwardTo", "UserMetadata", "CreatedAt", "UpdatedAt", "AccessedAt",
		"SupportOrdering", "CountDetails", "AutoDeleteOnIdle", "EnablePartitioning", "EntityAvailabilityStatus",
		"EnableExpress", "MaxMessageSizeInKilobytes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order\n%v\nwant\n%v", got, want)
	}
	s := w.b.String()
	for _, frag := range []string{
		"<ForwardTo>sb://localhost:5300/fwd</ForwardTo>",
		"<DefaultMessageTimeToLive>P10675199DT2H48M5.4775807S</DefaultMessageTimeToLive>",
		`<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>3</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>1</d2p1:DeadLetterMessageCount>`,
		"<CreatedAt>0001-01-01T00:00:00Z</CreatedAt>",
	} {
		if !strings.Contains(s, frag) {
			t.Errorf("output lacks %s:\n%s", frag, s)
		}
	}
}

func decodeRuleString(t *testing.T, body string) (broker.RuleProperties, error) {
	t.Helper()
	r := newReader(strings.NewReader(body))
	se, err := openEntry(r)
	if err != nil {
		return broker.RuleProperties{}, err
	}
	rp, err := decodeRule(r, se.Name.Local)
	if err == nil {
		err = closeEntry(r)
	}
	return rp, err
}

func TestDecodeRuleFilters(t *testing.T) {
	gid := [16]byte{0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	for _, tc := range []struct {
		name, desc string
		want       broker.RuleProperties
	}{
		{"true filter (Go client)", `<RuleDescription` + descAttrs + `><Filter xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="TrueFilter"><SqlExpression>1=1</SqlExpression></Filter><Name>$Default</Name></RuleDescription>`,
			broker.RuleProperties{Name: "$Default", Filter: broker.RuleFilter{Kind: broker.FilterTrue}}},
		{"false filter", `<RuleDescription` + descAttrs + `><Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression><CompatibilityLevel>20</CompatibilityLevel></Filter><Action i:type="EmptyRuleAction"/><Name>f</Name></RuleDescription>`,
			broker.RuleProperties{Name: "f", Filter: broker.RuleFilter{Kind: broker.FilterFalse}}},
		{"sql filter with typed parameters and action (JS client)", `<RuleDescription` + descAttrs + `><Filter xmlns:p4="http://www.w3.org/2001/XMLSchema-instance" p4:type="SqlFilter"><SqlExpression>color = @c AND n &gt; @n</SqlExpression><Parameters>` +
			`<KeyValueOfstringanyType><Key>@c</Key><Value p4:type="l28:string" xmlns:l28="http://www.w3.org/2001/XMLSchema">blue</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>@n</Key><Value p4:type="l28:double" xmlns:l28="http://www.w3.org/2001/XMLSchema">1.5</Value></KeyValueOfstringanyType>` +
			`</Parameters></Filter><Action xmlns:p4="http://www.w3.org/2001/XMLSchema-instance" p4:type="SqlRuleAction"><SqlExpression>SET seen = TRUE</SqlExpression></Action><Name>s</Name></RuleDescription>`,
			broker.RuleProperties{Name: "s", Filter: broker.RuleFilter{Kind: broker.FilterSQL, SQL: "color = @c AND n > @n",
				Parameters: map[string]any{"@c": "blue", "@n": 1.5}}, Action: "SET seen = TRUE"}},
		{"correlation filter with every field and value type", `<RuleDescription` + descAttrs + `><Filter i:type="CorrelationFilter">` +
			`<CorrelationId>c</CorrelationId><MessageId>m</MessageId><To>to</To><ReplyTo>r</ReplyTo><Label>l</Label><SessionId>s</SessionId><ReplyToSessionId>rs</ReplyToSessionId><ContentType>ct</ContentType><Properties>` +
			`<KeyValueOfstringanyType><Key>i</Key><Value i:type="d6p1:int" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">-5</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>l</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">9000000000</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>b</Key><Value i:type="d6p1:boolean" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">true</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>t</Key><Value i:type="d6p1:dateTime" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">2026-03-04T05:06:07.5+01:00</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>d</Key><Value i:type="d6p1:duration" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">PT90S</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>g</Key><Value i:type="d6p1:guid" xmlns:d6p1="http://schemas.microsoft.com/2003/10/Serialization/">00112233-4455-6677-8899-aabbccddeeff</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>u</Key><Value i:type="d6p1:unsignedByte" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">255</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>f</Key><Value i:type="d6p1:float" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">0.25</Value></KeyValueOfstringanyType>` +
			`</Properties></Filter><Name>c</Name></RuleDescription>`,
			broker.RuleProperties{Name: "c", Filter: broker.RuleFilter{Kind: broker.FilterCorrelation, Correlation: broker.CorrelationFilter{
				CorrelationID: "c", MessageID: "m", To: "to", ReplyTo: "r", Subject: "l", SessionID: "s", ReplyToSessionID: "rs", ContentType: "ct",
				Properties: map[string]any{"i": int32(-5), "l": int64(9000000000), "b": true,
					"t": time.Date(2026, 3, 4, 4, 6, 7, 500000000, time.UTC), "d": 90 * time.Second, "g": gid,
					"u": uint8(255), "f": float32(0.25)}}}}},
		{"no filter means true", `<RuleDescription` + descAttrs + `><Name>n</Name></RuleDescription>`,
			broker.RuleProperties{Name: "n", Filter: broker.RuleFilter{Kind: broker.FilterTrue}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRuleString(t, entryOf(tc.desc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, tc.want)
			}
			// What Busbar writes decodes to the same rule.
			var w writer
			writeRule(&w, got)
			again, err := decodeRuleString(t, entryOf(w.b.String()))
			if err != nil {
				t.Fatalf("re-decoding %s: %v", w.b.String(), err)
			}
			if !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip\n%#v\nwant\n%#v", again, got)
			}
		})
	}
}

func TestDecodeRuleErrors(t *testing.T) {
	kv := func(typ, v string) string {
		return `<Properties><KeyValueOfstringanyType><Key>k</Key><Value i:type="x:` + typ + `">` + v + `</Value></KeyValueOfstringanyType></Properties>`
	}
	for _, tc := range []struct{ name, desc, want string }{
		{"no filter type", `<Filter><SqlExpression>1=1</SqlExpression></Filter>`, "property Filter has no i:type"},
		{"unknown filter type", `<Filter i:type="FancyFilter"/>`, `i:type "FancyFilter" is not one of`},
		{"sql syntax", `<Filter i:type="SqlFilter"><SqlExpression>a = </SqlExpression></Filter>`, "property Filter.SqlExpression:"},
		{"sql missing", `<Filter i:type="SqlFilter"></Filter>`, "Filter.SqlExpression is required"},
		{"correlation unknown field", `<Filter i:type="CorrelationFilter"><Subject>x</Subject></Filter>`, "unknown property Subject in Filter"},
		{"bad int", `<Filter i:type="CorrelationFilter">` + kv("int", "3000000000") + `</Filter>`, `key "k": "3000000000" is not a valid int`},
		{"unsupported type", `<Filter i:type="CorrelationFilter">` + kv("decimal", "1.0") + `</Filter>`, `type "decimal" is not supported`},
		{"value without type", `<Filter i:type="CorrelationFilter"><Properties><KeyValueOfstringanyType><Key>k</Key><Value>v</Value></KeyValueOfstringanyType></Properties></Filter>`,
			"Value has no i:type attribute"},
		{"duplicate key", `<Filter i:type="CorrelationFilter"><Properties>` +
			`<KeyValueOfstringanyType><Key>k</Key><Value i:type="x:string">a</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>k</Key><Value i:type="x:string">b</Value></KeyValueOfstringanyType></Properties></Filter>`,
			`key "k" appears more than once`},
		{"action parameter twice", `<Action i:type="SqlRuleAction"><SqlExpression>SET a = @v</SqlExpression><Parameters>` +
			`<KeyValueOfstringanyType><Key>@v</Key><Value i:type="x:int">1</Value></KeyValueOfstringanyType>` +
			`<KeyValueOfstringanyType><Key>@v</Key><Value i:type="x:int">2</Value></KeyValueOfstringanyType></Parameters></Action>`,
			`key "@v" appears more than once`},
		{"action syntax", `<Action i:type="SqlRuleAction"><SqlExpression>SET</SqlExpression></Action>`, "property Action.SqlExpression:"},
		{"unknown action", `<Action i:type="RemoveAll"/>`, `i:type "RemoveAll" is not one of SqlRuleAction, EmptyRuleAction`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRuleString(t, entryOf(`<RuleDescription`+descAttrs+`>`+tc.desc+`<Name>r</Name></RuleDescription>`))
			if err == nil || !errors.Is(err, errBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a bad request containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteKeyValuesUsesFiveCharacterPrefix(t *testing.T) {
	var w writer
	writeKeyValues(&w, "Properties", map[string]any{"b": "x<y", "a": int64(1)})
	want := `<Properties><KeyValueOfstringanyType><Key>a</Key><Value i:type="d6p1:long" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">1</Value></KeyValueOfstringanyType>` +
		`<KeyValueOfstringanyType><Key>b</Key><Value i:type="d6p1:string" xmlns:d6p1="http://www.w3.org/2001/XMLSchema">x&lt;y</Value></KeyValueOfstringanyType></Properties>`
	if got := w.b.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		path string
		want route
	}{
		{"/$namespaceinfo", route{kind: routeNamespace}},
		{"/$Resources/queues", route{kind: routeQueues}},
		{"/$Resources/Topics/", route{kind: routeTopics}},
		{"/orders", route{kind: routeEntity, entity: "orders"}},
		{"/a/b/c", route{kind: routeEntity, entity: "a/b/c"}},
		{"/t/Subscriptions", route{kind: routeSubscriptions, entity: "t"}},
		{"/a/b/subscriptions/s", route{kind: routeSubscription, entity: "a/b", sub: "s"}},
		{"/t/Subscriptions/s/Rules/", route{kind: routeRules, entity: "t", sub: "s"}},
		{"/t/Subscriptions/s/Rules/r", route{kind: routeRule, entity: "t", sub: "s", rule: "r"}},
	} {
		got, err := parseRoute(tc.path)
		if err != nil || got != tc.want {
			t.Errorf("parseRoute(%q) = %+v, %v; want %+v", tc.path, got, err, tc.want)
		}
	}
	for _, bad := range []string{"/", "/t/Subscriptions/s/Other", "/t/Subscriptions/s/Rules/r/x"} {
		if _, err := parseRoute(bad); statusOf(err) != 404 {
			t.Errorf("parseRoute(%q) error %v, want a 404", bad, err)
		}
	}
}
