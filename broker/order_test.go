package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/store"
)

// Two independent producers: the first decides sequence number 1 and its
// commit is held, as a slow fsync would; the second decides 2 and is
// durable first. A receiver must not get 2 before 1 — not on a queue, not
// in a session, not on a subscription — and when the first send fails
// instead, 2 must not wait any longer.
func TestConcurrentProducersPublishInSequenceOrder(t *testing.T) {
	type target struct {
		name string
		// setup creates the entities and returns where to send, where to
		// receive, and the session id messages carry ("" for none).
		setup func(ctx context.Context, b *Broker) (send, recv, session string)
	}
	targets := []target{
		{"queue", func(ctx context.Context, b *Broker) (string, string, string) {
			must(t, b.CreateQueue(ctx, "q", QueueProperties{}))
			return "q", "q", ""
		}},
		{"session", func(ctx context.Context, b *Broker) (string, string, string) {
			must(t, b.CreateQueue(ctx, "q", QueueProperties{RequiresSession: true}))
			return "q", "q", "s1"
		}},
		{"subscription", func(ctx context.Context, b *Broker) (string, string, string) {
			must(t, b.CreateTopic(ctx, "t", TopicProperties{}))
			must(t, b.CreateSubscription(ctx, "t", "a", SubscriptionProperties{}))
			must(t, b.CreateSubscription(ctx, "t", "b", SubscriptionProperties{}))
			return "t", "t/Subscriptions/b", ""
		}},
	}
	for _, tg := range targets {
		for _, fail := range []bool{false, true} {
			name := tg.name
			if fail {
				name += "/first fails"
			}
			t.Run(name, func(t *testing.T) {
				b, g := openGated(t, clock.NewFake(t0), 3, failWith(fail))
				ctx := context.Background()
				sendTo, recvFrom, session := tg.setup(ctx, b)
				s := consumeInto(t, b, recvFrom, session, ReceiveAndDelete, 10)
				m := func(body string) *Message { return &Message{Body: []byte(body), SessionID: session} }

				g.arm()
				first := b.SendAsync(ctx, sendTo, []*Message{m("1")}, nil, nil)
				<-g.entered // the first producer's commit is held
				second := b.SendAsync(ctx, sendTo, []*Message{m("2")}, nil, nil)
				ent, _, err := b.resolve(recvFrom)
				must(t, err)
				q := ent.q
				poll.Until(t, 10*time.Second, "the second send committed and held back", func() bool {
					q.mu.Lock()
					defer q.mu.Unlock()
					return len(q.order.held) == 1
				})
				// Its acknowledgement waits for its message to be available.
				select {
				case <-second.done:
					t.Fatal("the second send was acknowledged while its message was held")
				default:
				}
				if got := s.take(); len(got) != 0 {
					t.Fatalf("delivered %q while sequence number 1 was still being committed", bodies(got))
				}
				close(g.release)
				if seqs, err := second.Wait(); err != nil || len(seqs) != 1 {
					t.Fatalf("second send: %v %v", seqs, err)
				}
				_, err = first.Wait()
				if fail != (err != nil) {
					t.Fatalf("first send: %v, want failure %v", err, fail)
				}
				wantPublished(t, b, s, fail, "1", "2")
			})
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ store.Store = (*gatedStore)(nil)

// A scheduled message that becomes active takes a new sequence number; a
// send decided before it, with a lower number and still committing, is
// published first: the activation waits for it (or for its failure).
func TestActivationWaitsForAnEarlierSend(t *testing.T) {
	for _, session := range []string{"", "s1"} {
		for _, fail := range []bool{false, true} {
			name := fmt.Sprintf("session %q, send fails %v", session, fail)
			t.Run(name, func(t *testing.T) {
				clk := clock.NewFake(t0)
				b, g := openGated(t, clk, 4, failWith(fail))
				ctx := context.Background()
				must(t, b.CreateQueue(ctx, "q", QueueProperties{RequiresSession: session != ""}))
				m := func(body string) *Message { return &Message{Body: []byte(body), SessionID: session} }
				if _, err := b.Schedule(ctx, "q", t0.Add(30*time.Second), []*Message{m("activated")}); err != nil {
					t.Fatal(err)
				}
				s := consumeInto(t, b, "q", session, PeekLock, 10)

				g.arm()
				send := b.SendAsync(ctx, "q", []*Message{m("sent")}, nil, nil)
				// The send's number is decided; its commit is held. The
				// scheduled message becomes active (within the session's lock).
				<-g.entered
				clk.Advance(30 * time.Second)
				// The activation has committed (the fake clock ran it):
				// its message must wait for the lower number.
				if got := s.take(); len(got) != 0 {
					t.Fatalf("delivered %q while an earlier send was still committing", bodies(got))
				}
				close(g.release)
				_, err := send.Wait()
				if fail != (err != nil) {
					t.Fatalf("send: %v, want failure %v", err, fail)
				}
				got := wantPublished(t, b, s, fail, "sent", "activated")
				for i := 1; i < len(got); i++ {
					if got[i].SequenceNumber <= got[i-1].SequenceNumber {
						t.Fatalf("delivered %d after %d", got[i].SequenceNumber, got[i-1].SequenceNumber)
					}
				}
			})
		}
	}
}

// wantPublished waits for the deliveries want, in that order, and checks
// the broker's invariants. want[0] is the message whose commit the gated
// store held: it is not delivered when heldFailed.
func wantPublished(t *testing.T, b *Broker, s *sink, heldFailed bool, want ...string) []*Message {
	t.Helper()
	if heldFailed {
		want = want[1:]
	}
	got := s.takeN(t, len(want))
	wantBodies(t, got, want...)
	mustHoldInvariants(t, b)
	return got
}

// failWith is the held commit's failure when fail is set.
func failWith(fail bool) error {
	if fail {
		return errors.New("disk on fire")
	}
	return nil
}
