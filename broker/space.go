package broker

import (
	"errors"
	"fmt"

	"github.com/busbar-io/busbar/store"
)

// A full data volume. Service Bus refuses sends to a full entity with its
// quota error and keeps receives and settlements working; the broker does
// the same when the store's volume, rather than an entity, is full. A store
// that watches its volume (store.SpaceGuard) keeps a reserve of free space:
// below it, writes that add data are refused up front, and completions,
// abandons, dead-lettering and deferrals, which let data go or change
// little, go on in the reserve.

// errVolumeFull is what clients are told; it names no path of the
// broker's machine.
var errVolumeFull = errorf(ErrQuotaExceeded, "the broker's data volume is full: sends are refused until space is freed")

// checkSpace refuses a write that adds data while the store's volume is
// below its reserve.
func (b *Broker) checkSpace() error {
	g, ok := b.st.(store.SpaceGuard)
	if !ok {
		return nil
	}
	if err := g.CheckSpace(); err != nil {
		if errors.Is(err, store.ErrFull) {
			return errVolumeFull
		}
		return fmt.Errorf("store: %w", err)
	}
	return nil
}
