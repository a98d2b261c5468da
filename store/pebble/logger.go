package pebble

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// slogLogger carries Pebble's log lines to a *slog.Logger, so they end up in
// the broker's structured log instead of on stderr. Pebble's informational
// lines (flushes, compactions, WAL recycling) are routine for a broker and go
// to Debug; its errors go to Error.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) {
	if !s.l.Enabled(context.Background(), slog.LevelDebug) {
		return // not formatted for nothing: Pebble logs every flush and compaction
	}
	s.l.Debug(line(format, args), "engine", "pebble")
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(line(format, args), "engine", "pebble")
}

// Fatalf is called by Pebble on an unrecoverable invariant violation (for
// example a failed MANIFEST write): continuing could corrupt the store.
// Pebble's default logger exits the process; this one logs and panics, which
// also stops the process but leaves a stack trace for the operator.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := line(format, args)
	s.l.Error(msg, "engine", "pebble", "fatal", true)
	panic("store/pebble: fatal: " + msg)
}

func line(format string, args []any) string {
	return strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
}

// eventListener logs Pebble's events: routine ones (flushes, compactions,
// WAL and table files) at Debug through slogLogger, and the ones an operator
// must see at Warn or Error: write stalls (every producer waits), a slow
// disk, low disk space and background errors.
func eventListener(l *slog.Logger, misuses *atomic.Uint64) *pebble.EventListener {
	el := pebble.MakeLoggingEventListener(slogLogger{l})
	el.WriteStallBegin = func(info pebble.WriteStallBeginInfo) {
		l.Warn("store write stall: commits wait for compaction", "engine", "pebble", "reason", info.Reason)
	}
	el.WriteStallEnd = func() {
		l.Info("store write stall ended", "engine", "pebble")
	}
	el.DiskSlow = func(info pebble.DiskSlowInfo) {
		l.Warn("store disk slow", "engine", "pebble", "path", info.Path,
			"op", info.OpType.String(), "duration", info.Duration)
	}
	el.LowDiskSpace = func(info pebble.LowDiskSpaceInfo) {
		l.Warn("store disk space low", "engine", "pebble", "avail_bytes", info.AvailBytes,
			"total_bytes", info.TotalBytes, "below_percent", info.PercentThreshold)
	}
	el.PossibleAPIMisuse = func(info pebble.PossibleAPIMisuseInfo) {
		// A single deletion (Batch.DeleteOnce) met a key written more than
		// once: its older value may come back. A bug in the caller.
		misuses.Add(1)
		l.Error("store: a key deleted as written once was written more than once (a bug: please report it)",
			"engine", "pebble", "kind", info.Kind.String(), "key", fmt.Sprintf("%x", info.UserKey))
	}
	el.BackgroundError = func(err error) {
		l.Error("store background error", "engine", "pebble", "err", err)
	}
	return &el
}
