package frames

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeSeeds stores inputs in testdata/fuzz/<name>/ when BUSBAR_WRITE_SEEDS
// is set; that is how the committed seed corpus was produced from real
// encodings (go-amqp's frames and this package's own).
func writeSeeds(t *testing.T, name string, inputs [][]byte) {
	t.Helper()
	if os.Getenv("BUSBAR_WRITE_SEEDS") == "" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		sum := sha256.Sum256(in)
		file := filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8]))
		if err := os.WriteFile(file, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", in), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteCodecSeeds(t *testing.T) {
	var seeds [][]byte
	for typ, bodies := range map[uint8][]Body{TypeAMQP: sampleBodies(), TypeSASL: saslBodies()} {
		for _, b := range bodies {
			f, err := Append(nil, typ, 1, b)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, f)
		}
	}
	writeSeeds(t, "FuzzDecode", seeds)
}

// FuzzDecode feeds arbitrary bytes to the frame decoder. Whatever decodes
// must re-encode, and re-encoding is idempotent: decode(append(x)) appends
// to the same bytes as x.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 8, 2, 0, 0, 0})
	var d Decoder
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseHeader(in)
		if err != nil {
			return
		}
		frame := in
		if int(h.Size) <= len(in) {
			frame = in[:h.Size]
		}
		body, err := Decode(h, frame)
		if err != nil {
			return
		}
		// The reusable decoder agrees with Decode.
		if _, err := d.Decode(h, frame); err != nil {
			t.Fatalf("Decoder failed where Decode succeeded: %v", err)
		}
		if body == nil {
			return
		}
		first, err := Append(nil, h.Type, h.Channel, body)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", body, err)
		}
		h2, err := ParseHeader(first)
		if err != nil {
			t.Fatal(err)
		}
		body2, err := Decode(h2, first)
		if err != nil {
			t.Fatalf("decoding our own encoding % x: %v", first, err)
		}
		second, err := Append(nil, h2.Type, h2.Channel, body2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding not idempotent:\n% x\n% x", first, second)
		}
		if tr, ok := body.(*Transfer); ok && TransferOverhead(tr)+len(tr.Payload) != len(first) {
			t.Fatalf("TransferOverhead %d + payload %d != frame %d", TransferOverhead(tr), len(tr.Payload), len(first))
		}
	})
}
