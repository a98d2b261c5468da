package benchcore

import (
	"sync"
	"testing"
)

func TestVerifierExactlyOnce(t *testing.T) {
	v := NewVerifier(7, 0)
	for id := uint64(0); id < 1000; id++ {
		v.Sent(id)
	}
	v.Sent(5) // acknowledging twice counts once
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for id := uint64(w); id < 1000; id += 4 {
				if id == 500 {
					continue // lost
				}
				if got := v.Deliver(Header{Run: 7, ID: id}); got != First {
					t.Errorf("id %d: outcome %d, want First", id, got)
				}
			}
		}(w)
	}
	wg.Wait()
	if got := v.Deliver(Header{Run: 7, ID: 17}); got != Duplicate {
		t.Fatalf("redelivery of 17: outcome %d, want Duplicate", got)
	}
	if got := v.Deliver(Header{Run: 8, ID: 1}); got != Foreign {
		t.Fatalf("other run: outcome %d, want Foreign", got)
	}
	v.Deliver(Header{Run: 7, ID: 70_000}) // delivered, never acknowledged
	got := v.Verdict()
	want := Verdict{Sent: 1000, Received: 1000, Missing: 1, Duplicates: 1, Foreign: 1,
		Unacknowledged: 1, FirstMissing: 500}
	if got != want {
		t.Fatalf("verdict = %+v\nwant      %+v", got, want)
	}
}

func TestVerifierAllDeliveredIsOK(t *testing.T) {
	v := NewVerifier(1, 0)
	// Ids spread over several chunks, including the last id an idSet holds.
	ids := []uint64{0, 63, 64, 65535, 65536, 1 << 20, maxID}
	for _, id := range ids {
		v.Sent(id)
	}
	for _, id := range ids {
		v.Deliver(Header{Run: 1, ID: id})
	}
	got := v.Verdict()
	if !got.OK || got.Missing != 0 || got.FirstMissing != -1 || got.Sent != int64(len(ids)) {
		t.Fatalf("verdict = %+v, want OK with %d sent", got, len(ids))
	}
	if v.Deliver(Header{Run: 1, ID: maxID + 1}) != Foreign {
		t.Fatal("an id beyond the set's range must be foreign")
	}
}

func TestVerifierPerKeyOrder(t *testing.T) {
	v := NewVerifier(3, 2)
	for id := uint64(0); id < 6; id++ {
		v.Sent(id)
	}
	key := func(k, s uint32) Header {
		return Header{Run: 3, ID: uint64(k*3 + s), Keyed: true, Key: k, Seq: s}
	}
	// Key 0 in order, interleaved with key 1 delivered 0, 2, 1.
	for _, h := range []Header{key(0, 0), key(1, 0), key(0, 1), key(1, 2), key(0, 2), key(1, 1)} {
		v.Deliver(h)
	}
	v.Deliver(key(0, 1)) // a duplicate is not an ordering violation
	got := v.Verdict()
	if got.OK || got.OutOfOrder != 2 || got.Duplicates != 1 || got.Missing != 0 {
		t.Fatalf("verdict = %+v, want 2 out of order and 1 duplicate", got)
	}
	if e := got.FirstOrderError; e == nil || *e != (OrderError{Key: 1, Want: 1, Got: 2}) {
		t.Fatalf("first order error = %+v, want key 1 want 1 got 2", e)
	}
	if v.Deliver(Header{Run: 3, ID: 1, Keyed: true, Key: 9}) != Foreign {
		t.Fatal("a key beyond the workload's must be foreign")
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, HeaderSize+10)
	h := Header{Run: 0xdeadbeef, ID: 1<<40 + 3, Keyed: true, Last: true, Key: 9999, Seq: 9, Intended: 123456789}
	EncodeHeader(b, h)
	got, err := DecodeHeader(b)
	if err != nil || got != h {
		t.Fatalf("DecodeHeader = %+v, %v; want %+v", got, err, h)
	}
	if _, err := DecodeHeader(b[:HeaderSize-1]); err == nil {
		t.Fatal("a short body must not decode")
	}
	if _, err := DecodeHeader([]byte("hello, this is not a benchmark body")); err == nil {
		t.Fatal("a foreign body must not decode")
	}
}
