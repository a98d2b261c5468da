package benchcore

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Workload is what one run does.
type Workload struct {
	// Name labels the run in reports, e.g. "4p4c".
	Name string `json:"name"`
	// Producers and Consumers are the number of each.
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Inflight is the number of concurrent sends per producer (default 1).
	Inflight int `json:"inflight"`
	// Batch is the number of messages per send call (default 1).
	Batch int `json:"batch"`
	// Size is the body size in bytes (at least HeaderSize).
	Size int `json:"size"`
	// Count is the number of messages of an unkeyed run; 0 means as many as
	// Duration allows.
	Count int64 `json:"count"`
	// Duration stops sending after this long (0: no limit, Count governs).
	Duration time.Duration `json:"duration_ns"`
	// Rate is the offered load in messages per second across all producers,
	// on a fixed schedule; 0 is open throttle.
	Rate float64 `json:"rate"`
	// Keys and PerKey, when Keys > 0, make a keyed run: Keys ordering keys
	// (sessions on Busbar) with PerKey messages each, whose order per key
	// is verified. Count is then Keys×PerKey.
	Keys   int `json:"keys"`
	PerKey int `json:"per_key"`
	// DrainTimeout bounds the wait for the last deliveries after sending
	// ends (default 30 s).
	DrainTimeout time.Duration `json:"drain_timeout_ns"`
}

// Keyed reports whether w is a keyed (ordered) workload.
func (w Workload) Keyed() bool { return w.Keys > 0 }

// withDefaults fills in defaults and checks w.
func (w Workload) withDefaults() (Workload, error) {
	if w.Producers <= 0 || w.Consumers <= 0 {
		return w, errors.New("benchcore: need at least one producer and one consumer")
	}
	if w.Inflight <= 0 {
		w.Inflight = 1
	}
	if w.Batch <= 0 {
		w.Batch = 1
	}
	if w.Size < HeaderSize {
		w.Size = HeaderSize
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = 30 * time.Second
	}
	if w.Rate < 0 {
		return w, errors.New("benchcore: negative rate")
	}
	if w.Keyed() {
		if w.PerKey <= 0 {
			return w, errors.New("benchcore: a keyed workload needs messages per key")
		}
		w.Count = int64(w.Keys) * int64(w.PerKey)
	}
	if w.Count <= 0 && w.Duration <= 0 {
		return w, errors.New("benchcore: give a message count or a duration")
	}
	if w.Count > maxID {
		return w, fmt.Errorf("benchcore: at most %d messages per run", int64(maxID))
	}
	return w, nil
}

// Options are the engine's knobs that are not part of the workload.
type Options struct {
	// Progress receives a line per ProgressEvery (default 1 s) while the
	// run lasts; nil disables it.
	Progress      io.Writer
	ProgressEvery time.Duration
	// BrokerPIDs are processes whose CPU time (with their descendants) is
	// charged to the broker; empty when the broker runs elsewhere.
	BrokerPIDs []int
	// WaitIdle are processes that must be idle before the run's
	// measurement starts, after its set-up (WaitIdle, at most IdleLimit);
	// then the system's dirty pages are written back (sync(2)), so that
	// what one broker wrote without fsync (PostgreSQL's table and index
	// pages: some 290 MB after a W4 run, left for the kernel to write 30 s
	// later) is not written back during the next broker's run, in front of
	// its fsyncs. Empty: neither.
	WaitIdle []int
	// LatencyLog, when set, receives a line per first delivery: when it
	// was received (Unix time in nanoseconds) and its latency in
	// nanoseconds, in the order the consumers recorded them. A tail is a
	// few messages in a hundred; the log shows whether they come alone or
	// in clusters, and when, to set beside the broker's own timings.
	LatencyLog io.Writer
}

// IdleLimit is how long Run waits for Options.WaitIdle; a run that finds
// them still busy then goes ahead, and says so in its progress.
const IdleLimit = 15 * time.Second

// Run executes w against d and reports what happened. A run whose
// verification fails still returns its Result (with Verdict.OK false) and
// a nil error; an error means the run could not be carried out.
func Run(ctx context.Context, w Workload, d Driver, o Options) (*Result, error) {
	w, err := w.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &engine{w: w, d: d, o: o, run: newRunID()}
	return e.run1(ctx)
}

func newRunID() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// debugDeliveries logs every duplicate or foreign delivery to stderr
// (BENCH_DEBUG=1).
var debugDeliveries = os.Getenv("BENCH_DEBUG") != ""

type engine struct {
	w   Workload
	d   Driver
	o   Options
	run uint32
	ver *Verifier

	epoch    time.Time
	ticket   atomic.Int64 // next message ticket (unkeyed ids, schedule slots)
	lastRecv atomic.Int64 // offset from epoch of the latest first delivery
	sendEnd  atomic.Int64 // offset from epoch when sending stopped
}

// since returns the time elapsed since the run's epoch (monotonic).
func (e *engine) since() time.Duration { return time.Since(e.epoch) }

func (e *engine) run1(ctx context.Context) (*Result, error) {
	w := e.w
	if err := e.d.Prepare(ctx, w); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	e.ver = NewVerifier(e.run, w.Keys)

	consumers := make([]Consumer, w.Consumers)
	for i := range consumers {
		c, err := e.d.NewConsumer(ctx, i)
		if err != nil {
			closeAll(consumers)
			return nil, fmt.Errorf("consumer %d: %w", i, err)
		}
		consumers[i] = c
	}
	defer closeAll(consumers)
	producers := make([]Producer, w.Producers)
	for i := range producers {
		p, err := e.d.NewProducer(ctx, i)
		if err != nil {
			closeAll(producers)
			return nil, fmt.Errorf("producer %d: %w", i, err)
		}
		producers[i] = p
	}
	defer closeAll(producers)

	// Idle first, once the run's own set-up (a queue created or purged,
	// connections) is done: only the run is charged.
	if len(e.o.WaitIdle) > 0 {
		if !WaitIdle(ctx, e.o.WaitIdle, IdleLimit) && e.o.Progress != nil {
			fmt.Fprintf(e.o.Progress, "processes %v still busy after %v; running anyway\n", e.o.WaitIdle, IdleLimit)
		}
		writeBack()
	}
	cpu := StartCPU(e.o.BrokerPIDs)
	e.epoch = time.Now()
	var latLog *latencyLog
	if e.o.LatencyLog != nil {
		latLog = newLatencyLog(e.o.LatencyLog, e.epoch)
	}

	// Consumers.
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	hists := make([]Histogram, w.Consumers)
	consumerErrs := make(chan error, w.Consumers)
	var cwg sync.WaitGroup
	for i, c := range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var mu sync.Mutex
			h := &hists[i]
			err := c.Run(cctx, func(body []byte) Delivery {
				now := e.since()
				hdr, err := DecodeHeader(body)
				if err != nil {
					e.ver.foreign.Add(1)
					return Delivery{Outcome: Foreign}
				}
				out := e.ver.Deliver(hdr)
				if debugDeliveries && out != First {
					fmt.Fprintf(os.Stderr, "consumer %d: %v delivery of id %d key %d seq %d at %v\n", i, out, hdr.ID, hdr.Key, hdr.Seq, now)
				}
				if out == First {
					mu.Lock()
					h.Record(now - hdr.Intended)
					mu.Unlock()
					latLog.record(now, now-hdr.Intended)
					storeMax(&e.lastRecv, int64(now))
				}
				return Delivery{Outcome: out, Keyed: hdr.Keyed, Key: hdr.Key, Last: hdr.Last}
			})
			if err != nil && cctx.Err() == nil {
				consumerErrs <- fmt.Errorf("consumer %d: %w", i, err)
			}
		}()
	}

	// Progress.
	progressDone := make(chan struct{})
	var pwg sync.WaitGroup
	if e.o.Progress != nil {
		pwg.Add(1)
		go func() { defer pwg.Done(); e.progress(progressDone) }()
	}

	// Producers.
	sendErr := e.produce(ctx, producers, consumerErrs)
	e.sendEnd.Store(int64(e.since()))

	// Drain: wait until everything acknowledged has been delivered.
	var runErr error
	if sendErr != nil {
		runErr = sendErr
	} else {
		runErr = e.drain(ctx, consumerErrs)
	}
	stopConsumers()
	waitTimeout(&cwg, 10*time.Second)
	close(progressDone)
	pwg.Wait()
	usage := cpu.Usage()
	logErr := latLog.flush() // a failed run's log is the one most worth reading
	if runErr != nil {
		return nil, runErr
	}
	if logErr != nil {
		return nil, fmt.Errorf("latency log: %w", logErr)
	}

	var all Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	return e.result(&all, usage), nil
}

// produce runs every sender until the workload is sent or a send fails.
func (e *engine) produce(ctx context.Context, producers []Producer, consumerErrs <-chan error) error {
	w := e.w
	senders := w.Producers * w.Inflight
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, senders+1)
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.sender(sctx, g, senders, producers[g%w.Producers]); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-consumerErrs:
		cancel()
		<-done
		return err
	}
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// sender is one sending goroutine: number g of n.
func (e *engine) sender(ctx context.Context, g, n int, p Producer) error {
	w := e.w
	next := e.unkeyedBatches()
	if w.Keyed() {
		next = e.keyedBatches(g, n)
	}
	filler := make([]byte, w.Size)
	for i := HeaderSize; i < len(filler); i++ {
		filler[i] = byte('a' + i%26)
	}
	batch := make([]Outgoing, 0, w.Batch)
	hdrs := make([]Header, 0, w.Batch)
	var key string // of the last keyed message: a batch is one key's
	lastKey := uint32(0)
	// A producer that copies bodies gets the same memory for every batch.
	var slab []byte
	if bc, ok := p.(BodyCopier); ok && bc.CopiesBodies() {
		slab = make([]byte, w.Batch*w.Size)
		for i := 0; i < w.Batch; i++ {
			copy(slab[i*w.Size+HeaderSize:(i+1)*w.Size], filler[HeaderSize:])
		}
	}
	for ctx.Err() == nil {
		if w.Duration > 0 && e.since() >= w.Duration {
			return nil
		}
		hdrs = next(hdrs[:0])
		if len(hdrs) == 0 {
			return nil
		}
		// Schedule: in fixed-rate mode every message has a slot; wait for the
		// batch's last slot. The latency of each message counts from its own slot.
		var slots int64
		if w.Rate > 0 {
			if w.Keyed() {
				slots = e.ticket.Add(int64(len(hdrs))) - int64(len(hdrs))
			} else {
				slots = int64(hdrs[0].ID)
			}
			due := slotTime(slots+int64(len(hdrs))-1, w.Rate)
			if wait := due - e.since(); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil
				}
			}
		}
		now := e.since()
		batch = batch[:0]
		for i := range hdrs {
			h := &hdrs[i]
			h.Run = e.run
			h.Intended = now
			if w.Rate > 0 {
				h.Intended = slotTime(slots+int64(i), w.Rate)
			}
			var body []byte
			if slab != nil {
				body = slab[i*w.Size : (i+1)*w.Size : (i+1)*w.Size]
			} else {
				body = make([]byte, w.Size)
				copy(body[HeaderSize:], filler[HeaderSize:])
			}
			EncodeHeader(body, *h)
			o := Outgoing{Body: body}
			if h.Keyed {
				if key == "" || h.Key != lastKey {
					key, lastKey = "k"+strconv.Itoa(int(h.Key)), h.Key
				}
				o.Key = key
				o.Partition = int(h.Key) % w.Consumers
			}
			batch = append(batch, o)
		}
		if err := p.Send(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("send: %w", err)
		}
		for i := range hdrs {
			e.ver.Sent(hdrs[i].ID)
		}
	}
	return nil
}

// slotTime is the intended send time of schedule slot i at rate msg/s.
func slotTime(i int64, rate float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// unkeyedBatches returns a generator of batches of consecutive ids drawn
// from the run's shared ticket counter.
func (e *engine) unkeyedBatches() func([]Header) []Header {
	limit := e.w.Count
	if limit <= 0 {
		limit = maxID + 1
	}
	b := int64(e.w.Batch)
	return func(out []Header) []Header {
		first := e.ticket.Add(b) - b
		if first >= limit {
			return out
		}
		for id := first; id < min(first+b, limit); id++ {
			out = append(out, Header{ID: uint64(id)})
		}
		return out
	}
}

// keyedBatches returns the generator of sender g of n: the keys k with
// k mod n = g, one after another, each key's PerKey messages in order in
// batches of at most Batch. Message (k, s) has id k×PerKey+s.
func (e *engine) keyedBatches(g, n int) func([]Header) []Header {
	key, seq := g, 0
	per := e.w.PerKey
	return func(out []Header) []Header {
		if key >= e.w.Keys {
			return out
		}
		for len(out) < e.w.Batch && seq < per {
			out = append(out, Header{ID: uint64(key*per + seq), Keyed: true,
				Key: uint32(key), Seq: uint32(seq), Last: seq == per-1})
			seq++
		}
		if seq == per {
			key, seq = key+n, 0
		}
		return out
	}
}

// drain waits until every acknowledged message has been delivered, the
// drain timeout passes, or a consumer fails.
func (e *engine) drain(ctx context.Context, consumerErrs <-chan error) error {
	deadline := time.NewTimer(e.w.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for e.ver.ReceivedCount() < e.ver.SentCount() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return nil // the verdict reports what is missing
		case err := <-consumerErrs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// progress prints a line per interval until done is closed.
func (e *engine) progress(done <-chan struct{}) {
	every := e.o.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var lastSent, lastRecv int64
	last := time.Duration(0)
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		now := e.since()
		s, r := e.ver.SentCount(), e.ver.ReceivedCount()
		dt := (now - last).Seconds()
		fmt.Fprintf(e.o.Progress, "%6.1fs  sent %s (%s/s)  received %s (%s/s)  in flight %s\n",
			now.Seconds(), group(s), group(int64(float64(s-lastSent)/dt)),
			group(r), group(int64(float64(r-lastRecv)/dt)), group(s-r))
		lastSent, lastRecv, last = s, r, now
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

func closeAll[T interface{ Close() error }](xs []T) {
	for _, x := range xs {
		if any(x) != nil {
			_ = x.Close()
		}
	}
}

// latencyLog writes Options.LatencyLog: one line per first delivery, from
// every consumer, through one buffer.
type latencyLog struct {
	mu    sync.Mutex
	w     *bufio.Writer
	epoch int64 // the run's epoch, Unix nanoseconds
	line  []byte
	err   error
}

func newLatencyLog(w io.Writer, epoch time.Time) *latencyLog {
	return &latencyLog{w: bufio.NewWriterSize(w, 64<<10), epoch: epoch.UnixNano()}
}

// record logs a delivery received at the run's offset at, with latency lat.
// A nil log records nothing.
func (l *latencyLog) record(at, lat time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.line = strconv.AppendInt(l.line[:0], l.epoch+int64(at), 10)
	l.line = append(l.line, ' ')
	l.line = strconv.AppendInt(l.line, int64(lat), 10)
	l.line = append(l.line, '\n')
	_, l.err = l.w.Write(l.line)
}

// flush writes what is buffered and returns the first write error.
func (l *latencyLog) flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return l.err
}
