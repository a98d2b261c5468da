package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func sessionsCommand(env *cliEnv, args []string) error {
	return group{name: "sessions", summary: "List the sessions of a session-enabled queue or subscription.", subs: []subcommand{
		{"list", "list the sessions that have messages or state", sessionsList},
	}}.dispatch(env, args)
}

func sessionsList(env *cliEnv, args []string) error {
	c := command{path: "sessions list", args: "QUEUE|TOPIC [flags]",
		summary: "List the sessions of a session-enabled queue or subscription that have messages or state.",
		examples: `busbar sessions list payments
busbar sessions list events --subscription per-customer --json`}
	var sub string
	return dataCommand(env, c, args, 1, 1, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], sub)
		if err != nil {
			return err
		}
		pager := s.client.NewListSessionsForQueuePager(e.name, nil)
		if e.sub != "" {
			pager = s.client.NewListSessionsForSubscriptionPager(e.name, e.sub, nil)
		}
		ids := []string{}
		for pager.More() {
			page, err := pager.NextPage(s.ctx)
			if err != nil {
				return fmt.Errorf("listing the sessions of %s: %w", e, err)
			}
			ids = append(ids, page.Sessions...)
		}
		sort.Strings(ids)
		return s.out.emit(ids, func(w io.Writer) {
			row(w, "SESSION")
			for _, id := range ids {
				row(w, id)
			}
		})
	})
}

func sessionCommand(env *cliEnv, args []string) error {
	return group{name: "session", summary: "Read and write the state of one session.", subs: []subcommand{
		{"state", "get|set a session's state", sessionState},
	}}.dispatch(env, args)
}

func sessionState(env *cliEnv, args []string) error {
	return group{name: "session state", summary: "Read and write the state of one session (the session is locked for the call).", subs: []subcommand{
		{"get", "print a session's state", sessionStateGet},
		{"set", "replace or clear a session's state", sessionStateSet},
	}}.dispatch(env, args)
}

// withSession accepts session id of e, runs fn and releases the session.
func (s *dataSession) withSession(e entityRef, id string, fn func(*azservicebus.SessionReceiver) error) error {
	sr, err := s.sessionReceiver(s.ctx, e, &id, azservicebus.ReceiveModePeekLock)
	if err != nil {
		return fmt.Errorf("locking session %q of %s: %w", id, e, err)
	}
	defer func() { _ = sr.Close(context.Background()) }()
	return fn(sr)
}

func sessionStateGet(env *cliEnv, args []string) error {
	c := command{path: "session state get", args: "QUEUE|TOPIC SESSION [flags]",
		summary: "Print a session's state: the raw bytes, or with --json an object with the state as text (or base64).",
		examples: `busbar session state get payments customer-7
busbar session state get events customer-7 --subscription per-customer --json
busbar session state get payments customer-7 > state.bin`}
	var sub string
	return dataCommand(env, c, args, 2, 2, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], sub)
		if err != nil {
			return err
		}
		return s.withSession(e, pos[1], func(sr *azservicebus.SessionReceiver) error {
			state, err := sr.GetSessionState(s.ctx, nil)
			if err != nil {
				return fmt.Errorf("reading the state of session %q of %s: %w", pos[1], e, err)
			}
			if !s.out.json {
				_, err := s.out.w.Write(state)
				return err
			}
			v := map[string]any{"sessionId": pos[1], "state": nil}
			switch {
			case state == nil:
			case utf8.Valid(state):
				v["state"] = string(state)
			default:
				v["stateBase64"] = state
				delete(v, "state")
			}
			return s.out.emit(v, nil)
		})
	})
}

func sessionStateSet(env *cliEnv, args []string) error {
	c := command{path: "session state set", args: "QUEUE|TOPIC SESSION [STATE] [flags]",
		summary: "Replace a session's state with STATE, the contents of --file, or standard input (STATE \"-\" or none); --clear removes it.",
		examples: `busbar session state set payments customer-7 '{"step": 3}'
busbar session state set payments customer-7 --file state.json
busbar session state set payments customer-7 --clear`}
	var (
		sub, file string
		clear     bool
	)
	return dataCommand(env, c, args, 2, 3, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
		fs.StringVar(&file, "file", "", "read the state from this file")
		fs.BoolVar(&clear, "clear", false, "remove the state")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], sub)
		if err != nil {
			return err
		}
		var state []byte
		if clear {
			if len(pos) > 2 || file != "" {
				return usageErrorf("--clear takes no state")
			}
		} else if state, err = readBody(s.env, pos[2:], file, "state"); err != nil {
			return err
		}
		return s.withSession(e, pos[1], func(sr *azservicebus.SessionReceiver) error {
			if err := sr.SetSessionState(s.ctx, state, nil); err != nil {
				return fmt.Errorf("setting the state of session %q of %s: %w", pos[1], e, err)
			}
			msg := fmt.Sprintf("set the state of session %s of %s (%d bytes)", pos[1], e, len(state))
			if clear {
				msg = fmt.Sprintf("cleared the state of session %s of %s", pos[1], e)
			}
			return s.out.emit(map[string]any{"sessionId": pos[1], "bytes": len(state), "cleared": clear}, func(w io.Writer) { fmt.Fprintln(w, msg) })
		})
	})
}

func scheduledCommand(env *cliEnv, args []string) error {
	return group{name: "scheduled", summary: "List and cancel scheduled messages.", subs: []subcommand{
		{"list", "list the messages scheduled on a queue or subscription", scheduledList},
		{"cancel", "cancel scheduled messages by sequence number", scheduledCancel},
	}}.dispatch(env, args)
}

func scheduledList(env *cliEnv, args []string) error {
	c := command{path: "scheduled list", args: "QUEUE|TOPIC [flags]",
		summary: "List the messages scheduled on a queue or subscription (found by peeking the whole entity), in sequence order.",
		examples: `busbar scheduled list reminders
busbar scheduled list events --subscription audit --json`}
	var (
		sub   string
		count int
	)
	return dataCommand(env, c, args, 1, 1, defaultTimeout, func(fs *flagSet) {
		fs.StringVar(&sub, "subscription", "", "the topic's subscription")
		fs.IntVar(&count, "count", 0, "list at most this many (0: all)")
	}, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], sub)
		if err != nil {
			return err
		}
		r, err := s.receiver(e, azservicebus.ReceiveModePeekLock, false)
		if err != nil {
			return err
		}
		defer func() { _ = r.Close(context.Background()) }()
		msgs, err := peekMessages(s.ctx, r, 0, count, func(m *azservicebus.ReceivedMessage) bool {
			return m.State == azservicebus.MessageStateScheduled
		})
		if err != nil {
			return fmt.Errorf("peeking %s: %w", e, err)
		}
		return s.out.emit(messageViews(msgs), func(w io.Writer) {
			messageTable(w, msgs, colSeq, colSchedule, colID, colSession, colSubject, colBody)
		})
	})
}

func scheduledCancel(env *cliEnv, args []string) error {
	c := command{path: "scheduled cancel", args: "QUEUE|TOPIC SEQ... [flags]",
		summary: "Cancel scheduled messages of a queue or topic by sequence number (as printed by send --schedule and scheduled list).",
		examples: `busbar scheduled cancel reminders 17
busbar scheduled cancel events 40 41 42`}
	return dataCommand(env, c, args, 2, -1, defaultTimeout, nil, func(s *dataSession, pos []string) error {
		e, err := parseEntity(pos[0], "")
		if err != nil {
			return err
		}
		if e.sub != "" {
			return usageErrorf("scheduled cancel: scheduled messages are cancelled on the queue or topic they were sent to")
		}
		seqs := make([]int64, 0, len(pos)-1)
		for _, a := range pos[1:] {
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil || n < 0 {
				return usageErrorf("scheduled cancel: %q is not a sequence number", a)
			}
			seqs = append(seqs, n)
		}
		sender, err := s.client.NewSender(e.name, nil)
		if err != nil {
			return err
		}
		defer func() { _ = sender.Close(context.Background()) }()
		if err := sender.CancelScheduledMessages(s.ctx, seqs, nil); err != nil {
			return fmt.Errorf("cancelling scheduled messages on %s: %w", e, err)
		}
		return s.out.emit(map[string]any{"entity": e.String(), "cancelled": seqs}, func(w io.Writer) {
			fmt.Fprintf(w, "cancelled %d scheduled message(s) on %s\n", len(seqs), e)
		})
	})
}
