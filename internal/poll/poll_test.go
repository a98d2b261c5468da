package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

type fakeTB struct{ failed string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestWaitTrueAfterSomeCalls(t *testing.T) {
	n := 0
	if !Wait(time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("Wait returned false for a condition that became true")
	}
	if n != 3 {
		t.Fatalf("cond evaluated %d times after it held, want exactly 3", n)
	}
}

func TestWaitTimesOut(t *testing.T) {
	start := time.Now()
	if Wait(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Wait returned true for a condition that never holds")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("Wait gave up after %v, before its 20ms deadline", el)
	}
}

func TestUntilReportsWhat(t *testing.T) {
	var f fakeTB
	Until(&f, 10*time.Millisecond, "the moon", func() bool { return false })
	if f.failed != "timed out after 10ms waiting for the moon" {
		t.Fatalf("failure message %q", f.failed)
	}
	f = fakeTB{}
	Until(&f, 10*time.Millisecond, "truth", func() bool { return true })
	if f.failed != "" {
		t.Fatalf("Until failed on a true condition: %q", f.failed)
	}
}

func TestUntilNilReportsLastError(t *testing.T) {
	var f fakeTB
	n := 0
	UntilNil(&f, 10*time.Millisecond, "queue empty", func() error {
		n++
		return fmt.Errorf("%d left", n)
	})
	want := fmt.Sprintf("timed out after 10ms waiting for queue empty: %d left", n)
	if f.failed != want {
		t.Fatalf("failure message %q, want %q", f.failed, want)
	}
	f = fakeTB{}
	UntilNil(&f, time.Second, "ok", func() error { return nil })
	if f.failed != "" {
		t.Fatal(errors.New(f.failed))
	}
}
