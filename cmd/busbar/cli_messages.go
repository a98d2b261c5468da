package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func sendCommand(env *cliEnv, args []string) error {
	c := command{path: "send", args: "QUEUE|TOPIC [BODY] [flags]",
		summary: "Send messages to a queue or topic. The body is BODY, the contents of --file, or standard input (BODY \"-\" or none).",
		examples: `busbar send orders '{"id": 42}' --content-type application/json
busbar send orders --file order.json --property tenant=acme --property priority:int=5
echo hello | busbar send orders --session customer-7 --subject greeting
busbar send events 'reminder' --schedule 2026-12-01T09:00:00Z
busbar send events 'retry' --schedule 15m --ttl 1h
busbar send orders 'load test' --count 1000`}
	var (
		file, session, messageID, correlationID, subject, contentType, replyTo, to, ttl, schedule string
		props                                                                                     multiFlag
		count                                                                                     int
	)
	return dataCommand(env, c, args, 1, 2, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&file, "file", "", "read the body from this file")
		fs.Var(&props, "property", "application property key=value, or key:type=value with type string, int, int32, long, float, double, bool or time (repeatable)")
		fs.StringVar(&session, "session", "", "session id")
		fs.StringVar(&messageID, "message-id", "", "message id (the broker assigns one when empty)")
		fs.StringVar(&correlationID, "correlation-id", "", "correlation id")
		fs.StringVar(&subject, "subject", "", "subject (label)")
		fs.StringVar(&contentType, "content-type", "", "content type, e.g. application/json")
		fs.StringVar(&replyTo, "reply-to", "", "reply-to address")
		fs.StringVar(&to, "to", "", "to address")
		fs.StringVar(&ttl, "ttl", "", "time to live (e.g. 30s, 1h, 7d)")
		fs.StringVar(&schedule, "schedule", "", "enqueue at this RFC 3339 time, or after this duration from now (e.g. 15m)")
		fs.IntVar(&count, "count", 1, "send this many copies")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], "")
		if err != nil {
			return err
		}
		if e.sub != "" {
			return usageErrorf("send: messages go to a queue or a topic, not to a subscription")
		}
		if count < 1 {
			return usageErrorf("send: --count must be at least 1")
		}
		body, err := readBody(s.env, pos[1:], file, "body")
		if err != nil {
			return err
		}
		msg := &azservicebus.Message{Body: body}
		if msg.ApplicationProperties, err = parseProperties("property", props); err != nil {
			return err
		}
		opt := func(name, v string) *string {
			if s.set[name] {
				return &v
			}
			return nil
		}
		msg.SessionID, msg.MessageID, msg.CorrelationID = opt("session", session), opt("message-id", messageID), opt("correlation-id", correlationID)
		msg.Subject, msg.ContentType, msg.ReplyTo, msg.To = opt("subject", subject), opt("content-type", contentType), opt("reply-to", replyTo), opt("to", to)
		if ttl != "" {
			d, err := parseDuration(ttl)
			if err != nil {
				return usageErrorf("--ttl: %v", err)
			}
			msg.TimeToLive = &d
		}
		var at time.Time
		if schedule != "" {
			if at, err = parseSchedule(schedule, time.Now()); err != nil {
				return err
			}
		}
		sender, err := s.client.NewSender(e.name, nil)
		if err != nil {
			return err
		}
		defer func() { _ = sender.Close(context.Background()) }()
		if schedule != "" {
			seqs, err := scheduleCopies(s.ctx, sender, msg, count, at)
			if err != nil {
				return fmt.Errorf("scheduling on %s: %w", e, err)
			}
			return s.out.emit(map[string]any{"entity": e.String(), "scheduled": len(seqs), "scheduledFor": at.UTC(), "sequenceNumbers": seqs}, func(w io.Writer) {
				fmt.Fprintf(w, "scheduled %d message(s) on %s for %s; sequence numbers:", len(seqs), e, at.UTC().Format(time.RFC3339))
				for _, q := range seqs {
					fmt.Fprintf(w, " %d", q)
				}
				fmt.Fprintln(w)
			})
		}
		if err := sendCopies(s.ctx, sender, msg, count); err != nil {
			return fmt.Errorf("sending to %s: %w", e, err)
		}
		return s.out.emit(map[string]any{"entity": e.String(), "sent": count}, func(w io.Writer) {
			fmt.Fprintf(w, "sent %d message(s) to %s\n", count, e)
		})
	})
}

// readBody returns the body: the positional argument, the file, or
// standard input (when the argument is "-" or absent and no file is given).
func readBody(env *cliEnv, pos []string, file, what string) ([]byte, error) {
	switch {
	case len(pos) > 0 && file != "":
		return nil, usageErrorf("give the %s as an argument or with --file, not both", what)
	case len(pos) > 0 && pos[0] != "-":
		return []byte(pos[0]), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErrorf("--file: %v", err)
		}
		return b, nil
	}
	if f, ok := env.stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(env.stderr, "reading the %s from standard input (end with Ctrl-D)\n", what)
		}
	}
	b, err := io.ReadAll(env.stdin)
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return b, nil
}

// parseSchedule reads --schedule: an RFC 3339 time, or a duration after now.
func parseSchedule(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return time.Time{}, usageErrorf("--schedule: %q is neither an RFC 3339 time (2026-12-01T09:00:00Z) nor a duration (15m)", s)
	}
	return now.Add(d), nil
}

// copyChunk is how many copies of a message are built and sent (or
// scheduled) at a time.
const copyChunk = 1000

// copies returns n shallow copies of msg (they share body and properties,
// which nothing modifies).
func copies(msg *azservicebus.Message, n int) []*azservicebus.Message {
	out := make([]*azservicebus.Message, n)
	for i := range out {
		m := *msg
		out[i] = &m
	}
	return out
}

// sendCopies sends count copies of msg, packed into batches.
func sendCopies(ctx context.Context, sender *azservicebus.Sender, msg *azservicebus.Message, count int) error {
	if count == 1 {
		return sender.SendMessage(ctx, msg, nil)
	}
	for done := 0; done < count; {
		n := min(copyChunk, count-done)
		if err := sendAll(ctx, sender, copies(msg, n)); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// scheduleCopies schedules count copies of msg for at and returns their
// sequence numbers.
func scheduleCopies(ctx context.Context, sender *azservicebus.Sender, msg *azservicebus.Message, count int, at time.Time) ([]int64, error) {
	var seqs []int64
	for done := 0; done < count; {
		n := min(copyChunk, count-done)
		got, err := sender.ScheduleMessages(ctx, copies(msg, n), at, nil)
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, got...)
		done += n
	}
	return seqs, nil
}

// receiveFlags are the flags of receive.
type receiveFlags struct {
	sub, mode, session   string
	count                int
	wait                 time.Duration
	nextSession, dlq, bo bool
}

func receiveCommand(env *cliEnv, args []string) error {
	c := command{path: "receive", args: "QUEUE|TOPIC [flags]",
		summary: "Receive messages: peek-lock and complete each one (the default), or receive-and-delete. " +
			"Stops after --count messages, or when none arrives within --wait.",
		examples: `busbar receive orders
busbar receive orders --count 10 --wait 30s
busbar receive events --subscription audit --mode receive-and-delete --count 100
busbar receive payments --session customer-7 --count 5
busbar receive payments --next-session --body-only
busbar receive orders --dlq --count 5`}
	var f receiveFlags
	return dataCommand(env, c, args, 1, 1, 0, func(fs *flagSet) {
		fs.StringVar(&f.sub, "subscription", "", "the topic's subscription to receive from")
		fs.IntVar(&f.count, "count", 1, "receive at most this many messages")
		fs.StringVar(&f.mode, "mode", "peek-lock", "peek-lock (complete each message) or receive-and-delete")
		fs.StringVar(&f.session, "session", "", "receive from this session")
		fs.BoolVar(&f.nextSession, "next-session", false, "receive from the next session with messages")
		fs.DurationVar(&f.wait, "wait", 5*time.Second, "stop when no message arrives for this long")
		fs.BoolVar(&f.dlq, "dlq", false, "receive from the dead-letter queue")
		fs.BoolVar(&f.bo, "body-only", false, "print only the bodies, one per line")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], f.sub)
		if err != nil {
			return err
		}
		var mode azservicebus.ReceiveMode
		switch f.mode {
		case "peek-lock":
			mode = azservicebus.ReceiveModePeekLock
		case "receive-and-delete":
			mode = azservicebus.ReceiveModeReceiveAndDelete
		default:
			return usageErrorf("--mode: %q is not peek-lock or receive-and-delete", f.mode)
		}
		if f.count < 1 {
			return usageErrorf("--count must be at least 1")
		}
		useSession, id, err := sessionFlags(s.set, f.session, f.nextSession, f.dlq)
		if err != nil {
			return err
		}
		var r msgReceiver
		switch {
		case useSession:
			actx, cancel := context.WithTimeout(s.ctx, f.wait)
			sr, err := s.sessionReceiver(actx, e, id, mode)
			cancel()
			if isWaitOver(s.ctx, err) || isTimeoutCode(err) {
				return s.printReceived(nil, f.bo) // no session became available
			}
			if err != nil {
				return fmt.Errorf("accepting a session of %s: %w", e, err)
			}
			r = sr
		default:
			rr, err := s.receiver(e, mode, f.dlq)
			if err != nil {
				return err
			}
			r = rr
		}
		defer func() { _ = r.Close(context.Background()) }()
		got, err := receiveUpTo(s.ctx, r, f.count, f.wait, mode == azservicebus.ReceiveModePeekLock)
		if err != nil {
			if len(got) > 0 {
				_ = s.printReceived(got, f.bo)
			}
			return fmt.Errorf("receiving from %s: %w", e, err)
		}
		return s.printReceived(got, f.bo)
	})
}

// receiveUpTo receives until it has count messages or none arrives within
// wait; in peek-lock mode it completes each batch as it arrives.
func receiveUpTo(ctx context.Context, r msgReceiver, count int, wait time.Duration, complete bool) ([]*azservicebus.ReceivedMessage, error) {
	var got []*azservicebus.ReceivedMessage
	for len(got) < count {
		wctx, cancel := context.WithTimeout(ctx, wait)
		msgs, err := r.ReceiveMessages(wctx, min(count-len(got), 1000), nil)
		cancel()
		if isWaitOver(ctx, err) || (err == nil && len(msgs) == 0) {
			break
		}
		if err != nil {
			return got, err
		}
		if complete {
			for _, m := range msgs {
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					return got, fmt.Errorf("completing message %d: %w", *m.SequenceNumber, err)
				}
			}
		}
		got = append(got, msgs...)
	}
	return got, nil
}

// printReceived prints received messages as a table, JSON, or bare bodies.
func (s *dataSession) printReceived(msgs []*azservicebus.ReceivedMessage, bodyOnly bool) error {
	if bodyOnly && !s.out.json {
		for _, m := range msgs {
			if _, err := fmt.Fprintf(s.out.w, "%s\n", m.Body); err != nil {
				return err
			}
		}
		return nil
	}
	if len(msgs) == 0 && !s.out.json {
		fmt.Fprintln(s.env.stderr, "no messages")
		return nil
	}
	return s.out.emit(messageViews(msgs), func(w io.Writer) {
		messageTable(w, msgs, colSeq, colEnqueued, colID, colSession, colSubject, colDeliv, colBody)
	})
}

func peekCommand(env *cliEnv, args []string) error {
	c := command{path: "peek", args: "QUEUE|TOPIC [flags]",
		summary: "Look at messages without locking or removing them: active, scheduled and deferred ones, in sequence order.",
		examples: `busbar peek orders
busbar peek orders --from-seq 1200 --count 50
busbar peek events --subscription audit --json
busbar peek orders --dlq
busbar peek payments --session customer-7
busbar peek payments --next-session`}
	var (
		sub, session      string
		from              int64
		count             int
		dlq, raw, nextSes bool
	)
	return dataCommand(env, c, args, 1, 1, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription to peek")
		fs.Int64Var(&from, "from-seq", 0, "start at this sequence number (default: the first)")
		fs.IntVar(&count, "count", 10, "peek at most this many messages")
		fs.BoolVar(&dlq, "dlq", false, "peek the dead-letter queue")
		fs.BoolVar(&raw, "body-only", false, "print only the bodies, one per line")
		fs.StringVar(&session, "session", "", "peek this session's messages (session-enabled entities)")
		fs.BoolVar(&nextSes, "next-session", false, "peek the messages of the next session with messages")
	}, func(s *dataSession, pos []string) error {
		useSession, id, err := sessionFlags(s.set, session, nextSes, dlq)
		if err != nil {
			return err
		}
		var msgs []*azservicebus.ReceivedMessage
		if useSession {
			msgs, err = s.peekSession(pos[0], sub, id, from, count)
		} else {
			msgs, err = s.peek(pos[0], sub, from, count, dlq)
		}
		if err != nil {
			return err
		}
		if raw && !s.out.json {
			return s.printReceived(msgs, true)
		}
		return s.out.emit(messageViews(msgs), func(w io.Writer) {
			messageTable(w, msgs, colSeq, colState, colEnqueued, colID, colSession, colSubject, colBody)
		})
	})
}

// peek reads up to count messages of an entity (or its dead-letter queue)
// from sequence number from, without locking them: the body of both
// `peek` and `dlq list`.
func (s *dataSession) peek(entity, sub string, from int64, count int, dlq bool) ([]*azservicebus.ReceivedMessage, error) {
	e, err := parseEntity(entity, sub)
	if err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, usageErrorf("--count must be at least 1")
	}
	r, err := s.receiver(e, azservicebus.ReceiveModePeekLock, dlq)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close(context.Background()) }()
	msgs, err := peekMessages(s.ctx, r, from, count, nil)
	if err != nil {
		what := e.String()
		if dlq {
			what = "the dead-letter queue of " + what
		}
		return nil, fmt.Errorf("peeking %s: %w", what, err)
	}
	return msgs, nil
}

// sessionFlags checks --session / --next-session (set: the flags given) and
// says whether to use a session, and which (nil: the next one).
func sessionFlags(set map[string]bool, session string, next, dlq bool) (bool, *string, error) {
	switch {
	case set["session"] && next:
		return false, nil, usageErrorf("--session and --next-session: give one")
	case (set["session"] || next) && dlq:
		return false, nil, usageErrorf("the dead-letter queue has no sessions: drop --session/--next-session")
	case set["session"]:
		return true, &session, nil
	}
	return next, nil, nil
}

// peekSession peeks within one session (id, or the next one with messages
// when id is nil). Accepting the session locks it while the peek runs.
func (s *dataSession) peekSession(entity, sub string, id *string, from int64, count int) ([]*azservicebus.ReceivedMessage, error) {
	e, err := parseEntity(entity, sub)
	if err != nil {
		return nil, err
	}
	if count < 1 {
		return nil, usageErrorf("--count must be at least 1")
	}
	sr, err := s.sessionReceiver(s.ctx, e, id, azservicebus.ReceiveModePeekLock)
	if err != nil {
		if id == nil && isTimeoutCode(err) {
			return nil, nil // no session has messages
		}
		return nil, fmt.Errorf("accepting a session of %s: %w", e, err)
	}
	defer func() { _ = sr.Close(context.Background()) }()
	msgs, err := peekMessages(s.ctx, sr, from, count, nil)
	if err != nil {
		return nil, fmt.Errorf("peeking session %q of %s: %w", sr.SessionID(), e, err)
	}
	return msgs, nil
}

// isTimeoutCode reports whether the broker answered with its timeout error,
// which is how it says no session became available within the wait.
func isTimeoutCode(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout
}
