package console

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/sas"
)

// sample is one entity's state at one time.
type sample struct {
	T          int64   `json:"t"`   // Unix seconds
	In         float64 `json:"in"`  // messages per second since the previous sample
	Out        float64 `json:"out"` // messages per second
	Active     int64   `json:"active"`
	DeadLetter int64   `json:"deadLetter"`
	Scheduled  int64   `json:"scheduled"`
}

// ring holds an entity's last samples.
type ring struct {
	s       []sample
	next    int
	full    bool
	in, out float64 // the running totals at the last sample
}

// sampler keeps the last hour of samples of every entity.
type sampler struct {
	mu   sync.Mutex
	size int
	m    map[string]*ring
}

func newSampler(size int) *sampler {
	return &sampler{size: max(size, 2), m: map[string]*ring{}}
}

// add records a sample of path, with the running totals of messages in and out.
func (s *sampler) add(path string, now time.Time, rt broker.RuntimeInfo, in, out float64) {
	r := s.m[path]
	if r == nil {
		r = &ring{s: make([]sample, s.size), in: in, out: out}
		s.m[path] = r
	}
	x := sample{T: now.Unix(), Active: rt.ActiveMessageCount, DeadLetter: rt.DeadLetterMessageCount, Scheduled: rt.ScheduledMessageCount}
	if prev := r.last(); prev != nil && x.T > prev.T {
		dt := float64(x.T - prev.T)
		x.In, x.Out = max(in-r.in, 0)/dt, max(out-r.out, 0)/dt
	}
	r.in, r.out = in, out
	r.s[r.next] = x
	r.next = (r.next + 1) % len(r.s)
	r.full = r.full || r.next == 0
}

func (r *ring) last() *sample {
	if !r.full && r.next == 0 {
		return nil
	}
	return &r.s[(r.next-1+len(r.s))%len(r.s)]
}

// rates returns the last in and out rates of path.
func (s *sampler) rates(path string) (in, out float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.m[path]; r != nil {
		if x := r.last(); x != nil {
			return x.In, x.Out
		}
	}
	return 0, 0
}

// series returns path's samples, oldest first.
func (s *sampler) series(path string) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.m[path]
	if r == nil {
		return []sample{}
	}
	if !r.full {
		return append([]sample{}, r.s[:r.next]...)
	}
	return append(append([]sample{}, r.s[r.next:]...), r.s[:r.next]...)
}

// sample runs until the console closes, taking a sample at once and then
// every SampleEvery.
func (c *Console) sample() {
	defer c.wg.Done()
	t := time.NewTicker(c.o.SampleEvery)
	defer t.Stop()
	for {
		c.takeSample(c.ctx)
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// takeSample samples every entity once; entities gone are dropped.
func (c *Console) takeSample(ctx context.Context) {
	var in, out map[string]float64
	if c.o.Counters != nil {
		in, out = c.o.Counters()
	}
	now := c.now()
	seen := map[string]bool{}
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	add := func(path string, rt broker.RuntimeInfo) {
		seen[path] = true
		c.stats.add(path, now, rt, in[path], out[path])
	}
	qs, err := c.b.ListQueues(ctx, 0, 0)
	if err != nil {
		return
	}
	for _, q := range qs {
		add(q.Name, q.Runtime)
	}
	ts, err := c.b.ListTopics(ctx, 0, 0)
	if err != nil {
		return
	}
	for _, t := range ts {
		add(t.Name, t.Runtime)
		subs, _ := c.b.ListSubscriptions(ctx, t.Name, 0, 0)
		for _, s := range subs {
			add(t.Name+"/Subscriptions/"+s.Name, s.Runtime)
		}
	}
	for p := range c.stats.m {
		if !seen[p] {
			delete(c.stats.m, p)
		}
	}
}

// entityStats answers the samples of the last hour of an entity.
func (c *Console) entityStats(w http.ResponseWriter, r *http.Request, p *principal) error {
	path := r.URL.Query().Get("path")
	if _, err := splitPath(path); err != nil {
		return err
	}
	if err := c.need(p, path, sas.Listen); err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"every": c.o.SampleEvery.Seconds(), "samples": c.stats.series(path)})
}
