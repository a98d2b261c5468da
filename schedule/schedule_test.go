package schedule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/schedule"
	"github.com/prometheus/client_golang/prometheus"
)

func TestFiredMessage(t *testing.T) {
	e := newEnv(t, epoch)
	reg := prometheus.NewRegistry()
	s, ev := e.host(&schedule.Options{Registerer: reg})
	info := e.put(s, schedule.Definition{Name: "report", Spec: schedule.Spec{Every: schedule.Duration(time.Hour)}, Target: jobsQueue,
		Message: schedule.Message{Subject: "RunReport", Body: []byte(`{"kind":"weekly"}`), Properties: map[string]any{"Tenant": "acme"}}})
	if want := epoch.Add(time.Hour); !info.Next.Equal(want) {
		t.Fatalf("next = %v, want %v", info.Next, want)
	}
	first := epoch.Add(time.Hour)
	e.set(first)
	second := ev.waitTick(t, "report", first)
	if !second.Equal(epoch.Add(2 * time.Hour)) {
		t.Fatalf("next after the first firing = %v", second)
	}
	e.set(second)
	ev.waitTick(t, "report", second)
	poll.Until(t, 0, "two firings", func() bool { return e.got.count() == 2 })
	msgs := e.got.all()
	for i, nominal := range []time.Time{first, second} {
		m := msgs[i]
		p := m.ApplicationProperties
		if p["ScheduleName"] != "report" || p["ScheduledFireTime"] != nominal.Format(time.RFC3339) || p["Tenant"] != "acme" || p["ScheduleTrigger"] != "schedule" {
			t.Errorf("firing %d properties = %v", i, p)
		}
		if m.MessageID != schedule.FiringID("report", nominal) || m.MessageID != "report@"+nominal.Format("20060102T150405Z") {
			t.Errorf("firing %d MessageId = %q", i, m.MessageID)
		}
		if m.CorrelationID == nil || *m.CorrelationID != schedule.ConversationID("report", nominal) || p["ConversationId"] != *m.CorrelationID {
			t.Errorf("firing %d correlation id %v, conversation %v", i, m.CorrelationID, p["ConversationId"])
		}
		if m.Subject == nil || *m.Subject != "RunReport" || string(m.Body) != `{"kind":"weekly"}` {
			t.Errorf("firing %d subject %v body %q", i, m.Subject, m.Body)
		}
	}
	if *msgs[0].CorrelationID == *msgs[1].CorrelationID {
		t.Error("two firings share a conversation")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = fmt.Sprint(m.GetCounter().GetValue())
			case m.GetHistogram() != nil:
				got[key] = fmt.Sprint(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for key, want := range map[string]string{"busbar_schedule_firings_total{trigger=schedule}": "2",
		"busbar_schedule_changes_total{op=put}": "1", "busbar_schedule_lateness_seconds": "2"} {
		if got[key] != want {
			t.Errorf("metric %s = %q, want %s (all: %v)", key, got[key], want, got)
		}
	}
}
