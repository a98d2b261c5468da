package servicebus

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/store/memstore"
)

// seedMessages are valid messages of the shapes the SDKs send.
func seedMessages(t testing.TB) [][]byte {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return [][]byte{
		mustEncode(t, &message.Message{Body: message.Body{Kind: message.BodyData, Data: [][]byte{[]byte("x")}}}),
		mustEncode(t, &message.Message{
			Header:                &message.Header{TTL: 1000, Priority: 4},
			MessageAnnotations:    encoding.Annotations{annScheduledEnqueueTime: at, annPartitionKey: "p"},
			Properties:            &message.Properties{MessageID: "id", GroupID: "s", CorrelationID: encoding.UUID{1}},
			ApplicationProperties: map[string]any{"k": int64(1)},
			Body:                  message.Body{Kind: message.BodyValue, Value: "v"},
			Footer:                encoding.Annotations{encoding.Symbol("f"): "g"},
		}),
		mustEncode(t, &message.Message{MessageAnnotations: encoding.Annotations{annMessageState: nil}}),
		// pyamqp's layout: delivery annotations after the footer.
		append(mustEncode(t, &message.Message{
			Properties: &message.Properties{MessageID: "py"},
			Body:       message.Body{Kind: message.BodyValue, Value: "v"},
			Footer:     encoding.Annotations{encoding.Symbol("f"): "g"},
		}), mustEncode(t, &message.Message{DeliveryAnnotations: encoding.Annotations{encoding.Symbol("d"): int64(1)}})...),
	}
}

// FuzzIngest feeds arbitrary deliveries, single or batch, to the mapping
// from AMQP to broker messages. Whatever it accepts must deliver as a valid
// message whose bare part is what was stored.
func FuzzIngest(f *testing.F) {
	for _, s := range seedMessages(f) {
		f.Add(false, s)
		batch := mustEncode(f, &message.Message{Body: message.Body{Kind: message.BodyData, Data: [][]byte{s, s}}})
		f.Add(true, batch)
	}
	f.Fuzz(func(t *testing.T, isBatch bool, payload []byte) {
		format := uint32(0)
		if isBatch {
			format = message.FormatBatch
		}
		one, msgs, err := ingestDelivery(format, payload)
		if err != nil {
			return
		}
		for _, m := range (&inbound{one: one, msgs: msgs}).messages() {
			if m.MessageID == "" {
				t.Fatal("accepted message without an id")
			}
			m.SequenceNumber, m.EnqueuedTime = 1, time.Unix(1, 0).UTC()
			for _, locked := range []bool{false, true} {
				out, err := encodeMessage(nil, m, locked)
				if err != nil {
					t.Fatalf("cannot deliver an accepted message: %v", err)
				}
				p, err := message.Parse(out)
				if err != nil {
					t.Fatalf("delivered message does not parse: %v", err)
				}
				stored, err := message.Parse(m.Body)
				if err != nil {
					t.Fatalf("stored body does not parse: %v", err)
				}
				if !bytes.Equal(p.Bare(), stored.Bare()) {
					t.Fatal("delivery changed the bare message")
				}
				if seq, _ := p.MessageAnnotations[annSequenceNumber].(int64); seq != 1 {
					t.Fatalf("x-opt-sequence-number %v", p.MessageAnnotations[annSequenceNumber])
				}
			}
		}
	})
}

// seedRequests are management requests of every operation.
func seedRequests(t testing.TB) [][]byte {
	tok := encoding.Array{Code: encoding.CodeUUID, Elems: []any{encoding.UUID{1}}}
	longs := encoding.Array{Code: encoding.CodeLong, Elems: []any{int64(1), int64(2)}}
	sched := mustEncode(t, &message.Message{
		MessageAnnotations: encoding.Annotations{annScheduledEnqueueTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		Properties:         &message.Properties{MessageID: "m"},
	})
	reqs := []struct {
		op   string
		body encoding.Map
	}{
		{opRenewLock, entries("lock-tokens", tok)},
		{opPeek, entries("from-sequence-number", int64(1), "message-count", int32(5), "session-id", "s")},
		{opReceiveBySeq, entries("sequence-numbers", longs, "receiver-settle-mode", uint32(1))},
		{opUpdateDisposition, entries("disposition-status", "suspended", "lock-tokens", tok, "deadletter-reason", "r",
			"properties-to-modify", entries("a", "b"))},
		{opSchedule, entries("messages", encoding.List{entries("message-id", "m", "message", sched, "session-id", "s")})},
		{opCancelScheduled, entries("sequence-numbers", longs)},
		{opRenewSessionLock, entries("session-id", "s")},
		{opGetSessionState, entries("session-id", "s")},
		{opSetSessionState, entries("session-id", "s", "session-state", []byte("x"))},
		{opGetMessageSession, entries("last-updated-time", sessionsSentinel, "skip", int32(0), "top", int32(100))},
		{opAddRule, entries("rule-name", "r", "rule-description", entries("correlation-filter", entries("label", "l", "properties", entries("k", int64(1)))))},
		{opRemoveRule, entries("rule-name", "r")},
		{opEnumerateRules, entries("top", int32(10), "skip", int32(0))},
		{opBatchDelete, entries("message-count", int32(10))},
	}
	out := make([][]byte, len(reqs))
	for i, r := range reqs {
		replyTo := "reply"
		if i%2 == 1 {
			replyTo = "" // pyamqp sends none
		}
		out[i] = mustEncode(t, &message.Message{
			Properties:            &message.Properties{MessageID: "id", ReplyTo: replyTo},
			ApplicationProperties: map[string]any{"operation": r.op, "server-timeout": uint64(5000)},
			Body:                  message.Body{Kind: message.BodyValue, Value: r.body},
		})
	}
	return out
}

// FuzzManagementRequest decodes arbitrary $management requests and runs
// them against a broker: every outcome must be a response, never a panic.
func FuzzManagementRequest(f *testing.F) {
	for _, s := range seedRequests(f) {
		f.Add(s)
	}
	ctx := context.Background()
	b, err := broker.Open(ctx, memstore.New(), broker.Options{Clock: clock.NewFake(time.Unix(1e9, 0))})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateQueue(ctx, "q", broker.QueueProperties{RequiresSession: true}); err != nil {
		f.Fatal(err)
	}
	h, err := NewHandler(Options{Broker: b})
	if err != nil {
		f.Fatal(err)
	}
	c := &conn{h: h, claims: map[string]claim{}, replies: map[string]*replyLink{}}
	l := &mgmtLink{c: c, addr: Address{Node: NodeManagement, Entity: "q"}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := parseRequest(payload, "node")
		if err != nil {
			return
		}
		resp := l.handle(req)
		if resp.status < 200 || resp.status > 599 {
			t.Fatalf("status %d", resp.status)
		}
		if resp.status >= 400 && resp.cond == "" {
			t.Fatalf("error status %d without a condition", resp.status)
		}
	})
}

// TestWriteFuzzCorpus writes the seeds above as the committed corpus
// (testdata/fuzz) when BUSBAR_WRITE_CORPUS is set.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("BUSBAR_WRITE_CORPUS") == "" {
		t.Skip("set BUSBAR_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	write := func(name string, i int, vals ...string) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n" + strings.Join(vals, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range seedMessages(t) {
		write("FuzzIngest", 2*i, "bool(false)", fmt.Sprintf("[]byte(%q)", s))
		batch := mustEncode(t, &message.Message{Body: message.Body{Kind: message.BodyData, Data: [][]byte{s, s}}})
		write("FuzzIngest", 2*i+1, "bool(true)", fmt.Sprintf("[]byte(%q)", batch))
	}
	for i, s := range seedRequests(t) {
		write("FuzzManagementRequest", i, fmt.Sprintf("[]byte(%q)", s))
	}
}
