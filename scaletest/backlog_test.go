//go:build linux

package scaletest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/store/pebble"
)

const (
	queue    = "backlog"
	bodySize = 1024
	// Targets of the broker issue for a 10,000,000-message backlog.
	maxStart = 10 * time.Second
	maxRSS   = 1 << 30
)

// TestBacklog fills a queue with BUSBAR_BACKLOG (default 120,000) messages
// of 1 KiB through the broker library, then starts `busbar serve` on the
// data and measures: time until it serves, peak resident memory while it
// counts the backlog in the background and while an SDK receiver takes
// BUSBAR_BACKLOG_RECEIVE messages (default: all of a default run's,
// 300,000 of a larger one), in order.
func TestBacklog(t *testing.T) {
	n := envInt(t, "BUSBAR_BACKLOG", 120000)
	take := envInt(t, "BUSBAR_BACKLOG_RECEIVE", min(n, 300000))
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")

	start := time.Now()
	fill(t, filepath.Join(data, "store"), n)
	fillTime := time.Since(start)
	t.Logf("filled %d messages in %v (%.0f msg/s)", n, fillTime.Round(time.Millisecond), float64(n)/fillTime.Seconds())

	bin := filepath.Join(tmp, "busbar")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := serveproc.Build(bctx, root, bin); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	p, err := serveproc.Start(serveproc.Options{Binary: bin, DataDir: data, HTTP: true, StartTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	startTime := time.Since(start)
	t.Logf("serving after %v with %d MiB resident", startTime.Round(time.Millisecond), rss(t, p.PID(), "VmRSS")>>20)

	ac, err := busbartest.PlainAdminClient(strings.Replace(p.ConnectionString(), p.AMQPAddr(), p.HTTPAddr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poll.UntilNil(t, 30*time.Minute, "the backlog counted", func() error {
		rp, err := ac.GetQueueRuntimeProperties(ctx, queue, nil)
		if err != nil {
			return err
		}
		if int(rp.ActiveMessageCount) != n {
			return fmt.Errorf("%d of %d counted", rp.ActiveMessageCount, n)
		}
		return nil
	})
	countTime := time.Since(start)
	t.Logf("counted after %v; peak resident memory so far %d MiB", countTime.Round(time.Millisecond), rss(t, p.PID(), "VmHWM")>>20)

	start = time.Now()
	receive(t, p.ConnectionString(), take)
	recvTime := time.Since(start)
	peak := rss(t, p.PID(), "VmHWM")
	t.Logf("received %d in order in %v (%.0f msg/s); peak resident memory %d MiB",
		take, recvTime.Round(time.Millisecond), float64(take)/recvTime.Seconds(), peak>>20)
	t.Logf("RESULT backlog=%d fill_s=%.1f start_s=%.2f count_s=%.1f receive_msg_s=%.0f peak_rss_mib=%d",
		n, fillTime.Seconds(), startTime.Seconds(), countTime.Seconds(), float64(take)/recvTime.Seconds(), peak>>20)
	if startTime > maxStart {
		t.Errorf("started in %v, the target is %v", startTime, maxStart)
	}
	if peak > maxRSS {
		t.Errorf("peak resident memory %d MiB, the target is %d MiB", peak>>20, maxRSS>>20)
	}
}

// fill writes n messages of bodySize bytes to a new queue, through the
// broker library on the Pebble store serve uses.
func fill(t *testing.T, dir string, n int) {
	withBroker(t, dir, func(b *broker.Broker) {
		if err := b.CreateQueue(context.Background(), queue, broker.QueueProperties{MaxSizeInMegabytes: 80 << 10}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, b, n, func(i int) (string, *broker.Message) { return queue, encode(i) })
	})
}

// withBroker runs f on a broker over a Pebble store in dir, as serve opens it.
func withBroker(t *testing.T, dir string, f func(*broker.Broker)) {
	st, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := broker.Open(context.Background(), st, broker.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f(b)
}

// sendAll sends messages 0..n-1, made by msg (which names the queue of
// each; a batch goes to the queue of its first message), in batches of
// 512 with sixteen writers (commits are fsync-bound; more writers share
// each fsync).
func sendAll(t *testing.T, b *broker.Broker, n int, msg func(i int) (string, *broker.Message)) {
	ctx := context.Background()
	const batch, writers = 512, 16
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Batches are numbered in the order they are taken; the
				// broker numbers messages in the order they commit, so
				// the receiver checks order by sequence number.
				mu.Lock()
				first := next
				next += batch
				mu.Unlock()
				if first >= n {
					return
				}
				// A batch that spans two entities is sent as one send
				// per entity.
				msgs := make([]*broker.Message, 0, batch)
				var q string
				for i := first; i <= min(first+batch, n); i++ {
					var name string
					var m *broker.Message
					if i < min(first+batch, n) {
						name, m = msg(i)
					}
					if len(msgs) > 0 && name != q {
						if err := b.Send(ctx, q, msgs); err != nil {
							errs <- err
							return
						}
						msgs = make([]*broker.Message, 0, batch)
					}
					if m != nil {
						q = name
						msgs = append(msgs, m)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// encode makes message i as a client would send it: properties with its
// message id, and a data section of bodySize bytes.
func encode(i int) *broker.Message {
	id := "m" + strconv.Itoa(i)
	raw, err := message.AppendProperties(nil, &message.Properties{MessageID: id})
	if err != nil {
		panic(err)
	}
	body := make([]byte, bodySize)
	copy(body, id)
	raw = message.AppendData(raw, body)
	return &broker.Message{MessageID: id, Body: raw}
}

// receive takes want messages with the SDK in receive-and-delete mode and
// checks that each is whole and that sequence numbers only grow.
func receive(t *testing.T, connStr string, want int) {
	c := busbartest.NewClient(t, connStr)
	r, err := c.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	seen := map[string]bool{}
	var last int64
	for got := 0; got < want; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ms, err := r.ReceiveMessages(ctx, min(1000, want-got), nil)
		cancel()
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		for _, m := range ms {
			if m.SequenceNumber == nil || *m.SequenceNumber <= last {
				t.Fatalf("message %d: sequence number %v after %d", got, m.SequenceNumber, last)
			}
			last = *m.SequenceNumber
			if len(m.Body) != bodySize || !strings.HasPrefix(string(m.Body), m.MessageID) || seen[m.MessageID] {
				t.Fatalf("message %d: id %q, %d bytes, seen before %v", got, m.MessageID, len(m.Body), seen[m.MessageID])
			}
			seen[m.MessageID] = true
			got++
		}
	}
}

// rss reads a memory figure (VmRSS, VmHWM) of process pid, in bytes.
func rss(t *testing.T, pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return v
}
