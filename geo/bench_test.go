//go:build unix

package geo_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/busbar-io/busbar/geo"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/processor"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGeo sends b.N messages (16 sessions) through a Sender to two
// in-process regions, with a consumer in each and the journal in
// PostgreSQL, and reports the traffic per processed message: journal
// reads and writes, and Service Bus deliveries (both regions, the
// secondary copies included). msg/s is until every message is processed;
// CPU per message counts the whole process (both brokers, both consumers,
// the sender) until the secondary copies are settled too.
func BenchmarkGeo(b *testing.B) {
	for _, g := range granularities {
		b.Run(g.String(), func(b *testing.B) {
			benchGeo(b, g)
		})
	}
}

func benchGeo(b *testing.B, g geo.Granularity) {
	tb := b
	w := newWorld(tb)
	east, west := newRegion(tb, "east"), newRegion(tb, "west")
	s, err := geo.NewSender(newSender(tb, east.client), newSender(tb, west.client), &geo.SenderOptions{Delay: 2 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	je, jw := w.journal(tb, nil), w.journal(tb, nil)
	opts := geo.ConsumerOptions{Granularity: g, SessionIdleTimeout: time.Second, Lease: 10 * time.Second, MaxConcurrentSessions: 16, OnError: func(error) {}}
	oe, ow := opts, opts
	oe.Region, ow.Region = "east", "west"
	ce, _ := geo.NewConsumer(east.client, processor.Queue(queue), je, w.handler(je, nil), &oe)
	cw, _ := geo.NewConsumer(west.client, processor.Queue(queue), jw, w.handler(jw, nil), &ow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = ce.Run(ctx) }()
	go func() { _ = cw.Run(ctx) }()
	sessions := 16
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	for i := range b.N {
		sid := fmt.Sprintf("bench-%02d", i%sessions)
		pos := int64(i/sessions) + 1
		if _, err := s.Send(ctx, message(sid, pos), pos); err != nil {
			b.Fatal(err)
		}
	}
	poll.Until(b, 5*time.Minute, "every message processed", func() bool { return w.count() >= int64(b.N) })
	el := time.Since(t0)
	// The secondary copies too, so that the traffic counts both.
	settled := func() int64 {
		se, sw := ce.Stats(), cw.Stats()
		return se.Processed + se.Copies + se.DeadLettered + sw.Processed + sw.Copies + sw.DeadLettered
	}
	poll.Until(b, 5*time.Minute, "every copy settled", func() bool { return settled() >= 2*int64(b.N) })
	cpu := cpuTime() - cpu0
	b.StopTimer()
	se, sw := ce.Stats(), cw.Stats()
	n := float64(b.N)
	b.ReportMetric(n/el.Seconds(), "msg/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
	b.ReportMetric(float64(se.JournalReads+sw.JournalReads)/n, "journal-reads/msg")
	b.ReportMetric(float64(se.JournalWrites+sw.JournalWrites)/n, "journal-writes/msg")
	b.ReportMetric(float64(se.Received+sw.Received)/n, "deliveries/msg")
	b.ReportMetric(float64(se.Waits+sw.Waits)/n, "waits/msg")
}
