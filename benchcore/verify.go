package benchcore

import (
	"sync/atomic"
)

// idSet is a concurrent set of message ids below 2^32, kept as a bitmap in
// chunks allocated on first use.
type idSet struct {
	chunks [1 << 16]atomic.Pointer[[chunkWords]atomic.Uint64]
}

const (
	chunkBits  = 16 // ids per chunk: 65,536
	chunkWords = 1 << chunkBits / 64
)

// maxID is the largest id an idSet holds.
const maxID = 1<<32 - 1

// add inserts id and reports whether it was absent.
func (s *idSet) add(id uint64) bool {
	c := s.chunks[id>>chunkBits].Load()
	if c == nil {
		fresh := new([chunkWords]atomic.Uint64)
		if s.chunks[id>>chunkBits].CompareAndSwap(nil, fresh) {
			c = fresh
		} else {
			c = s.chunks[id>>chunkBits].Load()
		}
	}
	w := &c[(id&(1<<chunkBits-1))/64]
	bit := uint64(1) << (id % 64)
	return w.Or(bit)&bit == 0
}

// missingFrom counts the ids of want that are not in s.
func (s *idSet) missingFrom(want *idSet) (n int64, first int64) {
	first = -1
	for ci := range want.chunks {
		wc := want.chunks[ci].Load()
		if wc == nil {
			continue
		}
		hc := s.chunks[ci].Load()
		for wi := range wc {
			w := wc[wi].Load()
			if hc != nil {
				w &^= hc[wi].Load()
			}
			if w == 0 {
				continue
			}
			if first < 0 {
				for b := 0; b < 64; b++ {
					if w&(1<<b) != 0 {
						first = int64(ci)<<chunkBits + int64(wi)*64 + int64(b)
						break
					}
				}
			}
			for ; w != 0; w &= w - 1 {
				n++
			}
		}
	}
	return n, first
}

// Verifier checks delivery guarantees: every acknowledged message delivered
// exactly once and, for keyed messages, each key's messages delivered in
// sequence order. It is safe for concurrent use.
type Verifier struct {
	run            uint32
	sent, received idSet
	nextSeq        []atomic.Uint32 // per key: the sequence number expected next

	sentN, receivedN, duplicates, foreign, outOfOrder atomic.Int64
	firstOrderErr                                     atomic.Pointer[OrderError]
}

// OrderError describes the first per-key ordering violation seen.
type OrderError struct {
	Key, Want, Got uint32
}

// NewVerifier returns a Verifier for run with keys ordered keys.
func NewVerifier(run uint32, keys int) *Verifier {
	return &Verifier{run: run, nextSeq: make([]atomic.Uint32, keys)}
}

// Sent records that the broker acknowledged the message with id.
func (v *Verifier) Sent(id uint64) {
	if v.sent.add(id) {
		v.sentN.Add(1)
	}
}

// Outcome classifies one delivery.
type Outcome uint8

// The outcomes of Verifier.Deliver.
const (
	First     Outcome = iota // first delivery of the message
	Duplicate                // delivered before
	Foreign                  // not a message of this run
)

// Deliver records a delivery of a message with header h and classifies it.
// A keyed message whose sequence number is not one above the highest its
// key has delivered counts as an ordering violation (so 1, 0, 2 is two
// violations, not three); duplicates are not checked for order.
func (v *Verifier) Deliver(h Header) Outcome {
	if h.Run != v.run || h.ID > maxID || (h.Keyed && int(h.Key) >= len(v.nextSeq)) {
		v.foreign.Add(1)
		return Foreign
	}
	if !v.received.add(h.ID) {
		v.duplicates.Add(1)
		return Duplicate
	}
	v.receivedN.Add(1)
	if h.Keyed {
		next := &v.nextSeq[h.Key]
		want := next.Load()
		if h.Seq != want {
			v.outOfOrder.Add(1)
			v.firstOrderErr.CompareAndSwap(nil, &OrderError{Key: h.Key, Want: want, Got: h.Seq})
		}
		next.Store(max(want, h.Seq+1))
	}
	return First
}

// SentCount returns the number of distinct messages of this run whose send
// was acknowledged so far.
func (v *Verifier) SentCount() int64 { return v.sentN.Load() }

// ReceivedCount returns the number of distinct messages of this run delivered.
func (v *Verifier) ReceivedCount() int64 { return v.receivedN.Load() }

// Verdict is the outcome of a run's verification.
type Verdict struct {
	Sent       int64 `json:"sent"`
	Received   int64 `json:"received"`
	Missing    int64 `json:"missing"`
	Duplicates int64 `json:"duplicates"`
	OutOfOrder int64 `json:"out_of_order"`
	Foreign    int64 `json:"foreign"`
	// Unacknowledged counts deliveries of messages whose send was never
	// acknowledged (allowed, but reported).
	Unacknowledged int64 `json:"unacknowledged"`
	// FirstMissing is the lowest missing id, or -1.
	FirstMissing int64 `json:"first_missing"`
	// FirstOrderError is the first ordering violation, if any.
	FirstOrderError *OrderError `json:"first_order_error,omitempty"`
	// OK is true when every acknowledged message arrived exactly once and in order.
	OK bool `json:"ok"`
}

// Verdict compares what was acknowledged with what was delivered.
func (v *Verifier) Verdict() Verdict {
	missing, first := v.received.missingFrom(&v.sent)
	extra, _ := v.sent.missingFrom(&v.received)
	r := Verdict{
		Sent: v.sentN.Load(), Received: v.receivedN.Load(), Missing: missing,
		Duplicates: v.duplicates.Load(), OutOfOrder: v.outOfOrder.Load(), Foreign: v.foreign.Load(),
		Unacknowledged: extra, FirstMissing: first, FirstOrderError: v.firstOrderErr.Load(),
	}
	r.OK = r.Missing == 0 && r.Duplicates == 0 && r.OutOfOrder == 0
	return r
}
