package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/busbar-io/busbar/schedule"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// runScheduleCommand runs `busbar schedule …` (the durable schedules of
// package schedule) with the process's streams.
func runScheduleCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &cliEnv{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	return report(stderr, scheduleCommand(env, args))
}

func scheduleCommand(env *cliEnv, args []string) error {
	return group{name: "schedule", summary: "Manage recurring schedules kept in a session-enabled control queue, and host them.", subs: []subcommand{
		{"create", "create a schedule", func(env *cliEnv, args []string) error { return schedulePut(env, args, true) }},
		{"update", "change a schedule (the flags given replace those parts)", func(env *cliEnv, args []string) error { return schedulePut(env, args, false) }},
		{"list", "list the schedules with their next firing", scheduleList},
		{"show", "show one schedule", scheduleShow},
		{"pause", "stop a schedule firing until resumed", scheduleOp("pause")},
		{"resume", "let a paused schedule fire again", scheduleOp("resume")},
		{"trigger", "send a firing now", scheduleOp("trigger")},
		{"delete", "delete a schedule", scheduleOp("delete")},
		{"run", "host the schedules: send their firings until stopped", scheduleRun},
	}}.dispatch(env, args)
}

// defaultControlQueue is the control queue the schedule commands use
// without --queue.
const defaultControlQueue = "schedules"

func scheduleCmd(env *cliEnv, c command, args []string, minArgs, maxArgs int, defTimeout time.Duration,
	register func(fs *flagSet), body func(s *dataSession, sch *schedule.Scheduler, pos []string) error) error {
	var queue string
	return dataCommand(env, c, args, minArgs, maxArgs, defTimeout, func(fs *flagSet) {
		fs.StringVar(&queue, "queue", defaultControlQueue, "the session-enabled control queue holding the schedules")
		if register != nil {
			register(fs)
		}
	}, func(s *dataSession, pos []string) error {
		sch, err := schedule.New(s.client, queue, nil)
		if err != nil {
			return err
		}
		defer sch.Close(context.Background())
		return body(s, sch, pos)
	})
}

// specFlags hold the definition flags of create and update.
type specFlags struct {
	target, cron, every, unit, on, day, nth, at, zone, start, end, jitter string
	interval, maxFirings                                                  int
	subject, contentType, body, sessionID                                 string
	props                                                                 multiFlag
	misfire, misfireThreshold, overlap, maxRunTime                        string
	misfireLimit, queueLimit                                              int
}

func (f *specFlags) register(fs *flagSet) {
	fs.StringVar(&f.target, "target", "", "the queue or topic firings are sent to (give it duplicate detection)")
	fs.StringVar(&f.cron, "cron", "", `a cron expression: 5 fields, 6 with seconds first, or a macro (@daily, @every 90m …)`)
	fs.StringVar(&f.every, "every", "", "a fixed interval of real time, e.g. 8h")
	fs.StringVar(&f.unit, "unit", "", "a calendar recurrence: day, week or month")
	fs.IntVar(&f.interval, "interval", 0, "with --unit: every N days, weeks or months (default 1)")
	fs.StringVar(&f.on, "on", "", "with --unit week: the weekdays (MON,FRI); with --nth: the weekday")
	fs.StringVar(&f.day, "day", "", "with --unit month: the day of the month, 1-31, or last, or -N from the end")
	fs.StringVar(&f.nth, "nth", "", "with --unit month and --on: the Nth weekday, 1-5 or last")
	fs.StringVar(&f.at, "at", "", "with --unit: times of day, HH:MM[:SS], comma-separated (default 00:00)")
	fs.StringVar(&f.zone, "zone", "", "the IANA time zone of cron and calendar times (default UTC)")
	fs.StringVar(&f.start, "start", "", "the first possible firing, RFC 3339")
	fs.StringVar(&f.end, "end", "", "the last possible firing, RFC 3339")
	fs.IntVar(&f.maxFirings, "max-firings", 0, "end after this many firings (0: no limit)")
	fs.StringVar(&f.jitter, "jitter", "", "delay each firing by up to this much, e.g. 30s")
	fs.StringVar(&f.subject, "subject", "", "the fired message's subject")
	fs.StringVar(&f.contentType, "content-type", "", "the fired message's content type")
	fs.StringVar(&f.body, "body", "", "the fired message's body")
	fs.StringVar(&f.sessionID, "session-id", "", "the fired message's session id (for a session-enabled target)")
	fs.Var(&f.props, "property", "an application property of the fired message, key=value or key:type=value (repeatable)")
	fs.StringVar(&f.misfire, "misfire", "", "when firings were missed while no host ran: once (default), all, skip")
	fs.IntVar(&f.misfireLimit, "misfire-limit", 0, "with --misfire all: at most this many (default 10)")
	fs.StringVar(&f.misfireThreshold, "misfire-threshold", "", "how late a firing may be and still be on time (default 1m)")
	fs.StringVar(&f.overlap, "overlap", "", "when the previous firing still runs: allow (default), skip, queue")
	fs.StringVar(&f.maxRunTime, "max-run-time", "", "with --overlap: how long a firing counts as running (default 1h)")
	fs.IntVar(&f.queueLimit, "queue-limit", 0, "with --overlap queue: at most this many held back (default 10)")
}

// apply changes d by the flags given (set names them).
func (f *specFlags) apply(d *schedule.Definition, set map[string]bool) error {
	kinds := 0
	for _, k := range []string{"cron", "every", "unit"} {
		if set[k] {
			kinds++
		}
	}
	if kinds > 1 {
		return usageErrorf("give one of --cron, --every and --unit")
	}
	if kinds == 1 {
		d.Cron, d.Every, d.Calendar = "", 0, nil
	}
	var err error
	dur := func(name, v string) schedule.Duration {
		if err != nil || v == "" {
			return 0
		}
		var x time.Duration
		if x, err = time.ParseDuration(v); err != nil {
			err = usageErrorf("--%s %q: %v", name, v, err)
		}
		return schedule.Duration(x)
	}
	tm := func(name, v string) time.Time {
		if err != nil || v == "" {
			return time.Time{}
		}
		var x time.Time
		if x, err = time.Parse(time.RFC3339, v); err != nil {
			err = usageErrorf("--%s %q: want RFC 3339", name, v)
		}
		return x
	}
	if set["target"] {
		d.Target = f.target
	}
	if set["cron"] {
		d.Cron = f.cron
	}
	if set["every"] {
		d.Every = dur("every", f.every)
	}
	calFlags := set["unit"] || set["interval"] || set["on"] || set["day"] || set["nth"] || set["at"]
	if calFlags {
		if d.Calendar == nil {
			if !set["unit"] {
				return usageErrorf("--interval, --on, --day, --nth and --at need --unit (or a calendar schedule)")
			}
			d.Calendar = &schedule.Calendar{}
		}
		if err := f.applyCalendar(d.Calendar, set); err != nil {
			return err
		}
	}
	if set["zone"] {
		d.TimeZone = f.zone
	}
	if set["start"] {
		d.Start = tm("start", f.start)
	}
	if set["end"] {
		d.End = tm("end", f.end)
	}
	if set["max-firings"] {
		d.MaxFirings = f.maxFirings
	}
	if set["jitter"] {
		d.Jitter = dur("jitter", f.jitter)
	}
	if set["subject"] {
		d.Message.Subject = f.subject
	}
	if set["content-type"] {
		d.Message.ContentType = f.contentType
	}
	if set["body"] {
		d.Message.Body = []byte(f.body)
	}
	if set["session-id"] {
		d.Message.SessionID = f.sessionID
	}
	if set["property"] {
		props, perr := parseProperties("property", f.props)
		if perr != nil {
			return usageErrorf("%v", perr)
		}
		d.Message.Properties = props
	}
	if set["misfire"] {
		d.Misfire = schedule.MisfirePolicy(f.misfire)
	}
	if set["misfire-limit"] {
		d.MisfireLimit = f.misfireLimit
	}
	if set["misfire-threshold"] {
		d.MisfireThreshold = dur("misfire-threshold", f.misfireThreshold)
	}
	if set["overlap"] {
		d.Overlap = schedule.OverlapPolicy(f.overlap)
	}
	if set["max-run-time"] {
		d.MaxRunTime = dur("max-run-time", f.maxRunTime)
	}
	if set["queue-limit"] {
		d.QueueLimit = f.queueLimit
	}
	return err
}

func (f *specFlags) applyCalendar(c *schedule.Calendar, set map[string]bool) error {
	if set["unit"] {
		c.Unit = schedule.Unit(f.unit)
	}
	if set["interval"] {
		c.Interval = f.interval
	}
	if set["on"] {
		c.Weekdays = nil
		for _, s := range strings.Split(f.on, ",") {
			wd, err := parseWeekday(s)
			if err != nil {
				return err
			}
			c.Weekdays = append(c.Weekdays, wd)
		}
	}
	parseDay := func(name, v string) (int, error) {
		if strings.EqualFold(v, "last") {
			return -1, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, usageErrorf("--%s %q: want a number or last", name, v)
		}
		return n, nil
	}
	var err error
	if set["day"] {
		if c.Day, err = parseDay("day", f.day); err != nil {
			return err
		}
		c.Nth = 0
	}
	if set["nth"] {
		if c.Nth, err = parseDay("nth", f.nth); err != nil {
			return err
		}
		c.Day = 0
	}
	if set["at"] {
		c.At = strings.Split(f.at, ",")
	}
	return nil
}

func parseWeekday(s string) (time.Weekday, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.HasPrefix(strings.ToUpper(d.String()), s) && len(s) >= 2 {
			return d, nil
		}
	}
	return 0, usageErrorf("weekday %q: want MON, TUE, … or SUN", s)
}

func schedulePut(env *cliEnv, args []string, create bool) error {
	verb := "update"
	examples := `busbar schedule update weekly-report --at 13:00
busbar schedule update sync --every 10m
busbar schedule update nightly --zone America/New_York`
	if create {
		verb = "create"
		examples = `busbar schedule create weekly-report --target reports --unit week --on FRI --at 12:00 --zone Europe/Oslo
busbar schedule create sync --target jobs --every 8h --subject Sync
busbar schedule create nightly --target jobs --cron "0 30 2 * * *" --zone Europe/Oslo --misfire skip
busbar schedule create payroll --target jobs --unit month --day last --at 18:00
busbar schedule create board --target jobs --unit month --nth 2 --on TUE --at 09:00 --end 2027-12-31T23:59:59Z`
	}
	c := command{path: "schedule " + verb, args: "NAME [flags]",
		summary: map[bool]string{true: "Create a schedule in the control queue; it fires once a host (busbar schedule run) runs. Creating one that exists with the same definition changes nothing.",
			false: "Change a schedule: the flags given replace those parts of its definition, and the change takes effect at once."}[create],
		examples: examples}
	var f specFlags
	return scheduleCmd(env, c, args, 1, 1, defaultTimeout, f.register, func(s *dataSession, sch *schedule.Scheduler, pos []string) error {
		d := schedule.Definition{Name: pos[0]}
		if create {
			if !s.set["target"] {
				return usageErrorf("schedule create needs --target")
			}
		} else {
			info, err := sch.Get(s.ctx, pos[0])
			if errors.Is(err, schedule.ErrNotFound) {
				return notFoundf("schedule %q does not exist", pos[0])
			}
			if err != nil {
				return err
			}
			d = info.Definition
		}
		if err := f.apply(&d, s.set); err != nil {
			return err
		}
		if err := d.Validate(); err != nil {
			return &cliError{code: exitUsage, err: err}
		}
		if create {
			info, err := sch.Get(s.ctx, pos[0])
			switch {
			case err == nil && schedule.SameDefinition(info.Definition, d):
				return s.out.emit(info, func(w io.Writer) {
					fmt.Fprintf(w, "schedule %s exists unchanged; next firing %s\n", pos[0], nextText(info))
				})
			case err == nil:
				return fmt.Errorf("schedule %q exists with another definition (use busbar schedule update)", pos[0])
			case !errors.Is(err, schedule.ErrNotFound):
				return err
			}
		}
		info, changed, err := sch.Put(s.ctx, d)
		if err != nil {
			return err
		}
		return s.out.emit(info, func(w io.Writer) {
			what := verb + "d"
			if !changed {
				what = "unchanged"
			}
			fmt.Fprintf(w, "schedule %s %s; next firing %s\n", pos[0], what, nextText(info))
		})
	})
}

func nextText(info schedule.Info) string {
	switch {
	case info.Paused:
		return "none (paused)"
	case info.Finished:
		return "none (finished)"
	case info.Next.IsZero():
		return "none"
	}
	return localAndUTC(info.Next, info.Definition.TimeZone)
}

// localAndUTC renders t in zone and in UTC.
func localAndUTC(t time.Time, zone string) string {
	utc := t.UTC().Format(time.RFC3339)
	loc, err := time.LoadLocation(zone)
	if err != nil || loc == time.UTC {
		return utc
	}
	return t.In(loc).Format("2006-01-02T15:04:05-07:00 MST") + " (" + utc + ")"
}

func specText(d schedule.Definition) string {
	switch {
	case d.Cron != "":
		return "cron " + d.Cron
	case d.Every != 0:
		return "every " + time.Duration(d.Every).String()
	case d.Calendar != nil:
		c := d.Calendar
		s := "every"
		if c.Interval > 1 {
			s += " " + strconv.Itoa(c.Interval)
		}
		s += " " + string(c.Unit)
		var days []string
		for _, wd := range c.Weekdays {
			days = append(days, wd.String()[:3])
		}
		switch {
		case c.Nth == -1:
			s += " last " + strings.Join(days, ",")
		case c.Nth > 0:
			s += " #" + strconv.Itoa(c.Nth) + " " + strings.Join(days, ",")
		case c.Day == -1:
			s += " last day"
		case c.Day != 0:
			s += " day " + strconv.Itoa(c.Day)
		case len(days) > 0:
			s += " " + strings.Join(days, ",")
		}
		at := c.At
		if len(at) == 0 {
			at = []string{"00:00"}
		}
		return s + " at " + strings.Join(at, ",")
	}
	return "-"
}

func stateText(info schedule.Info) string {
	switch {
	case info.Paused:
		return "paused"
	case info.Finished:
		return "finished"
	}
	return "active"
}

func scheduleList(env *cliEnv, args []string) error {
	c := command{path: "schedule list", args: "[flags]",
		summary:  "List the schedules of the control queue with their next firing, in the schedule's zone and in UTC.",
		examples: "busbar schedule list\nbusbar schedule list --queue schedules --json"}
	return scheduleCmd(env, c, args, 0, 0, time.Minute, nil, func(s *dataSession, sch *schedule.Scheduler, _ []string) error {
		list, err := sch.List(s.ctx)
		if err != nil {
			return err
		}
		return s.out.emit(list, func(w io.Writer) {
			row(w, "NAME", "SCHEDULE", "ZONE", "STATE", "NEXT (ZONE)", "NEXT (UTC)", "FIRINGS", "TARGET")
			for _, i := range list {
				zone := i.Definition.TimeZone
				if zone == "" {
					zone = "UTC"
				}
				local, utc := "-", "-"
				if !i.Next.IsZero() {
					utc = i.Next.UTC().Format(time.RFC3339)
					local = utc
					if loc, err := time.LoadLocation(zone); err == nil {
						local = i.Next.In(loc).Format("2006-01-02T15:04:05-07:00")
					}
				}
				row(w, i.Definition.Name, specText(i.Definition), zone, stateText(i), local, utc, i.Firings, i.Definition.Target)
			}
		})
	})
}

func scheduleShow(env *cliEnv, args []string) error {
	c := command{path: "schedule show", args: "NAME [flags]",
		summary:  "Show a schedule: its definition, state, next firing and counters.",
		examples: "busbar schedule show weekly-report\nbusbar schedule show weekly-report --json"}
	return scheduleCmd(env, c, args, 1, 1, defaultTimeout, nil, func(s *dataSession, sch *schedule.Scheduler, pos []string) error {
		info, err := sch.Get(s.ctx, pos[0])
		if errors.Is(err, schedule.ErrNotFound) {
			return notFoundf("schedule %q does not exist", pos[0])
		}
		if err != nil {
			return err
		}
		d := info.Definition
		return s.out.emit(info, func(w io.Writer) {
			zone := d.TimeZone
			if zone == "" {
				zone = "UTC"
			}
			row(w, "name", d.Name)
			row(w, "schedule", specText(d))
			row(w, "zone", zone)
			row(w, "target", d.Target)
			row(w, "state", stateText(info))
			row(w, "next", nextText(info))
			if !info.LastFired.IsZero() {
				row(w, "last fired", localAndUTC(info.LastFired, d.TimeZone))
			}
			row(w, "firings", info.Firings)
			row(w, "triggered", info.Triggered)
			row(w, "missed", info.Missed)
			row(w, "overlap skipped", info.Skipped)
			row(w, "misfire", orDefault(string(d.Misfire), "once"))
			row(w, "overlap", orDefault(string(d.Overlap), "allow"))
			row(w, "generation", info.Generation)
			row(w, "created", info.Created.UTC().Format(time.RFC3339))
			row(w, "updated", info.Updated.UTC().Format(time.RFC3339))
		})
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func scheduleOp(op string) func(*cliEnv, []string) error {
	summaries := map[string]string{
		"pause":   "Pause a schedule: it sends no firings, then or later, until resumed.",
		"resume":  "Resume a paused schedule from its next firing after now.",
		"trigger": "Send a firing of the schedule now (ScheduleTrigger=manual); its own firings are unchanged.",
		"delete":  "Delete a schedule: its pending wake-up is cancelled and its state removed.",
	}
	return func(env *cliEnv, args []string) error {
		c := command{path: "schedule " + op, args: "NAME [flags]", summary: summaries[op], examples: "busbar schedule " + op + " weekly-report"}
		return scheduleCmd(env, c, args, 1, 1, defaultTimeout, nil, func(s *dataSession, sch *schedule.Scheduler, pos []string) error {
			name := pos[0]
			var err error
			msg := ""
			switch op {
			case "pause":
				err, msg = sch.Pause(s.ctx, name), "paused"
			case "resume":
				err, msg = sch.Resume(s.ctx, name), "resumed"
			case "delete":
				err, msg = sch.Delete(s.ctx, name), "deleted"
			case "trigger":
				var at time.Time
				at, err = sch.Trigger(s.ctx, name)
				msg = "triggered at " + at.Format(time.RFC3339Nano)
			}
			if errors.Is(err, schedule.ErrNotFound) {
				return notFoundf("schedule %q does not exist", name)
			}
			if err != nil {
				return err
			}
			return s.out.emit(map[string]string{"name": name, "result": msg}, func(w io.Writer) { fmt.Fprintf(w, "schedule %s %s\n", name, msg) })
		})
	}
}

func scheduleRun(env *cliEnv, args []string) error {
	c := command{path: "schedule run", args: "[flags]",
		summary: "Host the schedules of the control queue: send their firings until interrupted (SIGINT, SIGTERM). Run as many as you like: each schedule is handled by one host at a time.",
		examples: `busbar schedule run
busbar schedule run --queue schedules --concurrency 64 --metrics-addr 127.0.0.1:9464`}
	var (
		queue, metricsAddr string
		concurrency        int
		verbose            bool
	)
	return dataCommand(env, c, args, 0, 0, 0, func(fs *flagSet) {
		fs.StringVar(&queue, "queue", defaultControlQueue, "the session-enabled control queue holding the schedules")
		fs.IntVar(&concurrency, "concurrency", 16, "schedules handled at once")
		fs.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address at /metrics")
		fs.BoolVar(&verbose, "verbose", false, "log every firing, and every send of one (debug)")
	}, func(s *dataSession, _ []string) error {
		level := slog.LevelWarn
		if verbose {
			level = slog.LevelDebug
		}
		log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
		reg := prometheus.NewRegistry()
		sch, err := schedule.New(s.client, queue, &schedule.Options{
			MaxConcurrentSessions: concurrency, Logger: log, Registerer: reg,
			OnEvent: func(e schedule.Event) {
				if e.Kind != schedule.EventTick {
					log.Info("schedule "+string(e.Kind), "schedule", e.Schedule, "nominal", e.Nominal, "next", e.Next, "lateness", e.Lateness, "trigger", e.Trigger, "count", e.Count)
				}
			},
		})
		if err != nil {
			return err
		}
		defer sch.Close(context.Background())
		if metricsAddr != "" {
			ln, err := net.Listen("tcp", metricsAddr)
			if err != nil {
				return fmt.Errorf("metrics listener: %w", err)
			}
			srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 10 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			fmt.Fprintf(env.stderr, "metrics on http://%s/metrics\n", ln.Addr())
		}
		fmt.Fprintf(env.stderr, "hosting the schedules of %s\n", queue)
		err = sch.Run(s.ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
}
