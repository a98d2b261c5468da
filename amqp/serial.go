package amqp

// Serial numbers (transfer-ids, delivery-ids, delivery-counts) are compared
// with RFC-1982 arithmetic on 32 bits: a is "before" b when the difference,
// read as a signed number, is negative.

// serialDiff returns a-b as a signed distance in serial-number space.
func serialDiff(a, b uint32) int64 { return int64(int32(a - b)) }

// serialLess reports whether a precedes b.
func serialLess(a, b uint32) bool { return int32(a-b) < 0 }

// windowFrom computes the room left in a window announced as (start, size)
// by the peer, given that our own counter has reached cur: start+size-cur,
// saturating at zero (never wrapping to a huge number, pitfall 1) and at the
// uint32 maximum.
func windowFrom(start, size, cur uint32) uint32 {
	v := int64(size) + serialDiff(start, cur)
	switch {
	case v <= 0:
		return 0
	case v > 0xFFFFFFFF:
		return 0xFFFFFFFF
	}
	return uint32(v)
}
