package benchcore

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records durations in log-linear buckets: values below 2^subBits
// nanoseconds are exact, and above that every power of two is split into
// 2^subBits equal buckets, so a recorded value is known to within 1/64
// (about 1.6%). Values above MaxTrackable are clamped to it. The zero value
// is ready to use. A Histogram is not safe for concurrent use: give each
// goroutine its own and Merge them.
type Histogram struct {
	counts   [numBuckets]uint64
	total    uint64
	sum      float64 // nanoseconds
	min, max int64
}

const (
	subBits    = 6
	subCount   = 1 << subBits // buckets per power of two
	maxExp     = 40           // 2^40 ns ≈ 18 minutes
	numBuckets = (maxExp - subBits + 1) * subCount
)

// MaxTrackable is the largest duration a Histogram distinguishes.
const MaxTrackable = time.Duration(1)<<maxExp - 1

// bucketOf returns the bucket index of v (v ≥ 0).
func bucketOf(v int64) int {
	u := uint64(v)
	if u < subCount {
		return int(u)
	}
	shift := bits.Len64(u) - subBits - 1 // keep the top subBits+1 bits
	return (shift+1)*subCount + int(u>>uint(shift)) - subCount
}

// bucketHigh returns the largest value that falls into bucket i.
func bucketHigh(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	shift := i/subCount - 1
	mant := int64(i%subCount + subCount)
	return (mant+1)<<uint(shift) - 1
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	if v > int64(MaxTrackable) {
		v = int64(MaxTrackable)
	}
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.total }

// Min and Max return the exact smallest and largest observation (0 if none).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max returns the largest observation.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the arithmetic mean of the observations.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.total)))
}

// Quantile returns the smallest bucket bound below or at which at least a
// fraction q of the observations lie: the q-quantile rounded up to the
// histogram's precision, and never above the exact maximum. q is clamped to
// [0, 1]; an empty histogram returns 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	q = math.Max(0, math.Min(1, q))
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank == 0 {
		rank = 1
	}
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return time.Duration(min(bucketHigh(i), h.max))
		}
	}
	return time.Duration(h.max)
}
