package benchcore

import (
	"testing"
	"time"
)

func TestBucketBoundsAreContiguous(t *testing.T) {
	// Every bucket starts right after the previous one ends, and every value
	// maps into the bucket whose bounds contain it.
	prevHigh := int64(-1)
	for i := 0; i < numBuckets; i++ {
		high := bucketHigh(i)
		low := prevHigh + 1
		if high < low {
			t.Fatalf("bucket %d: high %d below low %d", i, high, low)
		}
		if got := bucketOf(low); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", low, got, i)
		}
		if got := bucketOf(high); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", high, got, i)
		}
		prevHigh = high
	}
	if prevHigh != int64(MaxTrackable) {
		t.Fatalf("last bucket ends at %d, want %d", prevHigh, MaxTrackable)
	}
}

func TestBucketPrecision(t *testing.T) {
	// Below 64 ns values are exact; above, a bucket is at most 1/64 of its low bound wide.
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 129, 1000, 999_999, 1_000_000, 123_456_789, int64(MaxTrackable)} {
		i := bucketOf(v)
		high := bucketHigh(i)
		low := int64(0)
		if i > 0 {
			low = bucketHigh(i-1) + 1
		}
		if v < 64 && (low != v || high != v) {
			t.Errorf("value %d: bucket [%d,%d], want exact", v, low, high)
		}
		if width := high - low + 1; v >= 64 && width*64 > low {
			t.Errorf("value %d: bucket [%d,%d] wider than 1/64 of its low bound", v, low, high)
		}
	}
	if got := bucketHigh(bucketOf(1000)); got != 1007 {
		// 1000 = 0b1111101000: top 7 bits 1111101 (125) with shift 3 → [1000, 1007].
		t.Errorf("bucket of 1000 ends at %d, want 1007", got)
	}
}

func TestQuantilesOfUniformMicroseconds(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	if h.Count() != 1000 || h.Min() != time.Microsecond || h.Max() != time.Millisecond {
		t.Fatalf("count/min/max = %d/%v/%v", h.Count(), h.Min(), h.Max())
	}
	if h.Mean() != 500500*time.Nanosecond {
		t.Fatalf("mean = %v, want 500.5µs", h.Mean())
	}
	// The 500th value is 500µs = 500,000 ns; its bucket (shift 12, mantissa 122)
	// spans [499,712, 503,807], so the reported p50 is 503,807 ns.
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 1007 * time.Nanosecond},       // rank 1: 1µs, bucket [1000,1007]
		{0.5, 503807 * time.Nanosecond},   // rank 500
		{0.99, 991231 * time.Nanosecond},  // rank 990: 990,000 in [983,040, 991,231]
		{0.999, 999423 * time.Nanosecond}, // rank 999: 999,000 in [991,232, 999,423]
		{1, time.Millisecond},             // rank 1000: bucket [999,424, 1,007,615], clamped to the exact max
	} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d ns, want %d ns", c.q, got, c.want)
		}
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	var a, b, all Histogram
	for i := 0; i < 5000; i++ {
		d := time.Duration(i*i) * time.Nanosecond
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{}) // empty merges are no-ops
	if m != all {
		t.Fatalf("merged histogram differs from the one that recorded everything")
	}
}

func TestNegativeAndHugeValuesAreClamped(t *testing.T) {
	var h Histogram
	h.Record(-time.Second)
	h.Record(time.Hour)
	if h.Min() != 0 || h.Max() != MaxTrackable {
		t.Fatalf("min/max = %v/%v, want 0/%v", h.Min(), h.Max(), MaxTrackable)
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Fatalf("p50 = %v, want 0", got)
	}
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Mean() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
}
