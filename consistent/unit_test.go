package consistent_test

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/processor"
)

// TestMessageEncoding: the outbox keeps every field a sender sets and the
// type of every application property.
func TestMessageEncoding(t *testing.T) {
	s := func(v string) *string { return &v }
	ttl := 90 * time.Second
	at := time.Date(2026, 11, 25, 9, 0, 0, 123456000, time.UTC)
	m := &azservicebus.Message{MessageID: s("id"), Body: []byte{0, 1, 2, 255}, ContentType: s("application/json"),
		CorrelationID: s("corr"), Subject: s("Hit"), SessionID: s("game-1"), To: s("to"), ReplyTo: s("reply"),
		ReplyToSessionID: s("rs"), PartitionKey: s("game-1"), TimeToLive: &ttl, ScheduledEnqueueTime: &at,
		ApplicationProperties: map[string]any{"s": "x", "b": true, "i": 7, "i8": int8(-8), "i16": int16(16), "i32": int32(-32),
			"i64": int64(1) << 62, "u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(1) << 63,
			"f32": float32(1.5), "f64": 2.25, "t": at, "d": time.Minute, "bytes": []byte("raw")}}
	b, err := consistent.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := consistent.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, m)
	}
	if _, err := consistent.EncodeMessage(&azservicebus.Message{ApplicationProperties: map[string]any{"x": struct{}{}}}); err == nil ||
		!strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("an unsupported property type: %v", err)
	}
	if _, err := consistent.DecodeMessage([]byte(`{"props":{"x":{"t":"nope","v":1}}}`)); err == nil {
		t.Fatal("an unknown property type decoded")
	}
}

// TestOutputID: output ids are UUIDs, the same for the same input and
// position, different otherwise.
func TestOutputID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, in := range []string{"a", "b", "a0"} {
		for i := range 3 {
			id := consistent.OutputID(in, i)
			if !uuid.MatchString(id) || id != consistent.OutputID(in, i) || seen[id] {
				t.Fatalf("OutputID(%s, %d) = %s", in, i, id)
			}
			seen[id] = true
		}
	}
}

// TestNewValidatesOptions: bad configuration is an error, never a panic.
func TestNewValidatesOptions(t *testing.T) {
	client, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	h := tallyHandler(1)
	for name, o := range map[string]*consistent.Options{
		"nil options":      nil,
		"no store":         {Destination: "out"},
		"no destination":   {Store: consistent.SessionStateStore{}},
		"outbox, no store": {Store: consistent.SessionStateStore{}, Destination: "out", Outbox: true},
	} {
		if _, err := consistent.New(client, h, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := consistent.New[tally](client, nil, &consistent.Options{Store: consistent.SessionStateStore{}, Destination: "out"}); err == nil {
		t.Error("nil handler: no error")
	}
	if _, err := consistent.NewRelay(nil, nil, nil); err == nil {
		t.Error("NewRelay without a store: no error")
	}
}

// TestBusinessID: the business id comes from Options.BusinessID when set;
// an input without one is dead-lettered (a permanent error), not retried.
func TestBusinessID(t *testing.T) {
	e := newEnv(t, onPostgres, false)
	o := &consistent.Options{Store: e.store, Destination: "out", Clock: e.srv.Clock(),
		BusinessID: func(m *azservicebus.ReceivedMessage) (string, error) {
			g, _ := m.ApplicationProperties["game"].(string)
			if g == "" {
				return "", errors.New("no game")
			}
			return "range/" + g, nil
		}}
	r, err := consistent.New(e.client, tallyHandler(1), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	h := e.host("g1")
	e.send("g1", "m1")
	if err := h.handle(r); err != nil {
		t.Fatal(err)
	}
	ld, err := e.store.Load(context.Background(), consistent.Key{ID: "range/g1"}, "m1")
	if err != nil || ld.Match == nil || ld.Latest.Number != 1 {
		t.Fatalf("stream range/g1: %+v, %v", ld, err)
	}
	e.send("", "m2")
	m := h.receive()
	if err := r.HandleMessage(context.Background(), nil, m); !processor.IsPermanent(err) {
		t.Fatalf("an input without a business id: %v, want a permanent error", err)
	}
	e.expect([]string{"m1"}, 1, once)
}
