package broker

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleMessage() (*msgMeta, *Message) {
	mm := &msgMeta{sub: SubqueueDeadLetter, state: StateDeferred, deliveries: 3, enqueued: t0.UnixNano(),
		expires: t0.Add(time.Hour).UnixNano(), bodyRef: 7, size: 5, sessionID: "sess"}
	m := &Message{Body: []byte("body"), MessageID: "id", SessionID: "sess", CorrelationID: "c", To: "to", ReplyTo: "rt", ReplyToSessionID: "rts",
		Subject: "subj", ContentType: "ct", PartitionKey: "sess", ViaPartitionKey: "v", TimeToLive: time.Hour,
		ScheduledEnqueueTime: t0.Add(time.Minute), EnqueueSequenceNumber: 42, DeadLetterSource: "src",
		PropertiesModified: true, SystemPropertiesModified: true, hops: 2,
		Properties: map[string]any{"nil": nil, "t": true, "f": false, "s": "x", "b": []byte{1, 2}, "i8": int8(-1),
			"i16": int16(-2), "i32": int32(-3), "i64": int64(-4), "i": 5, "u8": uint8(6), "u16": uint16(7), "u32": uint32(8),
			"u64": uint64(9), "u": uint(10), "f32": float32(1.5), "f64": 2.5, "time": t0, "dur": time.Second,
			"uuid": [16]byte{1, 2, 3}}}
	return mm, m
}

type namedUUID [16]byte

func TestMessageRecordsRoundTrip(t *testing.T) {
	mm, m := sampleMessage()
	gotMeta, err := decodeMeta(encodeMeta(mm))
	if err != nil || gotMeta != *mm {
		t.Fatalf("meta %+v, %v; want %+v", gotMeta, err, *mm)
	}
	hdr, err := encodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMessage(hdr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("message\n%+v\nwant\n%+v", got, m)
	}
	// A named 16-byte array (an AMQP uuid type) is stored as a uuid.
	hdr, _ = encodeMessage(&Message{Properties: map[string]any{"u": namedUUID{9}}})
	got, _ = decodeMessage(hdr)
	if got.Properties["u"] != [16]byte{9} {
		t.Fatalf("named uuid decoded as %#v", got.Properties["u"])
	}
	if _, err := encodeMessage(&Message{Properties: map[string]any{"x": []int{1}}}); err == nil {
		t.Fatal("unsupported property type encoded")
	}
	rec, _ := encodeMessage(m)
	for i := range rec {
		if _, err := decodeMessage(rec[:i]); err == nil {
			t.Fatalf("truncated header record (%d of %d bytes) decoded", i, len(rec))
		}
	}
	meta := encodeMeta(mm)
	for i := range meta {
		if _, err := decodeMeta(meta[:i]); err == nil {
			t.Fatalf("truncated index record (%d of %d bytes) decoded", i, len(meta))
		}
	}
	if _, err := decodeMeta(append(meta, 0)); err == nil {
		t.Fatal("index record with a trailing byte decoded")
	}
	bad := append([]byte{}, rec...)
	bad[0] = 99
	if _, err := decodeMessage(bad); err == nil {
		t.Fatal("unknown version decoded")
	}
}

func TestEntityAndRuleRecordsRoundTrip(t *testing.T) {
	r := &entityRecord{id: 3, parent: 2, kind: kindSubscription, name: "s", created: t0, updated: t0.Add(time.Second),
		p: props{LockDuration: time.Minute, MaxSizeMB: 10, DupDetection: true, DupWindow: time.Hour, RequiresSession: true,
			DefaultTTL: InfiniteTTL, DLOnExpiration: true, DLOnFilterException: true, MaxDeliveryCount: 4, Status: StatusSendDisabled,
			ForwardTo: "f", ForwardDLTo: "d", AutoDeleteOnIdle: InfiniteTTL, MaxMessageSizeKB: 100, UserMetadata: "u",
			EnablePartitioning: true, EnableBatchedOps: true, SupportOrdering: true,
			AuthRules:    []AuthorizationRule{{KeyName: "k", PrimaryKey: "p", SecondaryKey: "s", Rights: []string{"Send", "Listen"}}},
			ForwardToURI: "https://h/f", ForwardDLToURI: "sb://h/d"}}
	got, err := decodeEntity(encodeEntity(r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("entity %+v %v", got, err)
	}
	// A version 1 record, written before rules and URIs existed, decodes
	// without them.
	r.p.AuthRules, r.p.ForwardToURI, r.p.ForwardDLToURI = nil, "", ""
	v2 := encodeEntity(r)
	v1 := append([]byte{entityRecordV1}, v2[1:len(v2)-3]...) // no rules (1 byte), two empty strings
	if got, err := decodeEntity(v1); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("version 1 entity %+v %v", got, err)
	}
	rp := &RuleProperties{Name: "r", CreatedAt: t0, Action: "SET a = @v", ActionParameters: map[string]any{"@v": int64(2)},
		Filter: RuleFilter{Kind: FilterCorrelation, SQL: "x", Parameters: map[string]any{"@p": int64(1)},
			Correlation: CorrelationFilter{CorrelationID: "c", MessageID: "m", To: "t", ReplyTo: "r", Subject: "s",
				SessionID: "se", ReplyToSessionID: "rs", ContentType: "ct", Properties: map[string]any{"k": "v"}}}}
	rec, err := encodeRule(rp)
	if err != nil {
		t.Fatal(err)
	}
	gr, err := decodeRule(rec)
	if err != nil || !reflect.DeepEqual(gr, rp) {
		t.Fatalf("rule %+v %v", gr, err)
	}
	// A version 1 record (no action parameters) still decodes: it is the
	// version 2 one without the trailing empty parameter map.
	rp.ActionParameters = nil
	rv2, err := encodeRule(rp)
	if err != nil {
		t.Fatal(err)
	}
	rv1 := append([]byte{ruleRecordV1}, rv2[1:len(rv2)-len(encodeEmptyMap(t))]...)
	if gr, err := decodeRule(rv1); err != nil || !reflect.DeepEqual(gr, rp) {
		t.Fatalf("version 1 rule %+v %v", gr, err)
	}
}

// encodeEmptyMap is how a nil value map encodes.
func encodeEmptyMap(t *testing.T) []byte {
	var e enc
	if err := e.valueMap(nil); err != nil {
		t.Fatal(err)
	}
	return e.b
}

func FuzzDecodeMeta(f *testing.F) {
	mm, _ := sampleMessage()
	f.Add(encodeMeta(mm))
	f.Add(encodeMeta(&msgMeta{}))
	in := *mm
	in.inline = true
	f.Add(append(encodeMeta(&in), "record"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		mm, rec, err := decodeMetaRecord(b)
		if err != nil {
			return
		}
		if mm.inline != (len(rec) > 0) {
			t.Fatalf("inline %v with a record of %d bytes", mm.inline, len(rec))
		}
		again, againRec, err := decodeMetaRecord(append(encodeMeta(&mm), rec...))
		if err != nil || again != mm || !bytes.Equal(againRec, rec) {
			t.Fatalf("round trip %+v vs %+v (%v)", again, mm, err)
		}
	})
}

// canonicalMessage re-encodes a decoded header record.
func canonicalMessage(b []byte) ([]byte, bool) {
	m, err := decodeMessage(b)
	if err != nil {
		return nil, false
	}
	out, err := encodeMessage(m)
	if err != nil {
		panic(err)
	}
	return out, true
}

func FuzzDecodeMessage(f *testing.F) {
	_, m := sampleMessage()
	rec, _ := encodeMessage(m)
	f.Add(rec)
	rec, _ = encodeMessage(&Message{})
	f.Add(rec)
	f.Fuzz(func(t *testing.T, b []byte) {
		c1, ok := canonicalMessage(b)
		if !ok {
			return
		}
		c2, ok := canonicalMessage(c1)
		if !ok || !bytes.Equal(c1, c2) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", c1, c2)
		}
	})
}

func FuzzDecodeEntity(f *testing.F) {
	f.Add(encodeEntity(&entityRecord{id: 1, kind: kindQueue, name: "q", created: t0, updated: t0,
		p: props{LockDuration: time.Minute, Status: StatusActive}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeEntity(b)
		if err != nil {
			return
		}
		again, err := decodeEntity(encodeEntity(r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v vs %+v (%v)", again, r, err)
		}
	})
}

func FuzzDecodeRule(f *testing.F) {
	rec, _ := encodeRule(&RuleProperties{Name: "r", Filter: RuleFilter{Kind: FilterSQL, SQL: "a = @p", Parameters: map[string]any{"@p": "x"}}})
	f.Add(rec)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRule(b)
		if err != nil {
			return
		}
		c1, err := encodeRule(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeRule(c1)
		if err != nil {
			t.Fatal(err)
		}
		c2, _ := encodeRule(r2)
		if !bytes.Equal(c1, c2) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"q", "t/Subscriptions/s", "q/$DeadLetterQueue", "t/subscriptions/s/$Transfer/$DeadLetterQueue", "a/b/c", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			return
		}
		again, err := ParsePath(p.String())
		if err != nil || fold(again.String()) != fold(p.String()) {
			t.Fatalf("ParsePath(%q) = %+v; its String %q parses to %+v (%v)", s, p, p.String(), again, err)
		}
	})
}

func TestParsePath(t *testing.T) {
	cases := map[string]Path{
		"q":                  {Entity: "q"},
		"a/b":                {Entity: "a/b"},
		"T/SUBSCRIPTIONS/S":  {Entity: "T", Subscription: "S"},
		"q/$deadletterqueue": {Entity: "q", Subqueue: SubqueueDeadLetter},
		"t/Subscriptions/s/$Transfer/$DeadLetterQueue": {Entity: "t", Subscription: "s", Subqueue: SubqueueTransferDeadLetter},
	}
	for in, want := range cases {
		got, err := ParsePath(in)
		if err != nil || got != want {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "q/$management", "t/Subscriptions/", "t/Subscriptions/a/b", "$DeadLetterQueue"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
}

// A message record fits the buffer messageRecordSize sizes for it: a record
// that outgrew it was copied whole, body included.
func TestMessageRecordFitsItsEstimate(t *testing.T) {
	long := strings.Repeat("x", 128)
	for _, m := range []*Message{
		{Body: make([]byte, 1024), MessageID: "0123456789abcdef0123456789abcdef", SessionID: "s-1"},
		{Body: make([]byte, 10), MessageID: long, SessionID: long, CorrelationID: long, To: long, ReplyTo: long,
			ReplyToSessionID: long, Subject: long, ContentType: long, PartitionKey: long, ViaPartitionKey: long,
			DeadLetterSource: long, TimeToLive: time.Hour, ScheduledEnqueueTime: time.Unix(1<<40, 0), EnqueueSequenceNumber: 1 << 62,
			Properties: map[string]any{"n": int64(-1), "s": long, "b": []byte(long), "f": 1.5, "t": time.Unix(1<<40, 0), "u": [16]byte{1}}},
	} {
		rec, err := encodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := messageRecordSize(m); cap(rec) != want {
			t.Fatalf("record of %d bytes in a buffer of %d, want the estimate's %d", len(rec), cap(rec), want)
		}
	}
}

// A body built in its BodyBuffer and sealed is stored without a copy while
// the message is unchanged, and re-encoded once any field of the record
// differs.
func TestSealedRecord(t *testing.T) {
	long := strings.Repeat("y", 300) // a header beyond the stack buffer sealed checks in
	for _, mk := range []func() *Message{
		func() *Message { return &Message{MessageID: "id-1", SessionID: "s"} },
		func() *Message {
			return &Message{MessageID: long, To: "to", TimeToLive: time.Minute, Properties: map[string]any{"k": "v", "n": int64(3)}}
		},
	} {
		fresh := func(m *Message) []byte {
			c := *m
			c.rec = nil
			rec, err := encodeMessage(&c)
			if err != nil {
				t.Fatal(err)
			}
			return rec
		}
		m := mk()
		body := []byte("the message's bytes, as a client encoded them")
		m.Body = append(m.BodyBuffer(len(body)), body...)
		m.Seal()
		rec, err := encodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if &rec[len(rec)-len(body)] != &m.Body[0] {
			t.Fatal("an unchanged sealed message was copied")
		}
		if !bytes.Equal(rec, fresh(m)) {
			t.Fatalf("sealed record %x, encoded %x", rec, fresh(m))
		}
		d, err := decodeMessage(rec)
		if err != nil || d.MessageID != m.MessageID || !bytes.Equal(d.Body, body) {
			t.Fatalf("sealed record decodes to %+v, %v", d, err)
		}
		for name, change := range map[string]func(c *Message){
			"hops":       func(c *Message) { c.hops++ },
			"id":         func(c *Message) { c.MessageID = "other" },
			"properties": func(c *Message) { c.Properties = map[string]any{"k": "w"} },
			"flags":      func(c *Message) { c.SystemPropertiesModified = true },
			"schedule":   func(c *Message) { c.ScheduledEnqueueTime = time.Unix(1e9, 0) },
			"forwarded":  func(c *Message) { c.EnqueueSequenceNumber = 7 },
			"body":       func(c *Message) { c.Body = c.Body[1:] },
		} {
			c := *m
			change(&c)
			rec, err := encodeMessage(&c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec, fresh(&c)) {
				t.Fatalf("%s changed: record %x, want %x", name, rec, fresh(&c))
			}
		}
		if !bytes.Equal(m.Body, body) {
			t.Fatal("re-encoding changed the sealed body")
		}
	}
	// A body that outgrew its buffer, or was never in one, is not sealed.
	m := &Message{MessageID: "id"}
	m.Body = append(m.BodyBuffer(4), "longer than four"...)
	m.Seal()
	if m.rec != nil {
		t.Fatal("a body outside its buffer was sealed")
	}
	m = &Message{MessageID: "id", Body: []byte("b")}
	m.Seal()
	if m.rec != nil || m.sealed() != nil {
		t.Fatal("a message without a BodyBuffer was sealed")
	}
}
