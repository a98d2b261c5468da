package servicebus_test

import (
	"context"
	"fmt"
	"github.com/busbar-io/busbar/internal/poll"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/broker"
)

// countingMetrics records the handler's metric events.
type countingMetrics struct {
	mu     sync.Mutex
	opened int
	closed int
	links  map[string]int // "+entity/role" attached, "-entity/role" detached
}

func (m *countingMetrics) ConnectionOpened() { m.mu.Lock(); m.opened++; m.mu.Unlock() }
func (m *countingMetrics) ConnectionClosed() { m.mu.Lock(); m.closed++; m.mu.Unlock() }
func (m *countingMetrics) LinkAttached(entity string, receiving bool) {
	m.count(fmt.Sprintf("+%s/%v", entity, receiving))
}
func (m *countingMetrics) LinkDetached(entity string, receiving bool) {
	m.count(fmt.Sprintf("-%s/%v", entity, receiving))
}
func (m *countingMetrics) count(k string) { m.mu.Lock(); m.links[k]++; m.mu.Unlock() }

func TestMetricsHooks(t *testing.T) {
	m := &countingMetrics{links: map[string]int{}}
	e := newEnv(t, envOptions{metrics: m})
	e.queue("q", broker.QueueProperties{})
	c := e.client()
	mustSend(t, c, "q", &azservicebus.Message{Body: []byte("x")})
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	links := map[string]int{}
	poll.UntilNil(t, 10*time.Second, "the connection opened and closed", func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.opened != 1 || m.closed != 1 {
			return fmt.Errorf("connections opened %d closed %d", m.opened, m.closed)
		}
		for k, v := range m.links {
			links[k] = v
		}
		return nil
	})
	// Every attached link was detached.
	var keys []string
	for k, v := range links {
		if k[0] == '+' && links["-"+k[1:]] != v {
			t.Fatalf("%s attached %d times, detached %d", k[1:], v, links["-"+k[1:]])
		}
		keys = append(keys, k)
	}
	for _, want := range []string{"+q/false", "+$cbs/false", "+$cbs/true", "+q/$management/false", "+q/$management/true"} {
		if links[want] == 0 {
			t.Fatalf("no %s in %v", want, keys)
		}
	}
}
