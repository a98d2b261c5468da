package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func dlqCommand(env *cliEnv, args []string) error {
	return group{name: "dlq", summary: "Inspect, resubmit and purge dead-lettered messages.", subs: []subcommand{
		{"list", "list dead-lettered messages with their reasons", dlqList},
		{"show", "show one dead-lettered message in full", dlqShow},
		{"resubmit", "send dead-lettered messages back to their entity", dlqResubmit},
		{"purge", "delete dead-lettered messages", dlqPurge},
	}}.dispatch(env, args)
}

func dlqList(env *cliEnv, args []string) error {
	c := command{path: "dlq list", args: "QUEUE|TOPIC [flags]",
		summary: "List dead-lettered messages (without locking them) with their dead-letter reason and description.",
		examples: `busbar dlq list orders
busbar dlq list events --subscription audit --count 500
busbar dlq list orders --json | jq -r '.[].deadLetterReason' | sort | uniq -c`}
	var (
		sub   string
		from  int64
		count int
	)
	return dataCommand(env, c, args, 1, 1, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
		fs.Int64Var(&from, "from-seq", 0, "start at this sequence number")
		fs.IntVar(&count, "count", 100, "list at most this many messages")
	}, func(s *dataSession, pos []string) error {
		msgs, err := s.peek(pos[0], sub, from, count, true)
		if err != nil {
			return err
		}
		return s.out.emit(messageViews(msgs), func(w io.Writer) {
			messageTable(w, msgs, colSeq, colEnqueued, colID, colReason, colDesc, colSubject, colBody)
		})
	})
}

func dlqShow(env *cliEnv, args []string) error {
	c := command{path: "dlq show", args: "QUEUE|TOPIC SEQ [flags]",
		summary: "Show one dead-lettered message, by sequence number, with all its properties and its whole body.",
		examples: `busbar dlq show orders 1042
busbar dlq show events 7 --subscription audit --json`}
	var sub string
	return dataCommand(env, c, args, 2, 2, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], sub)
		if err != nil {
			return err
		}
		seq, err := strconv.ParseInt(pos[1], 10, 64)
		if err != nil || seq < 1 {
			return usageErrorf("dlq show: %q is not a sequence number", pos[1])
		}
		r, err := s.receiver(e, azservicebus.ReceiveModePeekLock, true)
		if err != nil {
			return err
		}
		defer func() { _ = r.Close(context.Background()) }()
		msgs, err := r.PeekMessages(s.ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq})
		if err != nil {
			return fmt.Errorf("peeking the dead-letter queue of %s: %w", e, err)
		}
		if len(msgs) == 0 || msgs[0].SequenceNumber == nil || *msgs[0].SequenceNumber != seq {
			return notFoundf("no dead-lettered message %d in %s", seq, e)
		}
		return s.out.emit(messageView(msgs[0]), func(w io.Writer) { messageDetail(w, msgs[0]) })
	})
}

// dlqRun are the flags shared by resubmit and purge.
type dlqRun struct {
	sub      string
	max      int
	batch    int
	wait     time.Duration
	progress time.Duration
}

func (f *dlqRun) register(fs *flagSet) {
	fs.StringVar(&f.sub, "subscription", "", "the topic's subscription")
	fs.IntVar(&f.max, "max", 0, "handle at most this many messages (0: all those present at the start)")
	fs.IntVar(&f.batch, "batch", 500, "messages per receive")
	fs.DurationVar(&f.wait, "wait", 3*time.Second, "stop when no message arrives for this long")
	fs.DurationVar(&f.progress, "progress-interval", time.Second, "how often to print progress on stderr (0: never)")
}

// bound returns how many messages the run handles, and whether there is
// anything to do: the dead-letter count at the start (read through the
// management API), capped by --max. When the count cannot be read, the run
// handles --max messages, or goes on until the queue is empty.
func (f *dlqRun) bound(s *dataSession, e entityRef) (limit int, run bool, err error) {
	n, err := deadLetterCount(s, e)
	var ce *cliError
	if errors.As(err, &ce) {
		return 0, false, err
	}
	if err != nil {
		fmt.Fprintf(s.env.stderr, "warning: cannot read the dead-letter count of %s (%v); running until the dead-letter queue is empty\n", e, err)
		return f.max, true, nil
	}
	if f.max > 0 && f.max < n {
		n = f.max
	}
	return n, n > 0, nil
}

// deadLetterCount reads the entity's dead-letter message count.
func deadLetterCount(s *dataSession, e entityRef) (int, error) {
	ac, err := s.ep.adminClient()
	if err != nil {
		return 0, err
	}
	if e.sub != "" {
		rt, err := ac.GetSubscriptionRuntimeProperties(s.ctx, e.name, e.sub, nil)
		if err != nil {
			return 0, err
		}
		if rt == nil {
			return 0, notFoundf("subscription %s not found", e)
		}
		return int(rt.DeadLetterMessageCount), nil
	}
	rt, err := ac.GetQueueRuntimeProperties(s.ctx, e.name, nil)
	if err != nil {
		return 0, err
	}
	if rt == nil {
		return 0, notFoundf("queue %q not found", e.name)
	}
	return int(rt.DeadLetterMessageCount), nil
}

// progressLine prints "verb N of M" on stderr at most once per interval;
// on a terminal it rewrites one line, elsewhere it prints one line each.
type progressLine struct {
	w        io.Writer
	verb     string
	total    int // 0 when unknown
	interval time.Duration
	last     time.Time
	tty      bool
	printed  bool
}

func newProgress(w io.Writer, verb string, total int, interval time.Duration) *progressLine {
	p := &progressLine{w: w, verb: verb, total: total, interval: interval, last: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// update prints the counts if the interval has passed.
func (p *progressLine) update(done, skipped int) {
	if p.interval <= 0 || time.Since(p.last) < p.interval {
		return
	}
	p.last = time.Now()
	p.print(done, skipped)
}

func (p *progressLine) print(done, skipped int) {
	msg := fmt.Sprintf("%s %s", p.verb, groupDigits(done))
	if p.total > 0 {
		msg += " of " + groupDigits(p.total)
	}
	if skipped > 0 {
		msg += fmt.Sprintf(" (%s left in place)", groupDigits(skipped))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", msg)
	} else {
		fmt.Fprintln(p.w, msg)
	}
	p.printed = true
}

// finish ends a terminal progress line.
func (p *progressLine) finish() {
	if p.tty && p.printed {
		fmt.Fprintln(p.w)
	}
}

// groupDigits renders 100000 as "100,000".
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func dlqResubmit(env *cliEnv, args []string) error {
	c := command{path: "dlq resubmit", args: "QUEUE|TOPIC [flags]",
		summary: "Send dead-lettered messages back to their queue (or, for a subscription, to its topic, or to --to), " +
			"then remove them from the dead-letter queue. --reason and --subject select which; the others stay. " +
			"Handles the messages present when it starts and prints progress on stderr. " +
			"The copy keeps body, properties, message id and session id, without the dead-letter reason and description.",
		examples: `busbar dlq resubmit orders
busbar dlq resubmit orders --reason MaxDeliveryCountExceeded
busbar dlq resubmit events --subscription audit --subject invoice --to audit-retry
busbar dlq resubmit orders --max 1000`}
	var (
		f               dlqRun
		reason, subject string
		to              string
	)
	return dataCommand(env, c, args, 1, 1, 0, func(fs *flagSet) {
		f.register(fs)
		fs.StringVar(&reason, "reason", "", "only messages with this dead-letter reason")
		fs.StringVar(&subject, "subject", "", "only messages with this subject")
		fs.StringVar(&to, "to", "", "send to this queue or topic instead of the source")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], f.sub)
		if err != nil {
			return err
		}
		if f.batch < 1 || f.batch > 5000 {
			return usageErrorf("--batch must be between 1 and 5000")
		}
		target := firstNonEmpty(to, e.name)
		keep := func(m *azservicebus.ReceivedMessage) bool {
			return (!s.set["reason"] || (m.DeadLetterReason != nil && *m.DeadLetterReason == reason)) &&
				(!s.set["subject"] || (m.Subject != nil && *m.Subject == subject))
		}
		limit, run, err := f.bound(s, e)
		if err != nil {
			return err
		}
		done, skipped := 0, 0
		if run {
			if done, skipped, err = s.resubmitRun(e, target, keep, limit, f); err != nil {
				return err
			}
		}
		return s.out.emit(map[string]any{"entity": e.String(), "to": target, "resubmitted": done, "leftInPlace": skipped}, func(w io.Writer) {
			fmt.Fprintf(w, "resubmitted %d message(s) from the dead-letter queue of %s to %s", done, e, target)
			if skipped > 0 {
				fmt.Fprintf(w, "; %d did not match and stay dead-lettered", skipped)
			}
			fmt.Fprintln(w)
		})
	})
}

// resubmitRun opens the dead-letter receiver and the sender and runs
// resubmit with a progress line.
func (s *dataSession) resubmitRun(e entityRef, target string, keep func(*azservicebus.ReceivedMessage) bool, limit int, f dlqRun) (int, int, error) {
	r, err := s.receiver(e, azservicebus.ReceiveModePeekLock, true)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = r.Close(context.Background()) }()
	sender, err := s.client.NewSender(target, nil)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = sender.Close(context.Background()) }()
	prog := newProgress(s.env.stderr, "resubmitted", limit, f.progress)
	done, skipped, err := resubmit(s.ctx, r, sender, keep, limit, f.batch, f.wait, prog)
	prog.finish()
	if err != nil {
		return done, skipped, fmt.Errorf("resubmitting from %s after %d message(s): %w", e, done, err)
	}
	return done, skipped, nil
}

// resubmit moves matching dead-lettered messages to sender: it sends the
// copies of a batch, then completes their originals (so a failure between
// the two duplicates a message rather than losing it). Messages that do not
// match stay locked until the end, so the receiver moves past them, and are
// then abandoned back into the dead-letter queue. It stops after limit
// distinct messages (0: no limit), when none arrives within wait, or when a
// receive brings only messages already seen.
func resubmit(ctx context.Context, r *azservicebus.Receiver, sender *azservicebus.Sender, keep func(*azservicebus.ReceivedMessage) bool,
	limit, batch int, wait time.Duration, prog *progressLine) (done, skipped int, err error) {
	seen := map[int64]bool{}
	var held []*azservicebus.ReceivedMessage
	defer func() {
		// Hand back the messages left in place; a lost lock has already
		// done that.
		_ = parallel(context.Background(), held, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			_ = r.AbandonMessage(ctx, m, nil)
			return nil
		})
	}()
	examined := 0
	for limit == 0 || examined < limit {
		n := batch
		if limit > 0 {
			n = min(n, limit-examined)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		msgs, err := r.ReceiveMessages(wctx, n, nil)
		cancel()
		if isWaitOver(ctx, err) || (err == nil && len(msgs) == 0) {
			break
		}
		if err != nil {
			return done, skipped, err
		}
		var move []*azservicebus.ReceivedMessage
		fresh := 0
		for _, m := range msgs {
			seq := *m.SequenceNumber
			if seen[seq] {
				held = append(held, m) // its lock expired and it came back
				continue
			}
			seen[seq] = true
			fresh++
			if keep(m) {
				move = append(move, m)
			} else {
				held = append(held, m)
				skipped++
			}
		}
		if fresh == 0 {
			break
		}
		examined += fresh
		if len(move) > 0 {
			copies := make([]*azservicebus.Message, len(move))
			for i, m := range move {
				copies[i] = resubmitCopy(m)
			}
			if err := sendAll(ctx, sender, copies); err != nil {
				return done, skipped, err
			}
			if err := parallel(ctx, move, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				return r.CompleteMessage(ctx, m, nil)
			}); err != nil {
				return done, skipped, fmt.Errorf("removing resubmitted messages from the dead-letter queue (they were sent; some may now be in both places): %w", err)
			}
			done += len(move)
		}
		prog.update(done, skipped)
	}
	return done, skipped, nil
}

// resubmitCopy is the message sent back for a dead-lettered one: the same
// body, system and application properties, without the dead-letter
// annotations and any schedule.
func resubmitCopy(m *azservicebus.ReceivedMessage) *azservicebus.Message {
	c := m.Message()
	c.ScheduledEnqueueTime = nil
	if len(m.ApplicationProperties) > 0 {
		props := make(map[string]any, len(m.ApplicationProperties))
		for k, v := range m.ApplicationProperties {
			if k != "DeadLetterReason" && k != "DeadLetterErrorDescription" {
				props[k] = v
			}
		}
		c.ApplicationProperties = props
	}
	if c.TimeToLive != nil && *c.TimeToLive <= 0 {
		c.TimeToLive = nil
	}
	return c
}

// sendAll sends msgs in as few batches as the link's size limit allows.
func sendAll(ctx context.Context, sender *azservicebus.Sender, msgs []*azservicebus.Message) error {
	var batch *azservicebus.MessageBatch
	for i := 0; i < len(msgs); {
		if batch == nil {
			b, err := sender.NewMessageBatch(ctx, nil)
			if err != nil {
				return err
			}
			batch = b
		}
		err := batch.AddMessage(msgs[i], nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && batch.NumMessages() > 0 {
			if err := sender.SendMessageBatch(ctx, batch, nil); err != nil {
				return err
			}
			batch = nil
			continue
		}
		if err != nil {
			return err
		}
		i++
	}
	if batch != nil && batch.NumMessages() > 0 {
		return sender.SendMessageBatch(ctx, batch, nil)
	}
	return nil
}

// settleWorkers is how many settlements are in flight at once.
const settleWorkers = 32

// parallel runs fn over items with settleWorkers goroutines and returns
// the first error.
func parallel[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan T)
	for range min(settleWorkers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := fn(ctx, it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	return first
}

func dlqPurge(env *cliEnv, args []string) error {
	c := command{path: "dlq purge", args: "QUEUE|TOPIC [flags]",
		summary: "Delete the dead-lettered messages present when it starts (or --max of them). This cannot be undone.",
		examples: `busbar dlq purge orders
busbar dlq purge events --subscription audit --max 100`}
	var f dlqRun
	return dataCommand(env, c, args, 1, 1, 0, f.register, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], f.sub)
		if err != nil {
			return err
		}
		if f.batch < 1 || f.batch > 5000 {
			return usageErrorf("--batch must be between 1 and 5000")
		}
		limit, run, err := f.bound(s, e)
		if err != nil {
			return err
		}
		purged := 0
		if run {
			r, err := s.receiver(e, azservicebus.ReceiveModeReceiveAndDelete, true)
			if err != nil {
				return err
			}
			defer func() { _ = r.Close(context.Background()) }()
			prog := newProgress(s.env.stderr, "purged", limit, f.progress)
			purged, err = purge(s.ctx, r, limit, f.batch, f.wait, prog)
			prog.finish()
			if err != nil {
				return fmt.Errorf("purging the dead-letter queue of %s after %d message(s): %w", e, purged, err)
			}
		}
		return s.out.emit(map[string]any{"entity": e.String(), "purged": purged}, func(w io.Writer) {
			fmt.Fprintf(w, "purged %d message(s) from the dead-letter queue of %s\n", purged, e)
		})
	})
}

// purge receives and deletes up to limit messages (0: until none arrives
// within wait).
func purge(ctx context.Context, r *azservicebus.Receiver, limit, batch int, wait time.Duration, prog *progressLine) (int, error) {
	purged := 0
	for limit == 0 || purged < limit {
		n := batch
		if limit > 0 {
			n = min(n, limit-purged)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		msgs, err := r.ReceiveMessages(wctx, n, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: 50 * time.Millisecond})
		cancel()
		purged += len(msgs)
		if isWaitOver(ctx, err) || (err == nil && len(msgs) == 0) {
			break
		}
		if err != nil {
			return purged, err
		}
		prog.update(purged, 0)
	}
	return purged, nil
}
