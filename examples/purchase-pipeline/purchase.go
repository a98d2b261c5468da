package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/pipeline"
)

// Order is the payload every purchase task gets.
type Order struct {
	Customer string
	Email    string
	Card     string
	Items    []Item
}

// Item is one line of an order.
type Item struct {
	SKU      string
	Quantity int
	Price    float64
}

// orderBook is what the tasks of one purchase record for the later ones
// (a database in a real system).
type orderBook struct {
	mu     sync.Mutex
	number map[string]string  // job -> order number
	total  map[string]float64 // job -> total
	paid   map[string]bool
	next   int
}

// root is the original job of a (possibly resubmitted) job, job~rN: what
// the order book is keyed by.
func root(t *pipeline.Task) string {
	id, _, _ := strings.Cut(t.Job, "~r")
	return id
}

var errDeclined = errors.New("payment declined by the gateway")

func purchases(ctx context.Context, cfg config, client *azservicebus.Client, out *console) error {
	store := pipeline.NewBrokerStore(client, "purchases-failed")
	defer store.Close(context.Background())
	p, err := pipeline.New(client, "purchases", &pipeline.Options{Policy: pipeline.Stop, Store: store, MaxAttempts: 2})
	if err != nil {
		return err
	}
	book := &orderBook{number: map[string]string{}, total: map[string]float64{}, paid: map[string]bool{}, next: 1000}
	var gatewayDown atomic.Bool
	gatewayDown.Store(cfg.failPayment)
	done := &sync.Map{}
	handlers := []struct {
		typ string
		h   func(t *pipeline.Task, o Order) error
	}{
		{"order-number", func(t *pipeline.Task, o Order) error {
			book.mu.Lock()
			defer book.mu.Unlock()
			book.next++
			book.number[root(t)] = fmt.Sprintf("SO-%d", book.next)
			out.printf("[%s] 1/5 order number %s", t.Job, book.number[root(t)])
			return nil
		}},
		{"total", func(t *pipeline.Task, o Order) error {
			sum := 0.0
			for _, it := range o.Items {
				sum += float64(it.Quantity) * it.Price
			}
			book.mu.Lock()
			book.total[root(t)] = sum
			book.mu.Unlock()
			out.printf("[%s] 2/5 total %.2f", t.Job, sum)
			return nil
		}},
		{"payment", func(t *pipeline.Task, o Order) error {
			book.mu.Lock()
			total := book.total[root(t)]
			book.mu.Unlock()
			if o.Customer == "Bob" && gatewayDown.Load() {
				out.printf("[%s] 3/5 payment of %.2f on card %s: declined (attempt %d)", t.Job, total, o.Card, t.Attempt)
				return errDeclined
			}
			book.mu.Lock()
			book.paid[root(t)] = true
			book.mu.Unlock()
			out.printf("[%s] 3/5 payment of %.2f on card %s: accepted", t.Job, total, o.Card)
			return nil
		}},
		{"receipt", func(t *pipeline.Task, o Order) error {
			book.mu.Lock()
			defer book.mu.Unlock()
			if !book.paid[root(t)] {
				return pipeline.Permanent(errors.New("no receipt for an unpaid order"))
			}
			out.printf("[%s] 4/5 receipt %s.pdf", t.Job, book.number[root(t)])
			return nil
		}},
		{"email", func(t *pipeline.Task, o Order) error {
			out.printf("[%s] 5/5 e-mail with the receipt sent to %s", t.Job, o.Email)
			done.Store(t.Job, true)
			return nil
		}},
	}
	var specs []string
	for _, h := range handlers {
		specs = append(specs, h.typ)
		if err := pipeline.HandleJSON(p, h.typ, func(_ context.Context, t *pipeline.Task, o Order) error { return h.h(t, o) }); err != nil {
			return err
		}
	}
	stop := start(p)
	defer stop()

	// Job ids unique per run: the queues drop a job id seen in the last
	// hour (duplicate detection).
	suffix := fmt.Sprint(time.Now().UnixNano())
	alice := Order{Customer: "Alice", Email: "alice@example.com", Card: "4111-xxxx", Items: []Item{{"BOOK-1", 2, 12.5}, {"PEN-3", 1, 3.2}}}
	bob := Order{Customer: "Bob", Email: "bob@example.com", Card: "5500-xxxx", Items: []Item{{"LAMP-7", 1, 49.9}}}
	jobs := map[string]Order{"order-alice-" + suffix: alice, "order-bob-" + suffix: bob}
	out.printf("== purchase pipeline (stop): two orders")
	for job, o := range jobs {
		var tasks []pipeline.TaskSpec
		for _, typ := range specs {
			ts, err := pipeline.JSONTask(typ, o)
			if err != nil {
				return err
			}
			tasks = append(tasks, ts)
		}
		if err := p.Submit(ctx, job, tasks); err != nil {
			return err
		}
	}
	for job := range jobs {
		if err := waitFor(ctx, cfg.wait, "order "+job, func() bool { return ended(ctx, store, done, job) }); err != nil {
			return err
		}
	}
	if err := printFailed(ctx, store, out); err != nil {
		return err
	}
	if !cfg.failPayment {
		return nil
	}
	out.printf("== the payment gateway is back: resubmitting the failed order")
	gatewayDown.Store(false)
	bobJob := "order-bob-" + suffix
	newJob, err := p.Resubmit(ctx, bobJob, nil)
	if err != nil {
		return err
	}
	out.printf("resubmitted %s as %s", bobJob, newJob)
	if _, err := p.Resubmit(ctx, bobJob, nil); !errors.Is(err, pipeline.ErrNotFound) {
		return fmt.Errorf("a second resubmission: %v, want ErrNotFound", err)
	}
	out.printf("resubmitting %s again: nothing to do (already resubmitted)", bobJob)
	return waitFor(ctx, cfg.wait, "order "+newJob, func() bool { return ended(ctx, store, done, newJob) })
}
