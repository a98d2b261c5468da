package console_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/server"
)

// TestResubmitScale resubmits BUSBAR_CONSOLE_SCALE dead letters (default
// 2,000; docs/console.md reports 100,000) through the API and checks that
// the job's progress rises to the total and its report accounts for every
// message.
func TestResubmitScale(t *testing.T) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("BUSBAR_CONSOLE_SCALE")); err == nil && v > 0 {
		n = v
	}
	s := start(t, busbartest.WithQueue("bulk", broker.QueueProperties{MaxSizeInMegabytes: 80 * 1024}))
	fill(t, s.Broker(), "bulk", n)
	c := signedIn(t, s, server.RootKeyName, rootKey)

	began := time.Now()
	var r report
	c.must("POST", "jobs", map[string]any{"kind": "resubmit", "path": "bulk"}, &r)
	var seen []int // progress as the UI polls it
	poll.Until(t, 10*time.Minute, "the job to finish", func() bool {
		c.must("GET", "jobs?id="+r.ID, nil, &r)
		seen = append(seen, r.Done)
		return r.Finished
	})
	took := time.Since(began)
	if r.Total != n || r.Examined != n || r.Matched != n || r.Done != n || r.Failed != 0 || r.Unconfirmed != 0 {
		t.Fatalf("report: %+v", r)
	}
	if a, d := counts(t, s, "bulk"); a != int64(n) || d != 0 {
		t.Fatalf("after resubmitting: %d active, %d dead-lettered", a, d)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("progress went back: %v", seen)
		}
	}
	t.Logf("resubmitted %d dead letters in %v (%.0f msg/s, shared machine), %d progress reports", n, took.Round(time.Millisecond), float64(n)/took.Seconds(), len(seen))
}

// fill puts n dead letters in q's dead-letter queue.
func fill(t *testing.T, b *broker.Broker, q string, n int) {
	t.Helper()
	ctx := context.Background()
	body, err := message.Encode(nil, &message.Message{Properties: &message.Properties{MessageID: "x"},
		ApplicationProperties: map[string]any{"n": int64(1)},
		Body:                  message.Body{Kind: message.BodyData, Data: [][]byte{[]byte(`{"order":1}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	for sent := 0; sent < n; sent += 1000 {
		batch := make([]*broker.Message, min(1000, n-sent))
		for i := range batch {
			batch[i] = &broker.Message{Body: body, MessageID: strconv.Itoa(sent + i), Properties: map[string]any{"n": int64(1)}}
		}
		if err := b.Send(ctx, q, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []*broker.Message
	cons, err := b.NewConsumer(ctx, q, broker.ConsumerOptions{Deliver: func(m *broker.Message) {
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cons.Close() }()
	for done := 0; done < n; {
		cons.AddCredit(1000)
		cons.Drain()
		mu.Lock()
		batch := got
		got = nil
		mu.Unlock()
		if len(batch) == 0 {
			t.Fatalf("only %d of %d dead-lettered", done, n)
		}
		tokens := make([]broker.LockToken, len(batch))
		for i, m := range batch {
			tokens[i] = m.LockToken
		}
		if err := b.DeadLetter(ctx, q, "Bulk", "scale test", nil, tokens...); err != nil {
			t.Fatal(err)
		}
		done += len(batch)
	}
}
