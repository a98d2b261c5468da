//go:build linux

package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/busbar-io/busbar/internal/poll"
	"github.com/busbar-io/busbar/internal/serveproc"
)

const (
	fullQueue = "full"
	// fullVolumeMB is the size of the tmpfs volume under the data
	// directory, and fullReserveMB the free space busbar keeps on it
	// (--min-free-mb).
	fullVolumeMB  = 192
	fullReserveMB = 48
	// fullBodySize is the size of each message the test sends.
	fullBodySize = 128 << 10
)

// The queue may hold more than the volume: the volume, not the entity's
// quota, must be what refuses the sends.
const fullConfigJSON = `{"UserConfig":{"Namespaces":[{"Name":"fulldisk","Queues":[
 {"Name":"` + fullQueue + `","Properties":{"LockDuration":"PT2M","MaxSizeInMegabytes":5120}}]}]}}`

// fullBody is the body of message n: its number, then a pattern that
// depends on it, so a damaged or swapped body shows.
func fullBody(n int) []byte {
	b := make([]byte, fullBodySize)
	copy(b, strconv.Itoa(n)+":")
	for i := 16; i < len(b); i++ {
		b[i] = byte(n*7 + i)
	}
	return b
}

// mountVolume mounts a tmpfs of sizeMB at a new directory and returns it;
// the test is skipped when the process may not mount (not root).
func mountVolume(t *testing.T, sizeMB int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the full-disk test mounts a small tmpfs volume, which needs root")
	}
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", vol, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", sizeMB)); err != nil {
		t.Skipf("cannot mount a tmpfs volume (%v): the full-disk test needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(vol, 0); err != nil {
			t.Errorf("unmounting %s: %v", vol, err)
		}
	})
	return vol
}

func availBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// isQuotaError reports whether err is the AMQP error Service Bus answers a
// send to a full entity with (QuotaExceeded in the SDKs).
func isQuotaError(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Condition == amqp.ErrCondResourceLimitExceeded
}

// TestFullDisk fills the data volume of `busbar serve` (a tmpfs) and
// checks that sends are then refused with Service Bus's quota error, that
// receives and completions go on, that every stored message is intact,
// that sends resume once space returns, and that a restart finds exactly
// the messages acknowledged and not completed.
func TestFullDisk(t *testing.T) {
	vol := mountVolume(t, fullVolumeMB)
	tmp := t.TempDir()
	bin := buildBusbar(t, tmp)
	cfg := filepath.Join(tmp, "Config.json")
	if err := os.WriteFile(cfg, []byte(fullConfigJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(vol, "data")
	args := []string{"--min-free-mb", strconv.Itoa(fullReserveMB)}
	c := startChild(t, bin, data, cfg, args...)
	client := newClient(t, c)
	sender, err := client.NewSender(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Another tenant of the volume leaves busbar 16 MiB above its reserve.
	ballast := filepath.Join(vol, "ballast")
	fill := availBytes(t, vol) - (fullReserveMB+16)<<20
	if err := os.WriteFile(ballast, make([]byte, fill), 0o600); err != nil {
		t.Fatalf("writing %d bytes of ballast: %v", fill, err)
	}

	// Send until the volume is full: every send is either acknowledged or
	// refused with the quota error.
	stored := map[int]bool{} // acknowledged and not completed
	n, refusedAt := 0, -1
	for ; n < 1000 && refusedAt < 0; n++ {
		err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(strconv.Itoa(n)), Body: fullBody(n)}, nil)
		switch {
		case err == nil:
			stored[n] = true
		case isQuotaError(err):
			refusedAt = n
			t.Logf("send %d refused, %d MiB free: %v", n, availBytes(t, vol)>>20, err)
		default:
			t.Fatalf("send %d failed with %v, not the quota error", n, err)
		}
	}
	if refusedAt < 0 {
		t.Fatalf("%d sends of %d KiB were all accepted on a %d MiB volume", n, fullBodySize>>10, fullVolumeMB)
	}
	if len(stored) < 64 {
		t.Fatalf("only %d sends were accepted before the first refusal; want the 16 MiB above the reserve used", len(stored))
	}
	// While the volume is full every send is refused, batches too.
	for i := range 3 {
		err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr("late-" + strconv.Itoa(i)), Body: []byte("x")}, nil)
		if !isQuotaError(err) {
			t.Fatalf("send on a full volume: %v, want the quota error (amqp:resource-limit-exceeded)", err)
		}
	}

	// Receives and completions go on.
	r, err := client.NewReceiverForQueue(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	completed := 0
	for completed < 40 {
		msgs, err := r.ReceiveMessages(ctx, 40-completed, nil)
		if err != nil {
			t.Fatalf("receive on a full volume: %v", err)
		}
		for _, m := range msgs {
			k := checkFullMessage(t, m)
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete on a full volume: %v", err)
			}
			delete(stored, k)
			completed++
		}
	}
	// Nothing stored is damaged.
	checkStored(t, client, stored, false)

	// Sends resume once space returns.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	next := n
	poll.UntilNil(t, 10*time.Second, "a send after the ballast was removed", func() error {
		err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(strconv.Itoa(next)), Body: fullBody(next)}, nil)
		if err == nil {
			stored[next] = true
		} else if !isQuotaError(err) {
			t.Fatalf("send after space returned: %v", err)
		}
		next++
		return err
	})

	// After a crash, exactly what was acknowledged and not completed is
	// there.
	closeClient(client)
	kill(t, c)
	c = startChild(t, bin, data, cfg, args...)
	client = newClient(t, c)
	defer closeClient(client)
	checkStored(t, client, stored, false)
	terminate(t, c)
}

func newClient(t *testing.T, c *serveproc.Process) *azservicebus.Client {
	t.Helper()
	client, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// checkFullMessage checks a message's body against its id and returns its
// number.
func checkFullMessage(t *testing.T, m *azservicebus.ReceivedMessage) int {
	t.Helper()
	k, err := strconv.Atoi(m.MessageID)
	if err != nil {
		t.Fatalf("message %q: not one the test sent", m.MessageID)
	}
	if !bytes.Equal(m.Body, fullBody(k)) {
		t.Fatalf("message %d: its body (%d bytes) is not the one sent", k, len(m.Body))
	}
	return k
}

// checkStored peeks the whole queue: it must hold every message of want,
// each with its body intact, and, unless others is set, no other message
// (others allows those whose send failed: they may or may not be stored).
func checkStored(t *testing.T, client *azservicebus.Client, want map[int]bool, others bool) {
	t.Helper()
	r, err := client.NewReceiverForQueue(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer func() { _ = r.Close(ctx) }()
	seen := map[int]bool{}
	from := int64(0)
	for {
		msgs, err := r.PeekMessages(ctx, 4, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			t.Fatalf("peek: %v", err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			k := checkFullMessage(t, m)
			if !want[k] && !others {
				t.Errorf("message %d is stored, but its send was refused or its completion acknowledged", k)
			}
			if seen[k] {
				t.Errorf("message %d is stored twice", k)
			}
			seen[k] = true
			from = *m.SequenceNumber + 1
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("message %d was acknowledged and not completed, but is not stored", k)
		}
	}
}

// TestFullDiskWithoutReserve turns the reserve off (--min-free-mb -1) and
// fills the volume for real: the broker must not acknowledge a send it
// could not write. Pebble does not go on after a failed WAL write, so
// busbar stops; once space is freed, a restart finds every acknowledged
// message intact.
func TestFullDiskWithoutReserve(t *testing.T) {
	vol := mountVolume(t, 96)
	tmp := t.TempDir()
	bin := buildBusbar(t, tmp)
	cfg := filepath.Join(tmp, "Config.json")
	if err := os.WriteFile(cfg, []byte(fullConfigJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(vol, "data")
	args := []string{"--min-free-mb", "-1"}
	c := startChild(t, bin, data, cfg, args...)
	client := newClient(t, c)
	sender, err := client.NewSender(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ballast := filepath.Join(vol, "ballast")
	if err := os.WriteFile(ballast, make([]byte, availBytes(t, vol)-8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	stored := map[int]bool{}
	var failure error
	for n := 0; n < 1000 && failure == nil; n++ {
		if failure = sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(strconv.Itoa(n)), Body: fullBody(n)}, nil); failure == nil {
			stored[n] = true
		}
	}
	if failure == nil {
		t.Fatalf("1000 sends of %d KiB were all accepted on a full volume", fullBodySize>>10)
	}
	t.Logf("%d sends acknowledged, then: %v", len(stored), failure)
	select {
	case <-c.Exited():
		t.Logf("busbar stopped: %s", lastLine(c.Log(), "fatal"))
	case <-time.After(exitTimeout):
		t.Fatalf("busbar still runs %v after its volume filled up:\n%s", exitTimeout, c.LogTail(4000))
	}
	closeClient(client)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	c = startChild(t, bin, data, cfg, args...)
	client = newClient(t, c)
	defer closeClient(client)
	checkStored(t, client, stored, true)
	terminate(t, c)
}
