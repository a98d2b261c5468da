package encoding

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFuzzSeeds stores the encodings of roundTripValues and of the
// decode-variant inputs as the FuzzReadValue seed corpus when
// BUSBAR_WRITE_SEEDS is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("BUSBAR_WRITE_SEEDS") == "" {
		t.Skip("set BUSBAR_WRITE_SEEDS=1 to regenerate testdata/fuzz/FuzzReadValue")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReadValue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var inputs [][]byte
	for _, v := range roundTripValues() {
		b := mustAppend(t, v)
		if len(b) < 2048 {
			inputs = append(inputs, b)
		}
	}
	for _, s := range []string{"56 01", "d0 00000006 00000002 4141", "f0 00000007 00000002 52 0102",
		"e0 06 02 00 a3 01 78 45", "00 80 0000000000000024 45", "b1 00000001 61"} {
		inputs = append(inputs, hx(s))
	}
	for _, in := range inputs {
		sum := sha256.Sum256(in)
		file := filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8]))
		if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", in), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzReadValue feeds arbitrary bytes to the value decoder. Skip must
// consume exactly what ReadValue consumes, and whatever decodes must
// re-encode to bytes that decode and re-encode to themselves.
func FuzzReadValue(f *testing.F) {
	f.Add([]byte{0x40})
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(in)
		v, err := d.ReadValue()
		s := NewDecoder(in)
		skipErr := s.Skip()
		if err != nil {
			return
		}
		if skipErr != nil || s.Pos() != d.Pos() {
			t.Fatalf("Skip consumed %d (%v), ReadValue %d", s.Pos(), skipErr, d.Pos())
		}
		first, err := Append(nil, v)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", v, err)
		}
		d2 := NewDecoder(first)
		v2, err := d2.ReadValue()
		if err != nil {
			t.Fatalf("decoding our own % x: %v", first, err)
		}
		if d2.Len() != 0 {
			t.Fatalf("%d bytes left after our own encoding", d2.Len())
		}
		second, err := Append(nil, v2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding not idempotent:\n% x\n% x", first, second)
		}
	})
}
