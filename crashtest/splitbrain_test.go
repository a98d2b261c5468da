//go:build unix

package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/cluster"
	"github.com/busbar-io/busbar/internal/poll"
)

// TestPausedNodeIsFenced stops the node serving a queue with SIGSTOP past
// its lease, while a client connected straight to it has a send in flight;
// another node takes the queue over and serves it. Continued with SIGCONT,
// the paused node must not acknowledge that send nor any later one: its
// commits carry the old lease's epoch and PostgreSQL refuses them. Later
// sends through it are forwarded to the new owner. The queue then holds
// exactly the messages that were acknowledged.
func TestPausedNodeIsFenced(t *testing.T) {
	cl := startCluster(t)
	victim := waitOwner(t, cl.st, queueName)
	direct, err := azservicebus.NewClientFromConnectionString(cl.procs[victim].ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(direct)
	ctx := context.Background()
	ds, err := direct.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	sendOne := func(s *azservicebus.Sender, id string) error {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := s.SendMessage(sctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil)
		if err == nil {
			acked = append(acked, id)
		}
		return err
	}
	for i := range 10 {
		if err := sendOne(ds, fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	pid := cl.procs[victim].PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// kill returns once the signal is sent, not once every thread has
	// stopped: on a busy machine the node could still take the send below
	// and commit it under its lease, a legitimate acknowledgement that
	// this test would then judge.
	waitStopped(t, pid)
	stopped := time.Now()
	late := make(chan error, 1)
	go func() {
		id := "late"
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		late <- ds.SendMessage(sctx, &azservicebus.Message{MessageID: &id, Body: []byte(id)}, nil)
	}()
	served := waitServed(t, cl.connStr)
	if o := waitOwner(t, cl.st, queueName); o == victim {
		t.Fatalf("the queue is served through the balancer, but its lease is still %s's", victim)
	}
	taker, takenEpoch, err := cluster.LeaseOf(ctx, cl.st, queueName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("queue taken over %v after SIGSTOP (lease %v)", served.Sub(stopped).Round(time.Millisecond), failoverLease)
	routed, err := azservicebus.NewClientFromConnectionString(cl.connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(routed)
	rs, err := routed.NewSender(queueName, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := sendOne(rs, fmt.Sprint("after-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Resumed, the node sees it lost its lease; placement may give the
	// queue back to it at once, under a new lease. A send it acknowledges
	// must be under such a lease of its own: acknowledged while another
	// node held the queue, it would be split brain.
	if err := <-late; err == nil {
		// The lease the other node took must have ended since: were it
		// still the one (same epoch), the paused node acknowledged under
		// its old lease. The owner itself may have moved on again.
		o, epoch, err := cluster.LeaseOf(ctx, cl.st, queueName)
		if err != nil {
			t.Fatal(err)
		}
		if o == taker && epoch == takenEpoch {
			t.Fatalf("the paused node acknowledged a send while %s held the queue under the lease it took (epoch %d)", taker, epoch)
		}
		acked = append(acked, "late")
		t.Logf("the resumed node took the queue back under a new lease before it read the send in flight, and acknowledged it (lease epoch %d → %d, now %s's)", takenEpoch, epoch, o)
	} else {
		t.Logf("the send in flight through the paused node: %v", err)
	}
	// The resumed node no longer serves the queue: a send through it is
	// forwarded to the new owner, which acknowledges it (sendOne records
	// it, and the check below finds it in the queue exactly once).
	if err := sendOne(ds, "later"); err != nil {
		t.Logf("a send through the resumed node: %v", err)
	}
	// Exactly the acknowledged messages are in the queue.
	r, err := routed.NewReceiverForQueue(queueName, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	// Until every acknowledged send is back, then one quiet second more
	// for any that should not be there. Ownership may still be settling
	// after the resume: the routed link can take more than a second to be
	// served, so a quiet second alone does not end the wait (it did, and
	// the check saw an empty queue).
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		msgs, err := r.ReceiveMessages(rctx, 100, nil)
		cancel()
		if err != nil && !isCtxErr(err) {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			if len(got) >= len(acked) || time.Now().After(deadline) {
				break
			}
			continue
		}
		for _, m := range msgs {
			got = append(got, m.MessageID)
		}
	}
	sort.Strings(got)
	sort.Strings(acked)
	if strings.Join(got, ",") != strings.Join(acked, ",") {
		t.Fatalf("the queue holds %v, the acknowledged sends were %v", got, acked)
	}
	cl.stop(t)
}

// waitStopped returns once every thread of process pid is stopped (state T
// in /proc/<pid>/task/*/stat). Where there is no /proc it returns at once.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	if _, err := os.Stat(dir); err != nil {
		t.Logf("cannot watch the threads of %d stop (%v); going on", pid, err)
		return
	}
	poll.UntilNil(t, 10*time.Second, "the paused node's threads to stop", func() error {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				continue // the thread ended
			}
			// pid (comm) state …: comm may hold spaces and parentheses.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) {
				return fmt.Errorf("thread %s: stat %q", task.Name(), stat)
			}
			if st := stat[i+2]; st != 'T' && st != 't' {
				return fmt.Errorf("thread %s is in state %c", task.Name(), st)
			}
		}
		return nil
	})
}
