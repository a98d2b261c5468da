package pebble

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/busbar-io/busbar/store"
)

// The crash test proves "acknowledged means durable" and "a batch is all or
// nothing" against real SIGKILLs. The parent re-executes this test binary as
// a child that commits multi-key batches from many goroutines and prints the
// id of each batch as soon as its Commit returns. The parent kills the child
// after a few thousand acknowledgements, reopens the directory and checks:
//
//  1. every acknowledged batch is present, whole;
//  2. every batch present is whole (each of its keys, with its value);
//  3. per goroutine, the batches present are a prefix of its sequence (each
//     was committed only after the previous one was acknowledged), and the
//     goroutine's marker key, which each batch moves with a delete and a set,
//     names the last batch present: the delete and the set were atomic with
//     the rest of the batch.
//
// Rounds repeat on the same directory, so each child also recovers the WAL
// and sstables a killed predecessor left behind.

const (
	crashDirEnv   = "BUSBAR_STORE_CRASH_DIR"
	crashRoundEnv = "BUSBAR_STORE_CRASH_ROUND"
	crashWriters  = 32
	crashRounds   = 3
)

// crashID packs round, writer and sequence into a batch id.
func crashID(round, writer, seq int) uint64 {
	return uint64(round)<<48 | uint64(writer)<<32 | uint64(seq)
}

func splitCrashID(id uint64) (round, writer, seq int) {
	return int(id >> 48), int(id >> 32 & 0xffff), int(id & 0xffffffff)
}

// crashKeys is how many keys batch id sets: 2 to 6.
func crashKeys(id uint64) int { return 2 + int(id%5) }

func crashKey(id uint64, i int) []byte { return fmt.Appendf(nil, "b/%016x/%d", id, i) }

// crashMarker is the key naming writer's last committed sequence number.
func crashMarker(round, writer, seq int) []byte {
	return fmt.Appendf(nil, "m/%02d/%02d/%010d", round, writer, seq)
}

// crashFiller is the source of value bytes after the header.
var crashFiller = func() []byte {
	p := make([]byte, 2048+256)
	for i := range p {
		p[i] = byte(i)
	}
	return p
}()

// crashValue is key i of batch id: a 12-byte header then filler, 100 B to
// 2000 B: a group of batches spans several 32 KiB WAL blocks.
func crashValue(id uint64, i int) []byte {
	n := 100 + int((id*31+uint64(i)*977)%1900)
	v := make([]byte, 12, n)
	binary.BigEndian.PutUint64(v, id)
	binary.BigEndian.PutUint32(v[8:], uint32(i))
	off := int(id % 256)
	return append(v, crashFiller[off:off+n-12]...)
}

// TestCrashChild is the child side; it runs only when re-executed by
// TestCrashRecovery and commits until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashRecovery")
	}
	round, err := strconv.Atoi(os.Getenv(crashRoundEnv))
	if err != nil {
		t.Fatal(err)
	}
	// Small memtables force flushes and compactions while the kill comes.
	s, err := Open(dir, Options{MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute) // in case the parent is gone
	for w := range crashWriters {
		wg.Go(func() {
			for seq := 0; time.Now().Before(deadline); seq++ {
				id := crashID(round, w, seq)
				var b store.Batch
				for i := range crashKeys(id) {
					b.Set(crashKey(id, i), crashValue(id, i))
				}
				if seq > 0 {
					b.Delete(crashMarker(round, w, seq-1))
				}
				b.Set(crashMarker(round, w, seq), nil)
				if err := s.Commit(context.Background(), &b); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %d\n", id)
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	dir := t.TempDir()
	acked := map[uint64]bool{}
	for round := range crashRounds {
		start := time.Now()
		n := crashRun(t, dir, round, acked)
		killed := time.Since(start)
		crashVerify(t, dir, round, acked)
		t.Logf("round %d: %d batches acknowledged before SIGKILL after %v; verified in %v",
			round, n, killed.Round(time.Millisecond), (time.Since(start) - killed).Round(time.Millisecond))
	}
}

// crashRun runs one child until it has acknowledged a few thousand batches,
// kills it, and adds every acknowledged id to acked.
func crashRun(t *testing.T, dir string, round int, acked map[uint64]bool) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAt := 2000 + 1000*round // vary where the kill lands
	n := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		idText, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			continue // the testing package's own output
		}
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil {
			t.Fatalf("child printed %q: %v", sc.Text(), err)
		}
		acked[id] = true
		n++
		if n == killAt {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Lines already in the pipe were read to EOF: they are acknowledged too.
	err = cmd.Wait()
	if n < killAt {
		t.Fatalf("child exited after %d acks (%v):\n%s", n, err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v\n%s", err, stderr.String())
	}
	return n
}

// crashVerify reopens dir and checks the three properties for every round
// run so far.
func crashVerify(t *testing.T, dir string, lastRound int, acked map[uint64]bool) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer s.Close()

	// Every batch present is whole.
	keys := map[uint64]int{} // id -> keys seen
	err = s.Scan(context.Background(), []byte("b/"), []byte("b0"), func(k, v []byte) error {
		var id uint64
		var i int
		if _, err := fmt.Sscanf(string(k), "b/%016x/%d", &id, &i); err != nil {
			return fmt.Errorf("key %q: %v", k, err)
		}
		if !bytes.Equal(v, crashValue(id, i)) {
			return fmt.Errorf("key %q holds a wrong value (%d bytes)", k, len(v))
		}
		keys[id]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last := map[[2]int]int{} // (round, writer) -> highest seq present
	count := map[[2]int]int{}
	for id, n := range keys {
		if n != crashKeys(id) {
			t.Errorf("batch %x is torn: %d of %d keys", id, n, crashKeys(id))
		}
		r, w, seq := splitCrashID(id)
		rw := [2]int{r, w}
		count[rw]++
		if cur, ok := last[rw]; !ok || seq > cur {
			last[rw] = seq
		}
	}
	// Every acknowledged batch is present.
	missing := 0
	for id := range acked {
		if keys[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged batch %x is lost", id)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d acknowledged batches lost", missing)
	}
	// Per writer: a prefix of its sequence, and the marker on its end.
	markers := map[[2]int][]int{}
	err = s.Scan(context.Background(), []byte("m/"), []byte("m0"), func(k, _ []byte) error {
		var r, w, seq int
		if _, err := fmt.Sscanf(string(k), "m/%02d/%02d/%010d", &r, &w, &seq); err != nil {
			return fmt.Errorf("marker %q: %v", k, err)
		}
		markers[[2]int{r, w}] = append(markers[[2]int{r, w}], seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range lastRound + 1 {
		for w := range crashWriters {
			rw := [2]int{r, w}
			n, ok := count[rw]
			if !ok {
				if len(markers[rw]) != 0 {
					t.Errorf("round %d writer %d: markers %v without batches", r, w, markers[rw])
				}
				continue
			}
			if n != last[rw]+1 {
				t.Errorf("round %d writer %d: %d batches present, up to seq %d: not a prefix", r, w, n, last[rw])
			}
			if m := markers[rw]; len(m) != 1 || m[0] != last[rw] {
				t.Errorf("round %d writer %d: markers %v, want exactly [%d]", r, w, m, last[rw])
			}
		}
	}
}
