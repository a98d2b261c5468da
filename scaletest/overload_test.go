//go:build linux

package scaletest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sbadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/busbartest"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
	"github.com/busbar-io/busbar/sas"
)

// The overload tests run `busbar serve` as a child process, push it with
// one kind of overload each, and measure the child's resident memory and
// the round-trip latency of a well-behaved SDK client on its own queue
// ("probe") before and during the overload. They assert what must hold
// whatever the machine (every connection served, every probe round trip
// completes, memory under a documented bound) and log the figures on
// RESULT lines; the sizes come from BUSBAR_OVERLOAD_* variables, small by
// default, and the documented campaign (docs/reliability.md, section 4)
// sets them to the sizes.

// binDir holds the binary built once for the package's tests.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func busbarBinary(t *testing.T) string {
	binOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			binErr = err
			return
		}
		if binDir, binErr = os.MkdirTemp("", "busbar-scaletest-"); binErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binErr = serveproc.Build(ctx, root, filepath.Join(binDir, "busbar"))
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "busbar")
}

// overloadServer is a child broker with a probe queue.
type overloadServer struct {
	t     *testing.T
	p     *serveproc.Process
	admin *sbadmin.Client
	key   string
}

func startOverload(t *testing.T, data string, args ...string) *overloadServer {
	t.Helper()
	p, err := serveproc.Start(serveproc.Options{Binary: busbarBinary(t), DataDir: data, HTTP: true,
		Args: args, StartTimeout: 10 * time.Minute, LogLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ac, err := busbartest.PlainAdminClient(strings.Replace(p.ConnectionString(), p.AMQPAddr(), p.HTTPAddr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	s := &overloadServer{t: t, p: p, admin: ac}
	s.key = sas.ParseConnectionString(p.ConnectionString()).Key
	s.queue("probe", nil)
	return s
}

func (s *overloadServer) queue(name string, p *sbadmin.QueueProperties) {
	s.t.Helper()
	if _, err := s.admin.CreateQueue(context.Background(), name, &sbadmin.CreateQueueOptions{Properties: p}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *overloadServer) rssMiB() int64  { return rss(s.t, s.p.PID(), "VmRSS") >> 20 }
func (s *overloadServer) peakMiB() int64 { return rss(s.t, s.p.PID(), "VmHWM") >> 20 }

// latency is a distribution of probe round trips.
type latency struct{ p50, p99, max time.Duration }

func (l latency) String() string {
	return fmt.Sprintf("p50=%v p99=%v max=%v", l.p50.Round(10*time.Microsecond), l.p99.Round(10*time.Microsecond), l.max.Round(10*time.Microsecond))
}

// probe sends one message to the probe queue and receives and completes
// it, n times, with its own SDK client; each round trip must finish
// within 30 s whatever the load.
func (s *overloadServer) probe(n int) latency {
	s.t.Helper()
	c := busbartest.NewClient(s.t, s.p.ConnectionString())
	snd, err := c.NewSender("probe", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer snd.Close(context.Background())
	rcv, err := c.NewReceiverForQueue("probe", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rcv.Close(context.Background())
	ds := make([]time.Duration, 0, n)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		body := fmt.Sprintf("probe-%d", i)
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			cancel()
			s.t.Fatalf("probe send %d: %v", i, err)
		}
		ms, err := rcv.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != body {
			cancel()
			s.t.Fatalf("probe receive %d: %v %v", i, ms, err)
		}
		if err := rcv.CompleteMessage(ctx, ms[0], nil); err != nil {
			cancel()
			s.t.Fatalf("probe complete %d: %v", i, err)
		}
		cancel()
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return latency{ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]}
}

// rawConn is a minimal AMQP client: SASL PLAIN, open, begin, attach, and
// frames written as the test wants.
type rawConn struct {
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(addr, keyName, key string) (*rawConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return nil, err
	}
	c := &rawConn{nc: nc, br: bufio.NewReaderSize(nc, 4096)}
	_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	fail := func(err error) (*rawConn, error) { _ = nc.Close(); return nil, err }
	if _, err := nc.Write([]byte("AMQP\x03\x01\x00\x00")); err != nil {
		return fail(err)
	}
	if _, err := io.ReadFull(c.br, make([]byte, 8)); err != nil {
		return fail(err)
	}
	if _, err := c.read(); err != nil { // mechanisms
		return fail(err)
	}
	init := &frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00" + keyName + "\x00" + key)}
	if err := c.write(frames.TypeSASL, 0, init); err != nil {
		return fail(err)
	}
	if b, err := c.read(); err != nil {
		return fail(err)
	} else if o, ok := b.(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		return fail(fmt.Errorf("sasl outcome %+v", b))
	}
	if _, err := nc.Write([]byte("AMQP\x00\x01\x00\x00")); err != nil {
		return fail(err)
	}
	if _, err := io.ReadFull(c.br, make([]byte, 8)); err != nil {
		return fail(err)
	}
	if err := c.write(frames.TypeAMQP, 0, &frames.Open{ContainerID: "overload", MaxFrameSize: 65536, ChannelMax: 10}); err != nil {
		return fail(err)
	}
	if b, err := c.read(); err != nil {
		return fail(err)
	} else if _, ok := b.(*frames.Open); !ok {
		return fail(fmt.Errorf("got %T, want open", b))
	}
	if err := c.write(frames.TypeAMQP, 0, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 10}); err != nil {
		return fail(err)
	}
	if b, err := c.read(); err != nil {
		return fail(err)
	} else if _, ok := b.(*frames.Begin); !ok {
		return fail(fmt.Errorf("got %T, want begin", b))
	}
	return c, nil
}

func (c *rawConn) write(typ uint8, ch uint16, body frames.Body) error {
	b, err := frames.Append(nil, typ, ch, body)
	if err != nil {
		return err
	}
	_, err = c.nc.Write(b)
	return err
}

// read returns the next non-empty frame's body.
func (c *rawConn) read() (frames.Body, error) {
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return nil, err
		}
		f := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		copy(f, hdr[:])
		if _, err := io.ReadFull(c.br, f[4:]); err != nil {
			return nil, err
		}
		h, err := frames.ParseHeader(f[:frames.HeaderSize])
		if err != nil {
			return nil, err
		}
		body, err := frames.Decode(h, f)
		if err != nil || body != nil {
			return body, err
		}
	}
}

// heartbeat is an empty AMQP frame.
var heartbeat = []byte{0, 0, 0, 8, 2, 0, 0, 0}

// TestIdleConnections opens BUSBAR_OVERLOAD_CONNS (default 300; the
// campaign: 10,000) authenticated connections, each with a session, that
// then only send heartbeats; it measures what each costs in resident
// memory and the probe's latency among them, and checks that every one is
// still open at the end.
func TestIdleConnections(t *testing.T) {
	n := envInt(t, "BUSBAR_OVERLOAD_CONNS", 300)
	s := startOverload(t, t.TempDir())
	base := s.probe(50)
	baseRSS := s.rssMiB()

	conns := make([]*rawConn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := dialRaw(s.p.AMQPAddr(), "RootManageSharedAccessKey", s.key)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.nc.Close()
		}
	})
	openTime := time.Since(start)
	// Heartbeats keep every connection inside the broker's idle timeout.
	stop := make(chan struct{})
	beats := make(chan error, 1)
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				beats <- nil
				return
			case <-tick.C:
				for i, c := range conns {
					_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
					if _, err := c.nc.Write(heartbeat); err != nil {
						beats <- fmt.Errorf("heartbeat on connection %d: %w", i, err)
						return
					}
				}
			}
		}
	}()
	rssN := s.rssMiB()
	loaded := s.probe(100)
	close(stop)
	if err := <-beats; err != nil {
		t.Fatal(err)
	}
	// Every connection is still open: an empty frame goes through and
	// nothing but heartbeats comes back.
	for i, c := range conns {
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.br.Peek(1); err == nil {
			b, _ := c.read()
			if b != nil {
				t.Fatalf("connection %d received %T while idle", i, b)
			}
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	perConn := float64(rssN-baseRSS) * (1 << 20) / float64(n)
	t.Logf("opened %d connections in %v; resident %d MiB before, %d MiB with them (%.1f KiB each); probe alone %v, among them %v",
		n, openTime.Round(time.Millisecond), baseRSS, rssN, perConn/1024, base, loaded)
	t.Logf("RESULT idle_conns=%d open_s=%.1f rss_base_mib=%d rss_mib=%d kib_per_conn=%.1f probe_base_p99_ms=%.2f probe_p50_ms=%.2f probe_p99_ms=%.2f",
		n, openTime.Seconds(), baseRSS, rssN, perConn/1024, ms(base.p99), ms(loaded.p50), ms(loaded.p99))
	if perConn > maxIdleConnBytes {
		t.Errorf("%.1f KiB per idle connection, the bound is %d KiB", perConn/1024, maxIdleConnBytes>>10)
	}
}

// maxIdleConnBytes bounds the resident memory of an idle connection with
// one session (docs/reliability.md, section 4).
const maxIdleConnBytes = 64 << 10

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// TestStuckConsumer attaches a receiver with a large credit to a queue
// with a backlog and then never reads its socket. The broker's writer for
// that connection fills and blocks; memory must stay bounded, another
// SDK consumer of the same queue must keep receiving, and the probe keep
// its latency. With BUSBAR_OVERLOAD_STUCK_DROP=1 the test also waits for
// the write timeout (30 s) to drop the stuck connection and checks that
// its messages become available again.
func TestStuckConsumer(t *testing.T) {
	msgs := envInt(t, "BUSBAR_OVERLOAD_STUCK_MSGS", 2000)
	const size = 64 << 10
	data := filepath.Join(t.TempDir(), "data")
	withBroker(t, filepath.Join(data, "store"), func(b *broker.Broker) {
		if err := b.CreateQueue(context.Background(), "shared", broker.QueueProperties{MaxSizeInMegabytes: 80 << 10}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, b, msgs, func(i int) (string, *broker.Message) {
			id := "m" + strconv.Itoa(i)
			raw, err := message.AppendProperties(nil, &message.Properties{MessageID: id})
			if err != nil {
				panic(err)
			}
			return "shared", &broker.Message{MessageID: id, Body: message.AppendData(raw, make([]byte, size))}
		})
	})
	s := startOverload(t, data)
	c := busbartest.NewClient(t, s.p.ConnectionString())
	ctx := context.Background()
	base := s.probe(50)
	baseRSS := s.rssMiB()

	stuck, err := dialRaw(s.p.AMQPAddr(), "RootManageSharedAccessKey", s.key)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.nc.Close()
	if err := stuck.write(frames.TypeAMQP, 0, &frames.Attach{Name: "stuck", Handle: 0, Role: frames.RoleReceiver,
		SndSettleMode: frames.SenderSettleUnsettled, RcvSettleMode: frames.ReceiverSettleSecond,
		Source: &frames.Source{Address: "shared"}, Target: &frames.Target{Address: "stuck"}}); err != nil {
		t.Fatal(err)
	}
	credit := uint32(msgs / 2)
	if err := stuck.write(frames.TypeAMQP, 0, &frames.Flow{NextIncomingID: ptr(uint32(0)), IncomingWindow: 1 << 20, NextOutgoingID: 0,
		OutgoingWindow: 1 << 20, Handle: ptr(uint32(0)), DeliveryCount: ptr(uint32(0)), LinkCredit: ptr(credit)}); err != nil {
		t.Fatal(err)
	}
	if b, err := stuck.read(); err != nil {
		t.Fatal(err)
	} else if a, ok := b.(*frames.Attach); !ok || a.Source == nil {
		t.Fatalf("stuck consumer's attach answered with %#v", b)
	}
	// The stuck client reads nothing more. Another consumer of the same
	// queue takes everything the stuck one has not locked: at least
	// msgs-credit messages, and fewer than msgs once the stuck one holds
	// some.
	rcv, err := c.NewReceiverForQueue("shared", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ms, err := rcv.ReceiveMessages(rctx, 100, nil)
		cancel()
		if err != nil && rctx.Err() == nil {
			t.Fatalf("the other consumer after %d: %v", got, err)
		}
		for _, m := range ms {
			if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		got += len(ms)
		if len(ms) == 0 && got >= msgs-int(credit) {
			break
		}
	}
	if got >= msgs {
		t.Fatalf("the other consumer took all %d messages: the stuck consumer got none", got)
	}
	loaded := s.probe(100)
	rssStuck := s.rssMiB()
	t.Logf("stuck consumer with %d credit over %d messages of %d KiB: resident %d MiB before, %d MiB stuck; probe %v before, %v with it",
		credit, msgs, size>>10, baseRSS, rssStuck, base, loaded)
	t.Logf("the other consumer took %d of %d while the stuck one held the rest", got, msgs)
	t.Logf("RESULT stuck_credit=%d msg_kib=%d rss_base_mib=%d rss_stuck_mib=%d probe_base_p99_ms=%.2f probe_p50_ms=%.2f probe_p99_ms=%.2f",
		credit, size>>10, baseRSS, rssStuck, ms(base.p99), ms(loaded.p50), ms(loaded.p99))
	// What the stuck consumer holds was read from the store for it and
	// waits in the broker or the socket: its link's look-ahead, its
	// connection's writer and the kernel's socket buffers, not its credit.
	if held := msgs - got; held*size > maxStuckHeldBytes {
		t.Errorf("the stuck consumer holds %d messages (%d MiB) of its %d credit; the bound is %d MiB",
			held, held*size>>20, credit, maxStuckHeldBytes>>20)
	}
	if envInt(t, "BUSBAR_OVERLOAD_STUCK_DROP", 0) == 0 {
		return
	}
	start := time.Now()
	poll.UntilNil(t, 3*time.Minute, "the stuck consumer dropped and its messages available again", func() error {
		rp, err := s.admin.GetQueueRuntimeProperties(ctx, "shared", nil)
		if err != nil {
			return err
		}
		if int(rp.ActiveMessageCount) != msgs-got {
			return fmt.Errorf("%d of %d left", rp.ActiveMessageCount, msgs-got)
		}
		// They are unlocked: the other consumer receives one.
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		ms, err := rcv.ReceiveMessages(rctx, 1, nil)
		if err != nil || len(ms) != 1 {
			return fmt.Errorf("still locked (%v)", err)
		}
		return rcv.AbandonMessage(ctx, ms[0], nil)
	})
	t.Logf("RESULT stuck_dropped_after_s=%.1f", time.Since(start).Seconds())
}

// maxStuckHeldBytes bounds what a consumer that stops reading holds
// (docs/reliability.md, section 4): its link's look-ahead (1 MiB of
// messages), its connection's writer (2 × 256 KiB) and the loopback
// socket buffers (several MiB). The default run's stuck credit is
// 62.5 MiB of messages.
const maxStuckHeldBytes = 16 << 20

func ptr[T any](v T) *T { return &v }

// TestFastProducer sends with BUSBAR_OVERLOAD_PRODUCERS (default 8) SDK
// senders as fast as they can for BUSBAR_OVERLOAD_PRODUCE_S seconds
// (default 5) into a queue whose one consumer takes a message every 10 ms.
// The broker slows the producers through link credit and the commit
// pipeline; its memory must stay bounded while the backlog grows, and the
// probe keep working.
func TestFastProducer(t *testing.T) {
	producers := envInt(t, "BUSBAR_OVERLOAD_PRODUCERS", 8)
	secs := envInt(t, "BUSBAR_OVERLOAD_PRODUCE_S", 5)
	s := startOverload(t, t.TempDir())
	s.queue("flood", &sbadmin.QueueProperties{MaxSizeInMegabytes: ptr(int32(80 << 10))})
	base := s.probe(50)
	baseRSS := s.rssMiB()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	var sent, taken atomic.Int64
	var wg sync.WaitGroup
	body := make([]byte, 1024)
	for range producers {
		c := busbartest.NewClient(t, s.p.ConnectionString())
		snd, err := c.NewSender("flood", nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				batch, err := snd.NewMessageBatch(ctx, nil)
				if err != nil {
					return
				}
				for range 50 {
					_ = batch.AddMessage(&azservicebus.Message{Body: body}, nil)
				}
				if err := snd.SendMessageBatch(ctx, batch, nil); err == nil {
					sent.Add(50)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := busbartest.NewClient(t, s.p.ConnectionString())
		rcv, err := c.NewReceiverForQueue("flood", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			return
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			if ms, err := rcv.ReceiveMessages(ctx, 1, nil); err == nil {
				taken.Add(int64(len(ms)))
			}
		}
	}()
	var samples []int64
	var loaded latency
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		loaded = s.probe(100)
	}()
	for ctx.Err() == nil {
		samples = append(samples, s.rssMiB())
		time.Sleep(500 * time.Millisecond) // sampling period of the memory curve
	}
	wg.Wait()
	<-probed
	peak := s.peakMiB()
	rate := float64(sent.Load()) / float64(secs)
	if len(samples) > 20 { // the curve, 20 points
		curve := make([]int64, 0, 20)
		for i := range 20 {
			curve = append(curve, samples[i*len(samples)/20])
		}
		samples = curve
	}
	t.Logf("%d producers sent %d messages in %d s (%.0f msg/s) while one consumer took %d; resident %d MiB before, samples %v MiB, peak %d MiB; probe %v before, %v during",
		producers, sent.Load(), secs, rate, taken.Load(), baseRSS, samples, peak, base, loaded)
	t.Logf("RESULT producers=%d sent=%d msg_s=%.0f rss_base_mib=%d rss_peak_mib=%d probe_base_p99_ms=%.2f probe_p50_ms=%.2f probe_p99_ms=%.2f",
		producers, sent.Load(), rate, baseRSS, peak, ms(base.p99), ms(loaded.p50), ms(loaded.p99))
	if sent.Load() == 0 {
		t.Fatal("nothing was sent")
	}
	if peak > maxFloodRSSMiB {
		t.Errorf("peak resident memory %d MiB under a flood, the bound is %d MiB", peak, maxFloodRSSMiB)
	}
}

// maxFloodRSSMiB bounds the broker's memory under a flood of sends into
// one queue (docs/reliability.md, section 4): the page window (50,000
// index entries), the body cache and the store's memtables.
const maxFloodRSSMiB = 512

// TestManySessions puts one message in each of BUSBAR_OVERLOAD_SESSIONS
// (default 20,000; the campaign: 1,000,000) sessions of a queue, through
// the broker library, then starts the broker on it and measures start
// time, memory per session, and accepting a named and the next session.
func TestManySessions(t *testing.T) {
	n := envInt(t, "BUSBAR_OVERLOAD_SESSIONS", 20000)
	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	fillSessions(t, filepath.Join(data, "store"), n)
	fillTime := time.Since(start)
	start = time.Now()
	s := startOverload(t, data)
	startTime := time.Since(start)
	rssN := s.rssMiB()
	c := busbartest.NewClient(t, s.p.ConnectionString())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, id := range []string{"s0", fmt.Sprintf("s%d", n-1)} {
		sr, err := c.AcceptSessionForQueue(ctx, sessionQueue, id, nil)
		if err != nil {
			t.Fatalf("accept session %s: %v", id, err)
		}
		ms, err := sr.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(ms) != 1 || ms[0].SessionID == nil || *ms[0].SessionID != id {
			t.Fatalf("session %s: %v %v", id, ms, err)
		}
		_ = sr.Close(ctx)
	}
	t0 := time.Now()
	sr, err := c.AcceptNextSessionForQueue(ctx, sessionQueue, nil)
	if err != nil {
		t.Fatalf("accept next session: %v", err)
	}
	nextTime := time.Since(t0)
	_ = sr.Close(ctx)
	loaded := s.probe(100)
	per := float64(rssN) * (1 << 20) / float64(n)
	t.Logf("%d sessions filled in %v; serving after %v with %d MiB resident (%.0f B per session); accept-next %v; probe %v",
		n, fillTime.Round(time.Millisecond), startTime.Round(time.Millisecond), rssN, per, nextTime, loaded)
	t.Logf("RESULT sessions=%d start_s=%.2f rss_mib=%d bytes_per_session=%.0f accept_next_ms=%.2f probe_p50_ms=%.2f probe_p99_ms=%.2f",
		n, startTime.Seconds(), rssN, per, ms(nextTime), ms(loaded.p50), ms(loaded.p99))
}

const sessionQueue = "sessions"

// TestBacklogManyEntities fills BUSBAR_OVERLOAD_ENTITIES queues (default
// 20; the campaign: 200) with BUSBAR_OVERLOAD_ENTITY_MB MB each (default
// 2; the campaign: 100) of 1 KiB messages through the broker library,
// starts the broker on them, and measures start time, memory once every
// backlog is counted, and the probe's latency; then it receives from every
// queue.
func TestBacklogManyEntities(t *testing.T) {
	entities := envInt(t, "BUSBAR_OVERLOAD_ENTITIES", 20)
	mb := envInt(t, "BUSBAR_OVERLOAD_ENTITY_MB", 2)
	window := envInt(t, "BUSBAR_OVERLOAD_PAGE_WINDOW", 50000)
	size := envInt(t, "BUSBAR_OVERLOAD_MSG_KB", 1) << 10
	perEntity := mb << 20 / size
	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	fillEntities(t, filepath.Join(data, "store"), entities, perEntity, size)
	fillTime := time.Since(start)
	start = time.Now()
	s := startOverload(t, data, "--page-window", fmt.Sprint(window))
	startTime := time.Since(start)
	ctx := context.Background()
	poll.UntilNil(t, 60*time.Minute, "every backlog counted", func() error {
		for i := range entities {
			rp, err := s.admin.GetQueueRuntimeProperties(ctx, entityName(i), nil)
			if err != nil {
				return err
			}
			if int(rp.ActiveMessageCount) != perEntity {
				return fmt.Errorf("%s: %d of %d counted", entityName(i), rp.ActiveMessageCount, perEntity)
			}
		}
		return nil
	})
	countTime := time.Since(start)
	rssN := s.rssMiB()
	loaded := s.probe(100)
	c := busbartest.NewClient(t, s.p.ConnectionString())
	for i := range entities {
		r, err := c.NewReceiverForQueue(entityName(i), &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		ms, err := r.ReceiveMessages(rctx, 10, nil)
		cancel()
		if err != nil || len(ms) == 0 || len(ms[0].Body) != size {
			t.Fatalf("%s: %d messages, %v", entityName(i), len(ms), err)
		}
		_ = r.Close(ctx)
	}
	peak := s.peakMiB()
	t.Logf("%d queues × %d MiB (%d messages of %d KiB each) filled in %v; serving after %v, counted after %v; resident %d MiB, peak %d MiB; probe %v",
		entities, mb, perEntity, size>>10, fillTime.Round(time.Second), startTime.Round(time.Millisecond), countTime.Round(time.Millisecond), rssN, peak, loaded)
	t.Logf("RESULT entities=%d entity_mib=%d msg_kib=%d page_window=%d start_s=%.2f count_s=%.1f rss_mib=%d peak_mib=%d probe_p50_ms=%.2f probe_p99_ms=%.2f",
		entities, mb, size>>10, window, startTime.Seconds(), countTime.Seconds(), rssN, peak, ms(loaded.p50), ms(loaded.p99))
	if bound := backlogBoundMiB(entities, min(perEntity, window)); peak > bound {
		t.Errorf("peak resident memory %d MiB, the documented bound is %d MiB", peak, bound)
	}
}

// backlogBoundMiB is the documented memory bound of a broker whose
// entities each index up to indexed messages (docs/reliability.md,
// section 4): 512 MiB for the process, the store and the body cache, plus
// 400 bytes per indexed message (its index entry, measured at about 125
// bytes, and the allocator's and maps' overhead around it).
func backlogBoundMiB(entities, indexed int) int64 {
	return 512 + int64(entities)*int64(indexed)*400>>20
}

func entityName(i int) string { return fmt.Sprintf("backlog-%03d", i) }

// fillSessions puts message i in session "s<i>" of a new session queue.
func fillSessions(t *testing.T, dir string, n int) {
	withBroker(t, dir, func(b *broker.Broker) {
		if err := b.CreateQueue(context.Background(), sessionQueue, broker.QueueProperties{RequiresSession: true, MaxSizeInMegabytes: 80 << 10}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, b, n, func(i int) (string, *broker.Message) {
			id := "s" + strconv.Itoa(i)
			raw, err := message.AppendProperties(nil, &message.Properties{MessageID: id, GroupID: id})
			if err != nil {
				panic(err)
			}
			return sessionQueue, &broker.Message{MessageID: id, SessionID: id, Body: message.AppendData(raw, []byte(id))}
		})
	})
}

// fillEntities fills entities queues with per messages of size bytes
// each; a batch of sendAll spans two queues only when per is not a
// multiple of 512, and then the batch goes to the first one's queue.
func fillEntities(t *testing.T, dir string, entities, per, size int) {
	withBroker(t, dir, func(b *broker.Broker) {
		for i := range entities {
			if err := b.CreateQueue(context.Background(), entityName(i), broker.QueueProperties{MaxSizeInMegabytes: 80 << 10}); err != nil {
				t.Fatal(err)
			}
		}
		sendAll(t, b, entities*per, func(i int) (string, *broker.Message) {
			id := "m" + strconv.Itoa(i%per)
			raw, err := message.AppendProperties(nil, &message.Properties{MessageID: id})
			if err != nil {
				panic(err)
			}
			return entityName(i / per), &broker.Message{MessageID: id, Body: message.AppendData(raw, make([]byte, size))}
		})
	})
}
