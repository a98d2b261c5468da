package pipeline

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func FuzzDecodeState(f *testing.F) {
	t0 := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	for _, st := range []*JobState{
		{LastTask: -1, Count: 3, Runs: 1, Started: t0, Updated: t0},
		{LastTask: 1, Count: 3, Failures: 1, Runs: 2, Origin: "batch-1", Started: t0, Updated: t0.Add(time.Minute)},
		{LastTask: 0, Count: 2, Failed: true, FailedTask: 1, Error: "table products is locked", Started: t0, Updated: t0},
	} {
		b, err := encodeState(st)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"null", "{}", `{"lastTask":-2,"count":1}`, `{"lastTask":0,"count":1,"runs":-1}`, `{"LASTTASK":0,"count":1,"lastTask":3}`,
		`{"lastTask":0,"count":1,"started":"10000-01-01T00:00:00Z"}`, `{"lastTask":1e2,"count":1}`, `[]`, `{"lastTask":0,"count":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if len(b) == 0 {
			if st != nil || err != nil {
				t.Fatalf("no state: %+v, %v; want nil, nil", st, err)
			}
			return
		}
		if err != nil {
			if st != nil || !strings.HasPrefix(err.Error(), "pipeline: ") {
				t.Fatalf("rejected state: %+v, %v", st, err)
			}
			return
		}
		// A state read is one the pipeline could have written: -1 or a
		// task index handled, from a job of at least one task, and counts
		// that are not negative. (A state read as task 0 handled, from
		// "{}", would have the pipeline skip task 0.)
		if st == nil || st.LastTask < -1 || st.Count < 1 || st.FailedTask < 0 || st.Failures < 0 || st.Runs < 0 {
			t.Fatalf("decodeState(%q) = %+v: not a state the pipeline writes", b, st)
		}
		// What is read is written back, and reads and writes the same.
		c1, err := encodeState(st)
		if err != nil {
			t.Fatalf("accepted state %q does not encode: %v", b, err)
		}
		again, err := decodeState(c1)
		if err != nil {
			t.Fatalf("re-encoded state %q is rejected: %v", c1, err)
		}
		c2, err := encodeState(again)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("re-encoding is not stable:\n%s\n%s (%v)", c1, c2, err)
		}
	})
}
