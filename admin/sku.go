package admin

import "strings"

// standardPartitions is how many partitions Service Bus Standard gives a
// partitioned queue or topic; its reported MaxSizeInMegabytes is the
// per-partition size times this (a 4096 MB partitioned queue reports
// 65536), and the largest per-partition size is standardMaxSizeMB.
const (
	standardPartitions = 16
	standardMaxSizeMB  = 5 * 1024
)

// standard reports whether the namespace is of the Standard tier.
func (h *handler) standard() bool { return strings.EqualFold(h.o.SKU, "Standard") }

// shownSizeMB is the MaxSizeInMegabytes a client sees for an entity.
func (h *handler) shownSizeMB(sizeMB int64, partitioned bool) int64 {
	if h.standard() && partitioned {
		return sizeMB * standardPartitions
	}
	return sizeMB
}

// storedSizeMB undoes shownSizeMB for a size a client sends back (an
// update echoes what it read): on a Standard namespace a partitioned
// entity's size above the per-partition maximum is the total of its
// partitions.
func (h *handler) storedSizeMB(sizeMB int64, partitioned bool) int64 {
	if h.standard() && partitioned && sizeMB > standardMaxSizeMB && sizeMB%standardPartitions == 0 {
		return sizeMB / standardPartitions
	}
	return sizeMB
}
