//go:build !busbar_ackbeforesync

package pebble

import "github.com/cockroachdb/pebble/v2"

// walSync is how a group commit writes the WAL: synced, so a caller is
// released only once its batch is on disk. The build tag
// busbar_ackbeforesync swaps it for a broken variant (walsync_broken.go).
var walSync = pebble.Sync
