//go:build linux

package crashtest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/busbar-io/busbar/internal/lazyfs"
	"github.com/busbar-io/busbar/internal/serveproc"
)

// envPowerChild marks the re-executed test binary of
// TestPowerLossCatchesAckBeforeSync.
const envPowerChild = "BUSBAR_CRASHTEST_POWER_CHILD"

// mountLazy mounts a lazy file system (internal/lazyfs) as the data
// directory, or skips the test when this machine cannot mount FUSE.
func mountLazy(t *testing.T) (*lazyfs.FS, string) {
	t.Helper()
	if err := lazyfs.Available(); err != nil {
		t.Skipf("the power-loss test needs FUSE (/dev/fuse, as root): %v", err)
	}
	tmp := t.TempDir()
	mnt, cache, disk := filepath.Join(tmp, "data"), filepath.Join(tmp, "cache"), filepath.Join(tmp, "disk")
	for _, d := range []string{mnt, cache, disk} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := lazyfs.Mount(mnt, cache, disk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fs.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return fs, mnt
}

// TestPowerLoss is TestCrash with the data directory on a file system that
// forgets everything not fsynced when the power goes: after each SIGKILL
// the power is cut, every other round tearing the unsynced tail of each
// file (a random prefix of it survives). A SIGKILL alone keeps the page
// cache, so it cannot tell a broker that fsyncs before acknowledging from
// one that only writes; this test can.
func TestPowerLoss(t *testing.T) {
	fs, data := mountLazy(t)
	rounds, sh := 3, shape{producers: 4, consumers: 3, sessions: 3, hold: 24, ops: 1500}
	if testing.Short() {
		rounds, sh.ops = 2, 600
	}
	crash(t, crashRun{rounds: roundsOr(t, rounds), shape: sh, data: data,
		afterKill: func(t *testing.T, round int, rnd *rand.Rand) {
			torn := round%2 == 0
			lost, err := fs.PowerOff(torn, rnd)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: power cut (torn tails: %v); %d files lost unsynced data; %d fsyncs so far", round, torn, lost, fs.Syncs())
		}})
}

// TestPowerLossCatchesAckBeforeSync builds busbar with the tag
// busbar_ackbeforesync, whose store acknowledges commits written to the
// page cache but not fsynced, and runs TestPowerLoss against it in a child
// test process: the child must fail with acknowledged messages lost. This
// is what shows that TestPowerLoss can fail.
func TestPowerLossCatchesAckBeforeSync(t *testing.T) {
	if os.Getenv(envPowerChild) != "" {
		t.Skip("this is the child run")
	}
	if err := lazyfs.Available(); err != nil {
		t.Skipf("the power-loss test needs FUSE (/dev/fuse, as root): %v", err)
	}
	tmp := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "busbar-ackbeforesync")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if err := serveproc.Build(ctx, root, bin, "-tags", "busbar_ackbeforesync"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerLoss$", "-test.count=1", "-test.short", "-test.v")
	cmd.Env = append(os.Environ(), envBinary+"="+bin, envPowerChild+"=1", envRounds+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the power-loss test against the ack-before-fsync build did not fail (%v):\n%s", err, tail(out.String(), 4000))
	}
	if !strings.Contains(out.String(), " lost") || !strings.Contains(out.String(), "violations") {
		t.Fatalf("the power-loss test against the ack-before-fsync build failed, but not with lost messages:\n%s", tail(out.String(), 4000))
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "violations:") {
			t.Logf("the ack-before-fsync build fails as it must: %s", strings.TrimSpace(line))
			break
		}
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestFsyncFailure makes the data directory's fsyncs fail with EIO while a
// producer sends, as a failing disk does: no send may be acknowledged from
// then on (the broker must not claim what it could not sync), and busbar
// must stop. The power is then cut, tearing the unsynced tails, and a
// restart on healthy storage must find every acknowledged message intact
// and serve again.
func TestFsyncFailure(t *testing.T) {
	fs, data := mountLazy(t)
	tmp := t.TempDir()
	bin := buildBusbar(t, tmp)
	cfg := filepath.Join(tmp, "Config.json")
	if err := os.WriteFile(cfg, []byte(fullConfigJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, bin, data, cfg)
	client := newClient(t, c)
	sender, err := client.NewSender(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stored := map[int]bool{}
	send := func(n int) error {
		err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr(strconv.Itoa(n)), Body: fullBody(n)}, nil)
		if err == nil {
			stored[n] = true
		}
		return err
	}
	for n := range 20 {
		if err := send(n); err != nil {
			t.Fatalf("send %d on healthy storage: %v", n, err)
		}
	}
	fs.FailSyncs(true)
	refused := 0
	for n := 20; n < 30; n++ {
		if err := send(n); err != nil {
			refused++
			if n == 20 {
				t.Logf("send with failing fsync: %v", err)
			}
		}
	}
	if refused != 10 {
		t.Errorf("%d of 10 sends were acknowledged while every fsync failed", 10-refused)
	}
	// Pebble cannot go on after a failed WAL write or sync (whether the
	// data reached the disk is unknown): busbar stops, and its supervisor
	// restarts it, as PostgreSQL does after a failed fsync.
	select {
	case <-c.Exited():
		t.Logf("busbar stopped after the failed fsync, as it must: %s", lastLine(c.Log(), "fatal"))
	case <-time.After(exitTimeout):
		t.Fatalf("busbar still runs %v after its fsyncs failed", exitTimeout)
	}
	closeClient(client)
	if _, err := fs.PowerOff(true, newRand(t)); err != nil {
		t.Fatal(err)
	}
	c = startChild(t, bin, data, cfg)
	client = newClient(t, c)
	defer closeClient(client)
	checkStored(t, client, stored, true)
	sender, err = client.NewSender(fullQueue, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := send(100); err != nil {
		t.Errorf("send after the restart: %v", err)
	}
	terminate(t, c)
}

// lastLine returns the last line of log that contains s.
func lastLine(log, s string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}
