package schedule_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/processor"
	"github.com/busbar-io/busbar/schedule"
)

var bg = context.Background()

func hourly(name string) schedule.Definition {
	return schedule.Definition{Name: name, Spec: schedule.Spec{Cron: "@hourly"}, Target: jobsQueue}
}

// TestClockDrift: a host whose clock is behind the broker's still fires a
// wake-up it receives "early" (the article's limbo), and one whose clock is
// ahead fires on time; neither loses nor repeats a firing.
func TestClockDrift(t *testing.T) {
	for _, drift := range []time.Duration{-45 * time.Second, -10 * time.Minute, 45 * time.Second} {
		t.Run(drift.String(), func(t *testing.T) {
			e := newEnv(t, epoch)
			_, ev := e.host(&schedule.Options{Clock: offsetClock{e.srv.Clock(), drift}})
			next := e.put(e.scheduler(nil), hourly("drift")).Next
			for range 5 {
				e.set(next)
				next = ev.waitTick(t, "drift", next)
			}
			got := e.got.firings("drift")
			poll.Until(t, 0, "5 firings", func() bool { got = e.got.firings("drift"); return len(got) == 5 })
			for i, f := range got {
				if want := epoch.Add(time.Duration(i+1) * time.Hour); !f.Nominal.Equal(want) || f.Trigger != schedule.TriggerSchedule {
					t.Errorf("firing %d: %v %s, want %v on schedule", i, f.Nominal, f.Trigger, want)
				}
			}
			if n := len(ev.of(schedule.EventStale, "")) + len(ev.of(schedule.EventMisfire, "")); n != 0 {
				t.Errorf("%d stale or misfired wake-ups", n)
			}
		})
	}
}

// TestReprogram: a changed definition takes effect at once, sooner or
// later than the old one; an unchanged one is a no-op.
func TestReprogram(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	daily := schedule.Definition{Name: "sync", Spec: schedule.Spec{Cron: "0 0 8 * * *"}, Target: jobsQueue}
	info := e.put(s, daily)
	if want := epoch.Add(8 * time.Hour); !info.Next.Equal(want) || info.Generation != 1 {
		t.Fatalf("first put: next %v generation %d", info.Next, info.Generation)
	}
	// Unchanged at start-up: nothing happens.
	again, changed, err := s.Put(bg, daily)
	if err != nil || changed || again.Generation != 1 || !again.Next.Equal(info.Next) {
		t.Fatalf("unchanged put: changed=%v generation=%d next=%v err=%v", changed, again.Generation, again.Next, err)
	}
	// Faster: every 10 minutes, from now, not after tomorrow's 08:00.
	e.set(epoch.Add(time.Hour + 3*time.Minute))
	fast := daily
	fast.Spec = schedule.Spec{Cron: "0 */10 * * * *"}
	info = e.put(s, fast)
	if want := epoch.Add(time.Hour + 10*time.Minute); !info.Next.Equal(want) || info.Generation != 2 {
		t.Fatalf("faster: next %v generation %d, want %v and 2", info.Next, info.Generation, want)
	}
	e.set(info.Next)
	next := ev.waitTick(t, "sync", info.Next)
	// A different zone: 08:00 in Oslo is 07:00Z in winter.
	zoned := daily
	zoned.Spec.TimeZone = "Europe/Oslo"
	info = e.put(s, zoned)
	if want := epoch.Add(7 * time.Hour); !info.Next.Equal(want) || info.Generation != 3 {
		t.Fatalf("zone: next %v generation %d, want %v", info.Next, info.Generation, want)
	}
	// Walk past the old 10-minute wake-up and the old 08:00Z: only the
	// 07:00Z firing happens; the replaced wake-ups were cancelled.
	e.set(info.Next)
	ev.waitTick(t, "sync", info.Next)
	e.set(epoch.Add(9 * time.Hour))
	poll.Until(t, 0, "two firings", func() bool { return len(e.got.firings("sync")) == 2 })
	got := e.got.firings("sync")
	if !got[0].Nominal.Equal(epoch.Add(time.Hour+10*time.Minute)) || !got[1].Nominal.Equal(epoch.Add(7*time.Hour)) {
		t.Fatalf("firings %v", got)
	}
	if stale := ev.of(schedule.EventStale, ""); len(stale) != 0 {
		t.Errorf("replaced wake-ups came: %v (next was %v)", stale, next)
	}
}

func TestPauseResumeTriggerDelete(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	e.put(s, hourly("p"))
	if err := s.Pause(bg, "p"); err != nil {
		t.Fatal(err)
	}
	info, err := s.Get(bg, "p")
	if err != nil || !info.Paused || !info.Next.IsZero() {
		t.Fatalf("paused: %+v %v", info, err)
	}
	e.set(epoch.Add(3*time.Hour + 30*time.Minute))
	// Trigger fires now, paused or not, without changing the schedule.
	at, err := s.Trigger(bg, "p")
	if err != nil || !at.Equal(epoch.Add(3*time.Hour+30*time.Minute)) {
		t.Fatalf("trigger: %v %v", at, err)
	}
	poll.Until(t, 0, "the triggered firing", func() bool { return len(e.got.firings("p")) == 1 })
	if f := e.got.firings("p")[0]; f.Trigger != schedule.TriggerManual || !f.Nominal.Equal(at) {
		t.Fatalf("triggered firing %+v", f)
	}
	if err := s.Resume(bg, "p"); err != nil {
		t.Fatal(err)
	}
	info, _ = s.Get(bg, "p")
	if want := epoch.Add(4 * time.Hour); info.Paused || !info.Next.Equal(want) || info.Triggered != 1 {
		t.Fatalf("resumed: %+v", info)
	}
	e.set(info.Next)
	ev.waitTick(t, "p", info.Next)
	if err := s.Delete(bg, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(bg, "p"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := s.Pause(bg, "p"); !errors.Is(err, schedule.ErrNotFound) {
		t.Fatalf("pause after delete: %v", err)
	}
	e.set(epoch.Add(10 * time.Hour))
	poll.Until(t, 0, "two firings", func() bool { return len(e.got.firings("p")) == 2 })
	if got := e.got.firings("p"); len(got) != 2 || !got[1].Nominal.Equal(epoch.Add(4*time.Hour)) {
		t.Fatalf("firings %+v", got)
	}
	list, err := s.List(bg)
	if err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %v %v", list, err)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, epoch)
	s := e.scheduler(nil)
	for _, n := range []string{"b", "a", "c"} {
		e.put(s, hourly(n))
	}
	list, err := s.List(bg)
	if err != nil || len(list) != 3 || list[0].Definition.Name != "a" || list[2].Definition.Name != "c" || !list[1].Next.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("list %+v %v", list, err)
	}
}

// TestMisfire: no host ran for five and a half hours of an hourly
// schedule; the policy decides what the first host to start sends.
func TestMisfire(t *testing.T) {
	cases := []struct {
		policy schedule.MisfirePolicy
		fired  []time.Duration
		missed int64
	}{
		{schedule.MisfireOnce, []time.Duration{1}, 4},
		{schedule.MisfireAll, []time.Duration{1, 2, 3}, 2},
		{schedule.MisfireSkip, nil, 5},
	}
	for _, c := range cases {
		t.Run(string(c.policy), func(t *testing.T) {
			e := newEnv(t, epoch)
			d := hourly("m")
			d.Misfire, d.MisfireLimit = c.policy, 3
			e.put(e.scheduler(nil), d)
			e.set(epoch.Add(5*time.Hour + 30*time.Minute))
			s, ev := e.host(nil)
			next := ev.waitTick(t, "m", epoch.Add(time.Hour))
			if want := epoch.Add(6 * time.Hour); !next.Equal(want) {
				t.Fatalf("next %v, want %v", next, want)
			}
			poll.Until(t, 0, "the misfired firings", func() bool { return len(e.got.firings("m")) == len(c.fired) })
			for i, f := range e.got.firings("m") {
				if want := epoch.Add(c.fired[i] * time.Hour); !f.Nominal.Equal(want) || f.Trigger != schedule.TriggerMisfire {
					t.Errorf("firing %d: %v %s, want %v misfire", i, f.Nominal, f.Trigger, want)
				}
			}
			info, err := s.Get(bg, "m")
			if err != nil || info.Missed != c.missed {
				t.Fatalf("missed %d, want %d (%v)", info.Missed, c.missed, err)
			}
			e.set(next)
			ev.waitTick(t, "m", next)
			poll.Until(t, 0, "the on-time firing", func() bool { return len(e.got.firings("m")) == len(c.fired)+1 })
			if f := e.got.firings("m")[len(c.fired)]; f.Trigger != schedule.TriggerSchedule || !f.Nominal.Equal(next) {
				t.Fatalf("after the misfire: %+v", f)
			}
		})
	}
}

// TestOverlap: a firing whose predecessor is still running is skipped or
// queued until the worker reports done.
func TestOverlap(t *testing.T) {
	for _, policy := range []schedule.OverlapPolicy{schedule.OverlapSkip, schedule.OverlapQueue} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t, epoch)
			s, ev := e.host(nil)
			d := hourly("o")
			d.Overlap = policy
			e.put(s, d)
			h1, h2, h3 := epoch.Add(time.Hour), epoch.Add(2*time.Hour), epoch.Add(3*time.Hour)
			e.set(h1)
			ev.waitTick(t, "o", h1)
			e.set(h2) // h1 still running
			ev.waitTick(t, "o", h2)
			first := e.got.firings("o")
			if len(first) != 1 {
				t.Fatalf("%d firings while the first runs", len(first))
			}
			if err := s.Done(bg, first[0]); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, 0, "the done report", func() bool { return len(ev.of(schedule.EventDone, "o")) == 1 })
			want := []time.Time{h1}
			if policy == schedule.OverlapQueue {
				want = append(want, h2) // sent when h1 was done
				poll.Until(t, 0, "the queued firing", func() bool { return len(e.got.firings("o")) == 2 })
				if f := e.got.firings("o")[1]; f.Trigger != schedule.TriggerQueued {
					t.Fatalf("queued firing %+v", f)
				}
				if err := s.Done(bg, e.got.firings("o")[1]); err != nil {
					t.Fatal(err)
				}
				poll.Until(t, 0, "the second done report", func() bool { return len(ev.of(schedule.EventDone, "o")) == 2 })
			}
			e.set(h3)
			ev.waitTick(t, "o", h3)
			want = append(want, h3)
			poll.Until(t, 0, "the firings", func() bool { return len(e.got.firings("o")) == len(want) })
			for i, f := range e.got.firings("o") {
				if !f.Nominal.Equal(want[i]) {
					t.Fatalf("firing %d at %v, want %v", i, f.Nominal, want[i])
				}
			}
			info, _ := s.Get(bg, "o")
			if policy == schedule.OverlapSkip && info.Skipped != 1 {
				t.Errorf("skipped %d, want 1", info.Skipped)
			}
		})
	}
}

func TestMaxFiringsAndEnd(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	max := hourly("max")
	max.MaxFirings = 2
	end := hourly("end")
	end.End = epoch.Add(90 * time.Minute)
	e.put(s, max)
	e.put(s, end)
	for _, at := range []time.Time{epoch.Add(time.Hour), epoch.Add(2 * time.Hour)} {
		e.set(at)
		for _, n := range []string{"max", "end"} {
			if n == "end" && at.After(end.End) {
				continue
			}
			ev.waitTick(t, n, at)
		}
	}
	e.set(epoch.Add(5 * time.Hour))
	for name, want := range map[string]int{"max": 2, "end": 1} {
		info, err := s.Get(bg, name)
		if err != nil || !info.Finished || !info.Next.IsZero() || info.Firings != want {
			t.Errorf("%s: %+v %v", name, info, err)
		}
	}
	poll.Until(t, 0, "three firings", func() bool { return e.got.count() == 3 })
}

func TestJitter(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	d := hourly("j")
	d.Jitter = schedule.Duration(10 * time.Minute)
	info := e.put(s, d)
	if !info.NextDue.After(info.Next) || !info.NextDue.Before(info.Next.Add(10*time.Minute)) {
		t.Fatalf("due %v for a firing at %v with 10m of jitter", info.NextDue, info.Next)
	}
	e.set(info.NextDue)
	ev.waitTick(t, "j", info.Next)
	poll.Until(t, 0, "the firing", func() bool { return len(e.got.firings("j")) == 1 })
	if f := e.got.firings("j")[0]; !f.Nominal.Equal(info.Next) {
		t.Fatalf("nominal %v, want %v", f.Nominal, info.Next)
	}
	fired := ev.of(schedule.EventFired, "j")[0]
	if fired.Lateness != info.NextDue.Sub(info.Next) {
		t.Fatalf("jittered firing handled %v after its nominal time", fired.Lateness)
	}
}

func TestPutErrors(t *testing.T) {
	e := newEnv(t, epoch)
	s := e.scheduler(nil)
	for _, d := range []schedule.Definition{
		{Name: "", Spec: schedule.Spec{Cron: "@daily"}, Target: jobsQueue},
		{Name: "x", Spec: schedule.Spec{Cron: "@daily"}},
		{Name: "x", Spec: schedule.Spec{Cron: "bad"}, Target: jobsQueue},
		{Name: "x", Spec: schedule.Spec{Cron: "@daily"}, Target: jobsQueue, Misfire: "sometimes"},
		{Name: "x", Spec: schedule.Spec{Cron: "@daily"}, Target: jobsQueue, Overlap: "maybe"},
	} {
		if _, _, err := s.Put(bg, d); err == nil {
			t.Errorf("put %+v succeeded", d)
		}
	}
	if _, err := schedule.New(nil, "q", nil); err == nil {
		t.Error("New without a client succeeded")
	}
}

// TestDoneAfter: a worker wrapped with DoneAfter reports each firing done,
// so under OverlapQueue a firing held back is sent when the work of the
// previous one finishes.
func TestDoneAfter(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	// Every two minutes, so that the first firing's message stays locked
	// (5 minutes) while its work runs past the second.
	d := schedule.Definition{Name: "w", Spec: schedule.Spec{Cron: "0 */2 * * * *"}, Target: "work", Overlap: schedule.OverlapQueue}
	if err := e.srv.Broker().CreateQueue(bg, "work", broker.QueueProperties{LockDuration: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var handled atomic.Int32
	p, err := processor.New(e.client, processor.Queue("work"), s.DoneAfter(func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		if handled.Add(1) == 1 {
			<-release // the first firing's work runs long
		}
		return nil
	}, func(err error) { t.Errorf("reporting done: %v", err) }), &processor.Options{MaxConcurrentCalls: 2, Clock: e.srv.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Run(bg) }()
	t.Cleanup(func() { _ = p.Close(bg) })
	e.put(s, d)
	h1, h2 := epoch.Add(2*time.Minute), epoch.Add(4*time.Minute)
	e.set(h1)
	ev.waitTick(t, "w", h1)
	poll.Until(t, 0, "the first firing's work to start", func() bool { return handled.Load() == 1 })
	e.set(h2)
	ev.waitTick(t, "w", h2)
	if q := ev.of(schedule.EventQueued, "w"); len(q) != 1 || !q[0].Nominal.Equal(h2) {
		t.Fatalf("queued %v", q)
	}
	close(release)
	poll.Until(t, 0, "the queued firing's work", func() bool { return handled.Load() == 2 })
	poll.Until(t, 0, "both done reports", func() bool { return len(ev.of(schedule.EventDone, "w")) == 2 })
	fired := ev.of(schedule.EventFired, "w")
	if len(fired) != 2 || !fired[1].Nominal.Equal(h2) || fired[1].Trigger != schedule.TriggerQueued {
		t.Fatalf("fired %+v", fired)
	}
}

// TestDuplicateWakeUp: a host killed after scheduling the next wake-up and
// before saving the state leaves two wake-ups for the same firing; the one
// that comes first fires it and the other is stale.
func TestDuplicateWakeUp(t *testing.T) {
	e := newEnv(t, epoch)
	s, ev := e.host(nil)
	info := e.put(s, hourly("dup"))
	snd, err := e.client.NewSender(controlQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(bg)
	name := "dup"
	orphan := &azservicebus.Message{SessionID: &name, Body: []byte{}, ApplicationProperties: map[string]any{
		"ScheduleMessage": "tick", "ScheduleGeneration": info.Generation, "ScheduledFireTime": info.Next.Format(time.RFC3339)}}
	if _, err := snd.ScheduleMessages(bg, []*azservicebus.Message{orphan}, info.Next, nil); err != nil {
		t.Fatal(err)
	}
	e.set(info.Next)
	ev.waitTick(t, "dup", info.Next)
	poll.Until(t, 0, "the second wake-up", func() bool { return len(ev.of(schedule.EventStale, "dup")) == 1 })
	poll.Until(t, 0, "the firing", func() bool { return len(e.got.firings("dup")) > 0 })
	if got := e.got.firings("dup"); len(got) != 1 || !got[0].Nominal.Equal(info.Next) {
		t.Fatalf("firings %+v", got)
	}
	if n := len(ev.of(schedule.EventFired, "dup")); n != 1 {
		t.Fatalf("%d firings sent", n)
	}
}
