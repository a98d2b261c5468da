package cluster

import (
	"bytes"
	"strings"
	"testing"
)

func FuzzDecodeLease(f *testing.F) {
	f.Add(encodeLease(1, "node-a"))
	f.Add(encodeLease(0, ""))
	f.Add(encodeLease(^uint64(0), "a node id with spaces and ünïcode"))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0})
	f.Add(append(encodeLease(7, ""), 0xff, 0x00))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLease(b)
		if err != nil {
			if len(b) >= 8 || l.epoch != 0 || l.owner != "" || l.raw != nil || !strings.HasPrefix(err.Error(), "cluster: ") {
				t.Fatalf("decodeLease(%x) = %+v, %v: a record of 8 bytes or more is a lease, a rejected one is the zero lease", b, l, err)
			}
			return
		}
		if len(b) < 8 {
			t.Fatalf("decodeLease(%x) = %+v: accepted a record shorter than its epoch", b, l)
		}
		// The record is the lease: it encodes back to the same bytes, which
		// are kept as raw (what a conditional write compares with).
		if enc := encodeLease(l.epoch, l.owner); !bytes.Equal(enc, b) || !bytes.Equal(l.raw, b) {
			t.Fatalf("decodeLease(%x) = %+v; encodes back as %x", b, l, enc)
		}
		again, err := decodeLease(encodeLease(l.epoch, l.owner))
		if err != nil || again.epoch != l.epoch || again.owner != l.owner {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", l, again, err)
		}
	})
}
