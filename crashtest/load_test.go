package crashtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Entities of the test, declared in the child's config file.
const (
	queueName   = "crash"
	sessionName = "crash-sessions"
)

// configJSON declares the entities. Locks last two minutes, far longer than
// a round: a message locked at the crash can be delivered again quickly
// only because locks do not survive a restart. MaxDeliveryCount is high
// enough that the abandons and SDK releases of three rounds never
// dead-letter a message.
const configJSON = `{"UserConfig":{"Namespaces":[{"Name":"crashtest","Queues":[
 {"Name":"` + queueName + `","Properties":{"LockDuration":"PT2M","MaxDeliveryCount":100}},
 {"Name":"` + sessionName + `","Properties":{"RequiresSession":true,"LockDuration":"PT2M"}}` +
	extrasQueues + extrasConfig + `]}]}}`

// shape is the size of one round's load.
type shape struct {
	producers, consumers, sessions int
	hold                           int   // messages the holder keeps locked until the crash
	ops                            int64 // acknowledged operations before the kill
}

// opKind names the acknowledged operations a round must contain before
// the broker may be killed.
type opKind int

const (
	opSend opKind = iota
	opBatch
	opComplete
	opAbandon
	opSchedule
	opCancel
	opState
	opTopic      // a send to the topic
	opFiltered   // a completion on a filtered subscription
	opDefer      // a deferral
	opDeadLetter // a dead-lettering
	opOrdered    // a send to an ordered session
	nOpKinds
)

var opNames = [nOpKinds]string{"send", "batch send", "complete", "abandon", "schedule", "cancel", "session state",
	"topic send", "subscription complete", "defer", "dead-letter", "session send"}

// load runs one round's workers against one child, counts the
// acknowledged operations and closes kill when the round has done enough.
type load struct {
	l       *ledger
	x       *extras
	connStr string
	// sessConnStr is the session workers' connection string (default
	// connStr): in a cluster, the sessions' queue may be on another node.
	sessConnStr string
	shape       shape

	crashed atomic.Bool // set just before SIGKILL: errors are expected from then on
	ops     atomic.Int64
	kinds   [nOpKinds]atomic.Int64
	held    atomic.Int64
	// pendingSched is the latest scheduled time (UnixNano) of a scheduled
	// message acknowledged and not cancelled in this round.
	pendingSched atomic.Int64

	kill     chan struct{}
	killOnce sync.Once
	wg       sync.WaitGroup
	running  sync.Map // worker name → struct{}, while it runs
}

// newLoad makes a round's load; x, when not nil, adds the extra entities'
// workers (extras_test.go) and their operations to the kill condition.
func newLoad(l *ledger, x *extras, connStr string, sh shape) *load {
	return &load{l: l, x: x, connStr: connStr, sessConnStr: connStr, shape: sh, kill: make(chan struct{})}
}

// start launches the workers; they run until ctx ends or the broker dies.
func (ld *load) start(ctx context.Context, round int) {
	run := func(name string, f func(context.Context, *azservicebus.Client) error) {
		connStr := ld.connStr
		if strings.HasPrefix(name, "session ") {
			connStr = ld.sessConnStr
		}
		ld.wg.Add(1)
		ld.running.Store(name, struct{}{})
		go func() {
			defer ld.wg.Done()
			defer ld.running.Delete(name)
			// One try, no retries: an operation the crash interrupts fails
			// and is recorded as unknown, instead of being repeated against
			// the restarted broker with another outcome.
			c, err := azservicebus.NewClientFromConnectionString(connStr,
				&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
			if err == nil {
				err = f(ctx, c)
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = c.Close(cctx)
				cancel()
			}
			if err != nil && !ld.crashed.Load() {
				ld.fail(vWorker, "%s stopped before the crash: %v", name, err)
			}
		}()
	}
	for i := range ld.shape.producers {
		run(fmt.Sprintf("producer %d", i), func(ctx context.Context, c *azservicebus.Client) error { return ld.produce(ctx, c, i) })
	}
	for i := range ld.shape.consumers {
		run(fmt.Sprintf("consumer %d", i), ld.consume)
	}
	run("holder", ld.hold)
	run("scheduler", ld.schedule)
	for i := range ld.shape.sessions {
		sid := fmt.Sprintf("s%d", i)
		run("session "+sid, func(ctx context.Context, c *azservicebus.Client) error { return ld.setStates(ctx, c, sid, round) })
	}
	if ld.x == nil {
		return
	}
	run("topic producer", ld.produceTopic)
	for i, sub := range subscriptions {
		run("subscription "+sub.name, func(ctx context.Context, c *azservicebus.Client) error { return ld.consumeSubscription(ctx, c, i) })
	}
	run("side producer", ld.produceSide)
	run("side consumer", ld.consumeSide)
	for _, sid := range orderedSessions {
		run("ordered producer "+sid, func(ctx context.Context, c *azservicebus.Client) error { return ld.produceOrdered(ctx, c, sid) })
		run("ordered consumer "+sid, func(ctx context.Context, c *azservicebus.Client) error { return ld.consumeOrdered(ctx, c, sid) })
	}
}

// fail records a worker's unexpected error as a violation.
func (ld *load) fail(kind, format string, args ...any) {
	ld.l.mu.Lock()
	defer ld.l.mu.Unlock()
	ld.l.violate(kind, nil, format, args...)
}

// done counts an acknowledged operation and closes kill once every kind
// was done, the holder holds its messages, a scheduled message is still
// waiting for its time, and the round has its number of operations.
func (ld *load) done(k opKind) {
	ld.kinds[k].Add(1)
	if ld.ops.Add(1) < ld.shape.ops || ld.held.Load() < int64(ld.shape.hold) {
		return
	}
	for i := range ld.kinds {
		if ld.kinds[i].Load() == 0 && (ld.x != nil || opKind(i) < opTopic) {
			return
		}
	}
	if time.Until(time.Unix(0, ld.pendingSched.Load())) < 300*time.Millisecond {
		return
	}
	ld.killOnce.Do(func() { close(ld.kill) })
}

// summary describes the round's acknowledged operations.
func (ld *load) summary() string {
	var parts []string
	for i := range ld.kinds {
		parts = append(parts, fmt.Sprintf("%s %d", opNames[i], ld.kinds[i].Load()))
	}
	return fmt.Sprintf("%d acknowledged operations (%s), %d messages held", ld.ops.Load(), strings.Join(parts, ", "), ld.held.Load())
}

// produce sends single messages and batches of up to 8.
func (ld *load) produce(ctx context.Context, c *azservicebus.Client, idx int) error {
	s, err := c.NewSender(queueName, nil)
	if err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		if i%3 != 0 {
			ns, msgs := ld.l.newMessages(1, time.Time{})
			err := s.SendMessage(ctx, msgs[0], nil)
			ld.l.sent(ns, err)
			if err != nil {
				return err
			}
			ld.done(opSend)
			continue
		}
		ns, msgs := ld.l.newMessages(2+(i+idx)%7, time.Time{})
		b, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			ld.l.sent(ns, err)
			return err
		}
		for _, m := range msgs {
			if err := b.AddMessage(m, nil); err != nil {
				ld.l.sent(ns, err)
				return err
			}
		}
		err = s.SendMessageBatch(ctx, b, nil)
		ld.l.sent(ns, err)
		if err != nil {
			return err
		}
		ld.done(opBatch)
	}
	return nil
}

// consume receives in peek-lock mode and completes, except that a message
// whose number is a multiple of 5 is abandoned on its first two deliveries,
// so that persisted delivery counts are exercised.
func (ld *load) consume(ctx context.Context, c *azservicebus.Client) error {
	r, err := c.NewReceiverForQueue(queueName, nil)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		msgs, err := r.ReceiveMessages(ctx, 16, nil)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, m := range msgs {
			n, ok := ld.l.delivered(m, now)
			if !ok {
				continue
			}
			if n%5 == 0 && m.DeliveryCount <= 2 {
				err := r.AbandonMessage(ctx, m, nil)
				ld.l.abandoned(n, m.DeliveryCount, err)
				if err != nil {
					return err
				}
				ld.done(opAbandon)
				continue
			}
			err := r.CompleteMessage(ctx, m, nil)
			ld.l.completed(n, err)
			if err != nil {
				return err
			}
			ld.done(opComplete)
		}
	}
	return ctx.Err()
}

// hold receives shape.hold messages and never settles them: they are
// locked at the crash and must be delivered again after the restart. At
// most half of them may be first deliveries; the holder abandons the first
// deliveries it does not keep, so that the rest are messages whose delivery
// count was raised on disk before the crash.
func (ld *load) hold(ctx context.Context, c *azservicebus.Client) error {
	r, err := c.NewReceiverForQueue(queueName, nil)
	if err != nil {
		return err
	}
	firsts := 0
	for ld.held.Load() < int64(ld.shape.hold) {
		msgs, err := r.ReceiveMessages(ctx, ld.shape.hold-int(ld.held.Load()), nil)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, m := range msgs {
			n, ok := ld.l.delivered(m, now)
			switch {
			case !ok:
			case m.DeliveryCount > 1 || firsts < ld.shape.hold/2:
				if m.DeliveryCount == 1 {
					firsts++
				}
				ld.held.Add(1)
			default:
				err := r.AbandonMessage(ctx, m, nil)
				ld.l.abandoned(n, m.DeliveryCount, err)
				if err != nil {
					return err
				}
				ld.done(opAbandon)
			}
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// schedule schedules pairs of messages 0.7 to 2 seconds ahead and cancels
// the second of each pair at once.
func (ld *load) schedule(ctx context.Context, c *azservicebus.Client) error {
	s, err := c.NewSender(queueName, nil)
	if err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		at := time.Now().Add(700*time.Millisecond + time.Duration(i%14)*100*time.Millisecond).Truncate(time.Millisecond)
		ns, msgs := ld.l.newMessages(2, at)
		seqs, err := s.ScheduleMessages(ctx, msgs, at, nil)
		ld.l.sent(ns, err)
		if err != nil {
			return err
		}
		if len(seqs) != 2 {
			ld.fail(vWorker, "ScheduleMessages of 2 messages returned %d sequence numbers", len(seqs))
			return nil
		}
		for {
			old := ld.pendingSched.Load()
			if at.UnixNano() <= old || ld.pendingSched.CompareAndSwap(old, at.UnixNano()) {
				break
			}
		}
		ld.done(opSchedule)
		ld.l.cancelling(ns[1])
		err = s.CancelScheduledMessages(ctx, seqs[1:], nil)
		ld.l.cancelled(ns[1], err)
		if sbErr := (*azservicebus.Error)(nil); errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound && !ld.crashed.Load() {
			// On a slow machine the cancel can come after the scheduled
			// time: the message is active then, and Service Bus answers
			// 404 too (the ledger counts the cancel as unknown). Before
			// its time the broker lost track of a message it acknowledged:
			// a violation. Either way the load goes on.
			if now := time.Now(); now.Before(at) {
				ld.fail(vWorker, "cancelling %s, scheduled for %v (sequence number %d) and acknowledged, failed at %v: %v",
					messageID(ns[1]), at.Format(time.StampMilli), seqs[1], now.Format(time.StampMilli), err)
			}
			continue
		}
		if err != nil {
			return err
		}
		ld.done(opCancel)
	}
	return ctx.Err()
}

// setStates locks session sid and sets its state to "sid:round:k" for
// k = 1, 2, ..., reading it back after every eighth set.
func (ld *load) setStates(ctx context.Context, c *azservicebus.Client, sid string, round int) error {
	r, err := c.AcceptSessionForQueue(ctx, sessionName, sid, nil)
	if err != nil {
		return err
	}
	for k := 1; ctx.Err() == nil; k++ {
		v := sid + ":" + strconv.Itoa(round) + ":" + strconv.Itoa(k)
		ld.l.setting(sid, v)
		err := r.SetSessionState(ctx, []byte(v), nil)
		ld.l.stateSet(sid, v, err)
		if err != nil {
			return err
		}
		ld.done(opState)
		if k%8 == 0 {
			got, err := r.GetSessionState(ctx, nil)
			if err != nil {
				return err
			}
			if string(got) != v {
				ld.fail(vReadBack, "session %s: state reads %q right after %q was acknowledged", sid, got, v)
			}
		}
	}
	return ctx.Err()
}
