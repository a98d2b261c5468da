package amqp

import "testing"

func TestSerialArithmetic(t *testing.T) {
	cases := []struct {
		a, b uint32
		less bool
		diff int64
	}{
		{0, 1, true, -1},
		{1, 0, false, 1},
		{4294967295, 0, true, -1}, // 2^32-1 precedes 0 (wrap)
		{0, 4294967292, false, 4},
		{4294967292, 3, true, -7},
		{5, 5, false, 0},
		{0, 1 << 31, true, -(1 << 31)}, // the undefined half-way point reads as "before"
	}
	for _, c := range cases {
		if got := serialLess(c.a, c.b); got != c.less {
			t.Errorf("serialLess(%d, %d) = %v, want %v", c.a, c.b, got, c.less)
		}
		if got := serialDiff(c.a, c.b); got != c.diff {
			t.Errorf("serialDiff(%d, %d) = %d, want %d", c.a, c.b, got, c.diff)
		}
	}
}

func TestWindowFrom(t *testing.T) {
	cases := []struct {
		start, size, cur, want uint32
	}{
		{0, 10, 0, 10},
		{0, 10, 4, 6},
		{0, 10, 10, 0},
		{0, 10, 15, 0}, // the peer's flow is stale: saturate, never wrap (pitfall 1)
		{4294967292, 10, 2, 4},
		{4294967292, 10, 4294967295, 7},
		{5, 0xFFFFFFFF, 5, 0xFFFFFFFF},
		{10, 0xFFFFFFFF, 5, 0xFFFFFFFF}, // clamps instead of overflowing
	}
	for _, c := range cases {
		if got := windowFrom(c.start, c.size, c.cur); got != c.want {
			t.Errorf("windowFrom(%d, %d, %d) = %d, want %d", c.start, c.size, c.cur, got, c.want)
		}
	}
}

func TestInRangeAcrossWrap(t *testing.T) {
	if !inRange(1, 4294967294, 2) || !inRange(4294967295, 4294967294, 2) || inRange(3, 4294967294, 2) || inRange(4294967293, 4294967294, 2) {
		t.Fatal("inRange mishandles a range that wraps")
	}
	m := map[uint32]bool{4294967295: true, 0: true, 7: true, 8: true, 9: true, 10: true}
	var got []uint32
	forRange(m, 4294967294, 2, func(id uint32, _ bool) { got = append(got, id) })
	if len(got) != 2 || got[0] != 4294967295 || got[1] != 0 {
		t.Fatalf("forRange visited %v, want [4294967295 0] in order", got)
	}
	// A range wider than the map iterates the map instead.
	got = got[:0]
	forRange(m, 0, 4294967295, func(id uint32, _ bool) { got = append(got, id) })
	if len(got) != 6 {
		t.Fatalf("forRange over everything visited %v", got)
	}
}
